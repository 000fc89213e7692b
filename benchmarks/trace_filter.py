"""What capture costs compilation: PyTorch's structured-logging time, and whole-script wall time.

Two kinds of script, neither used by the tests: a GPT-2 built from a config, run at growing
sequence lengths with attentions and hidden states returned, under ``backend="eager"`` (many
frames: graph breaks and recompiles); and a BERT classifier under inductor. Each run is a fresh
process with a cold inductor cache. Per round the variants run one after the other, in an order
that rotates between rounds:

- ``plain``: ``python script.py``;
- ``seamscope``: ``seamscope run script.py`` (records PyTorch builds only for what capture reads);
- ``full`` (``--full``): the same with ``SEAMSCOPE_FULL_TRACE=1`` (every record built, as before).

Printed per kind and variant: PyTorch's own ``structured_logging_overhead_s`` as a share of frame
compile time (``entire_frame_compile_time_s``, both summed over its compilation metrics), and the
script's wall time (and the CPU time of its process, steadier on a shared machine) against the
plain one of the same round (median over rounds).

    .venv/bin/python benchmarks/trace_filter.py [--rounds 2] [--kinds eager,inductor] [--full]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_REPORT = """
ms = torch._dynamo.utils.get_compilation_metrics()
with open(os.environ["SEAMSCOPE_BENCH_METRICS"], "w") as f:
    json.dump({
        "frames": len(ms),
        "compile_s": sum(m.entire_frame_compile_time_s or 0 for m in ms),
        "logging_s": sum(m.structured_logging_overhead_s or 0 for m in ms),
    }, f)
"""

WORKLOADS = {
    "eager": """
import contextlib, json, os
import torch, transformers
torch._dynamo.utils.set_compilation_metrics_limit(100000)
cfg = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, n_positions=1024, vocab_size=512,
                              bos_token_id=0, eos_token_id=0)
torch.manual_seed(0)
model = transformers.GPT2LMHeadModel(cfg).eval()
cm = torch.compile(model, backend="eager")
with torch.no_grad(), contextlib.redirect_stdout(open(os.devnull, "w")):
    for n in (256, 512, 1024, 1024):
        cm(input_ids=torch.randint(0, 512, (1, n)), output_attentions=True, output_hidden_states=True)
""",
    "inductor": """
import json, os
import torch, transformers
torch._dynamo.utils.set_compilation_metrics_limit(100000)
cfg = transformers.BertConfig(vocab_size=512, hidden_size=64, num_hidden_layers=1, num_attention_heads=4,
                              intermediate_size=128, num_labels=3)
torch.manual_seed(0)
model = transformers.BertForSequenceClassification(cfg).eval()
cm = torch.compile(model)
with torch.no_grad():
    for _ in range(3):
        cm(input_ids=torch.randint(0, 512, (2, 128)))
""",
}


def run_once(kind: str, variant: str, work: str) -> dict[str, float]:
    script = os.path.join(work, f"{kind}.py")
    metrics = os.path.join(work, f"{kind}-{variant}.json")
    env = dict(os.environ)
    env.pop("TORCH_TRACE", None)
    env.pop("SEAMSCOPE_FULL_TRACE", None)
    env["PYTHONPATH"] = os.path.join(ROOT, "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["SEAMSCOPE_BENCH_METRICS"] = metrics
    env["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="ind-", dir=work)  # cold, every run
    if variant == "plain":
        cmd = [sys.executable, script]
    else:
        cmd = [sys.executable, "-m", "seamscope", "run", "--quiet", "--out", os.path.join(work, "out"), script]
        if variant == "full":
            env["SEAMSCOPE_FULL_TRACE"] = "1"
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, env=env, cwd=work, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"{kind}/{variant} failed:\n{p.stderr[-3000:]}")
    with open(metrics) as f:
        out: dict[str, float] = json.load(f)
    out["wall_s"] = wall
    out["cpu_s"] = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--kinds", default="eager,inductor")
    ap.add_argument("--full", action="store_true", help="also run capture with every record built")
    args = ap.parse_args()
    variants = ["plain", "seamscope"] + (["full"] if args.full else [])
    with tempfile.TemporaryDirectory(prefix="seamscope-bench-") as work:
        for kind in args.kinds.split(","):
            with open(os.path.join(work, f"{kind}.py"), "w") as f:
                f.write(WORKLOADS[kind] + _REPORT)
            runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
            for r in range(args.rounds):
                order = variants[r % len(variants) :] + variants[: r % len(variants)]
                for v in order:
                    runs[v].append(run_once(kind, v, work))
                    m = runs[v][-1]
                    print(
                        f"  {kind} round {r + 1} {v:9s} wall {m['wall_s']:6.1f} s  cpu {m['cpu_s']:6.1f} s  "
                        f"frames {m['frames']:.0f}  "
                        f"compile {m['compile_s']:6.2f} s  logging {m['logging_s']:.3f} s",
                        flush=True,
                    )
            print(f"{kind}: variant, logging / frame compile time, wall and CPU time vs plain (median of "
                  f"{args.rounds})")
            for v in variants:
                logging_s = sum(m["logging_s"] for m in runs[v])
                compile_s = sum(m["compile_s"] for m in runs[v])
                ratio = statistics.median(
                    a["wall_s"] / b["wall_s"] for a, b in zip(runs[v], runs["plain"], strict=True)
                )
                cpu = statistics.median(a["cpu_s"] / b["cpu_s"] for a, b in zip(runs[v], runs["plain"], strict=True))
                print(
                    f"  {v:9s} logging {logging_s:7.3f} s of {compile_s:7.2f} s = {logging_s / compile_s:6.2%}   "
                    f"wall {statistics.median(m['wall_s'] for m in runs[v]):6.1f} s  x{ratio:.3f}   "
                    f"cpu {statistics.median(m['cpu_s'] for m in runs[v]):6.1f} s  x{cpu:.3f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
