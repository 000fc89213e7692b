"""Dispatch per call: seamscope's estimate beside the profiler's ``TorchDynamo Cache Lookup``.

A GPT-2 built from a config (``--layers`` blocks, ``--width`` wide, ``use_cache=False``) is
compiled whole with the eager backend and ``dynamic=False``, and called with ``E`` sequence
lengths in turn (``--entries``: ``E`` cache entries of one frame; taken in turn, each lookup ends on
the least recently used entry, so it checks all ``E``). For each (layers, entries):

- inside ``seamscope.session``: the warm-up that compiles the entries, then ``--calls`` steady
  calls; the receipt's dispatch section gives PyTorch's guard count and guard latency per entry and
  seamscope's estimate per steady call (capped by the call's islands, and before the cap);
- then, outside the session, the same calls under ``torch.profiler``: the ``TorchDynamo Cache
  Lookup`` events' CPU time per call (their median times the lookups per call).

Medians over the steady calls throughout (a loaded machine's stalls stay out of them).

Printed, never asserted: PyTorch times each entry's guards once, at compile time, after a cache
flush, while the profiler sees warm lookups; how far apart they are is what this shows. Run it on
a quiet machine and say when it was not.

    .venv/bin/python benchmarks/dispatch_cost.py --layers 2 6 12 --entries 1 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))


def measure(layers: int, entries: int, width: int, calls: int) -> dict[str, float]:
    import torch
    from transformers import GPT2Config, GPT2Model
    from transformers.utils import logging

    import seamscope
    from seamscope.analyze.dispatch import analyze_dispatch

    logging.set_verbosity_error()
    torch._dynamo.reset()
    torch.manual_seed(0)
    cfg = GPT2Config(n_layer=layers, n_embd=width, n_head=2, vocab_size=128, n_positions=64, use_cache=False)
    model = GPT2Model(cfg).eval()
    inputs = [torch.randint(0, 128, (1, 8 + 4 * k)) for k in range(entries)]
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        with seamscope.session(out=tmp) as s:
            f = torch.compile(model, backend="eager", dynamic=False)
            for x in inputs:
                f(x)
            for i in range(calls):
                f(inputs[i % entries])
        d = analyze_dispatch(s.ledger)
        assert d is not None
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU]) as p:
            for i in range(calls):
                f(inputs[i % entries])
    lookups = [e.cpu_time_total for e in p.events() if e.name == "TorchDynamo Cache Lookup"]
    steady = [r for r in d.calls if r.phase == "steady"]
    entry = [e for fr in d.frames for e in fr.entries]
    walls = [c.wall_ns for c in s.ledger.calls if c.phase == "steady"]
    return {
        "guards": statistics.mean(e.guard_count or 0 for e in entry),
        "latency_us": statistics.mean((e.guard_latency_ns or 0) / 1e3 for e in entry),
        "estimate_us": statistics.median(r.estimate_ns for r in steady) / 1e3,
        "raw_us": statistics.median(r.raw_ns for r in steady) / 1e3,
        "lookup_us": statistics.median(lookups) * len(lookups) / calls if lookups else 0.0,
        "lookups": len(lookups) / calls,
        "call_us": statistics.median(walls) / 1e3,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, nargs="+", default=[2, 6, 12])
    ap.add_argument("--entries", type=int, nargs="+", default=[1, 3])
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--calls", type=int, default=60)
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    print(f"GPT-2 from a config, {a.width} wide, eager backend, dynamic=False; {a.calls} steady calls each; "
          f"torch {torch.__version__}, {os.cpu_count()} CPUs")
    head = ("layers", "entries", "guards/entry", "PyTorch latency/entry", "estimate/call (raw)",
            "profiler lookup/call", "estimate/profiler", "steady call")
    print(" | ".join(head))
    for layers in a.layers:
        for entries in a.entries:
            m = measure(layers, entries, a.width, a.calls)
            ratio = m["estimate_us"] / m["lookup_us"] if m["lookup_us"] else float("nan")
            print(f"{layers} | {entries} | {m['guards']:.0f} | {m['latency_us']:.0f} µs | "
                  f"{m['estimate_us']:.0f} µs ({m['raw_us']:.0f} µs) | {m['lookup_us']:.0f} µs "
                  f"({m['lookups']:.1f} lookups) | {ratio:.2f}× | {m['call_us']:.0f} µs", flush=True)


if __name__ == "__main__":
    main()
