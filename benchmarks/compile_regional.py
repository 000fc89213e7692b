"""Whole-model against regional compilation of a transformers model: compile time and total time,
as seamscope measures them and as a plain script measures them, side by side.

A GPT-2 built from a config (``--layers`` identical blocks, ``use_cache=False``) is compiled
either whole (``torch.compile(model)``) or regionally (``block.compile()`` for each ``GPT2Block``),
then called ``--calls`` times on one input. Each (mode, measurer) pair runs in a fresh process with
an empty ``TORCHINDUCTOR_CACHE_DIR`` (a cold start):

- ``plain``: the script alone, timing its own calls with ``time.perf_counter_ns``: the first call
  (compilation included) and the sum of all calls;
- ``seamscope``: the same script inside ``seamscope.session``: the receipt's compile time, its
  stage split, the calls' wall time; the script's own timing of the same calls is printed beside it.

The outputs of the two modes are compared (max abs difference). Printed, never asserted: on a busy
machine the figures say little; rerun on a quiet one.

    .venv/bin/python benchmarks/compile_regional.py --layers 6 --backend inductor
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

SCRIPT = r'''
import json, sys, time
import torch
from transformers import GPT2Config, GPT2Model

mode, measurer, layers, embd, seq, calls, backend, out = sys.argv[1:9]
layers, embd, seq, calls = int(layers), int(embd), int(seq), int(calls)
torch.manual_seed(0)
cfg = GPT2Config(n_layer=layers, n_embd=embd, n_head=4, vocab_size=256, n_positions=max(64, seq),
                 use_cache=False)
model = GPT2Model(cfg).eval()
ids = torch.randint(0, 256, (1, seq))

def run():
    if mode == "whole":
        fn = torch.compile(model, backend=backend)
    else:
        for block in model.h:
            block.compile(backend=backend)
        fn = model
    times = []
    with torch.no_grad():
        for _ in range(calls):
            t0 = time.perf_counter_ns()
            y = fn(ids).last_hidden_state
            times.append(time.perf_counter_ns() - t0)
    return y, times

if measurer == "seamscope":
    import seamscope
    from seamscope.analyze.findings import analyze_findings
    with seamscope.session(write_html=False) as s:
        y, times = run()
    ct = analyze_findings(s.ledger).compile_time
    wall = sum(p.wall_ns for p in s.ledger.totals.phases)
    seen = {"compile_ns": ct.compile_ns, "wall_ns": wall, "compilations": ct.split.compilations,
            "dynamo_ns": ct.split.dynamo_ns, "aot_ns": ct.split.aot_autograd_ns, "inductor_ns": ct.split.inductor_ns,
            "calls": s.ledger.totals.calls,
            "findings": [f.kind for f in ct.findings]}
else:
    y, times = run()
    seen = None
torch.save(y, out + ".pt")
json.dump({"times": times, "seamscope": seen}, open(out, "w"))
'''


def fmt(ns: float | None) -> str:
    if ns is None:
        return "–"
    return f"{ns / 1e9:.3f} s" if ns >= 1e8 else f"{ns / 1e6:.2f} ms"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--seq", type=int, default=16)
    ap.add_argument("--calls", type=int, default=5)
    ap.add_argument("--backend", default="inductor")
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    src = os.path.join(os.path.dirname(here), "src")
    results: dict[tuple[str, str], dict] = {}
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "gpt2.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        for mode in ("whole", "regional"):
            for measurer in ("plain", "seamscope"):
                out = os.path.join(d, f"{mode}-{measurer}.json")
                env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=os.path.join(d, f"cache-{mode}-{measurer}"),
                           PYTHONPATH=src + os.pathsep + os.environ.get("PYTHONPATH", ""))
                subprocess.run(
                    [sys.executable, script, mode, measurer, str(a.layers), str(a.embd), str(a.seq), str(a.calls),
                     a.backend, out],
                    env=env, check=True, capture_output=True, timeout=3600,
                )
                with open(out) as f:
                    results[(mode, measurer)] = json.load(f)
        import torch

        diff = torch.load(os.path.join(d, "whole-plain.json.pt")) - torch.load(
            os.path.join(d, "regional-plain.json.pt")
        )
        maxdiff = float(diff.abs().max())
    print(f"GPT-2, {a.layers} identical blocks, n_embd {a.embd}, seq {a.seq}, {a.calls} calls, backend {a.backend}; "
          "each row a fresh process with an empty Inductor cache")
    print(
        f"{'mode':9} {'measured by':11} {'compile':>10} {'first call':>11} {'all calls':>11} {'steady/call':>12}  "
        "detail"
    )
    for (mode, measurer), r in results.items():
        t = r["times"]
        steady = sum(t[1:]) / max(1, len(t) - 1)
        if measurer == "plain":
            print(f"{mode:9} {'script':11} {'–':>10} {fmt(t[0]):>11} {fmt(sum(t)):>11} {fmt(steady):>12}")
        else:
            s = r["seamscope"]
            print(f"{mode:9} {'seamscope':11} {fmt(s['compile_ns']):>10} {'':>11} {fmt(s['wall_ns']):>11} {'':>12}  "
                  f"{s['compilations']} compilation(s), {s['calls']} call(s); Dynamo {fmt(s['dynamo_ns'])}, "
                  f"AOT {fmt(s['aot_ns'])}, Inductor {fmt(s['inductor_ns'])}; findings {', '.join(s['findings'])}")
            print(f"{'':9} {'(script)':11} {'–':>10} {fmt(t[0]):>11} {fmt(sum(t)):>11} {fmt(steady):>12}")
    print(f"outputs whole vs regional: max abs difference {maxdiff:.3g}")
    print("seamscope counts a call per top-level compiled call: under regional compilation each block's call is one "
          "(the model itself is not compiled), so its call count is layers x calls")


if __name__ == "__main__":
    main()
