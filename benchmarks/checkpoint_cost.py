"""What a checkpoint costs, and what checkpoints add to a long run's steady calls.

A session observes ``--calls`` calls (200,000 by default) of a small compiled function with one
break (two regions per call, eager backend). Printed:

- *a checkpoint of the whole run so far*: the receipt built from the ledger and written into the
  output folder, timed at the end of the run (the median of ``--repeat`` checkpoints), with the
  receipt's size. A ledger keeps per-call detail for a bounded number of calls (the totals are
  exact), so the figure stops growing with the run's length;
- *steady calls with checkpoints on*: the same run with ``--every`` seconds between checkpoints
  against one without any (rounds alternate which runs first), the time per call of each, the
  ratio, and the share of the run's time its checkpoints took (``persist.MAX_SHARE`` bounds it).

Run: ``.venv/bin/python benchmarks/checkpoint_cost.py [--calls N] [--every S] [--rounds N]``. A
figure for the README needs a quiet machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch


def f(x):
    x = x.sin() + 1
    torch._dynamo.graph_break()
    return x.cos()


def one_run(calls: int, every: float, folder: str) -> tuple[float, object]:
    """Seconds per call of ``calls`` observed calls, and the session (still holding its output)."""
    import seamscope

    torch._dynamo.reset()
    x = torch.ones(8)
    s = seamscope.session(out=folder, checkpoint_every=every)
    with s:
        g = torch.compile(f, backend="eager")
        for _ in range(3):
            g(x)
        t0 = time.perf_counter()
        for _ in range(calls):
            g(x)
        per_call = (time.perf_counter() - t0) / calls
        output = s.output
        if every == 0:  # the cost of one checkpoint of the whole run, timed here
            costs = []
            for _ in range(ARGS.repeat):
                output.checkpoint()
                costs.append(output.last_cost)
            s.checkpoint_costs = costs  # type: ignore[attr-defined]
        s.checkpoints_written = output.checkpoints  # type: ignore[attr-defined]
        s.checkpoint_spent = output.spent  # type: ignore[attr-defined]
    return per_call, s


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=200_000)
    p.add_argument("--every", type=float, default=1.0, help="Seconds between checkpoints in the 'on' runs.")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--repeat", type=int, default=3, help="Checkpoints timed at the end of a run.")
    global ARGS
    ARGS = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        off: list[float] = []
        on: list[float] = []
        shares: list[float] = []
        counts: list[int] = []
        cost: list[float] = []
        size = 0
        for r in range(ARGS.rounds):
            order = [(0.0, off), (ARGS.every, on)]
            if r % 2:
                order.reverse()
            for every, into in order:
                folder = os.path.join(tmp, f"r{r}-{every}")
                t0 = time.perf_counter()
                per_call, s = one_run(ARGS.calls, every, folder)
                elapsed = time.perf_counter() - t0
                into.append(per_call)
                if every:
                    shares.append(s.checkpoint_spent / elapsed)  # type: ignore[attr-defined]
                    counts.append(s.checkpoints_written)  # type: ignore[attr-defined]
                else:
                    cost += s.checkpoint_costs  # type: ignore[attr-defined]
                    size = os.path.getsize(os.path.join(folder, "receipt.json"))
        print(f"{ARGS.calls} calls, 2 regions each, eager backend, {ARGS.rounds} rounds "
              f"({'C hot path' if s.native is not None else 'pure Python'})")  # type: ignore[attr-defined]
        print(f"a checkpoint of the whole run so far: median {statistics.median(cost) * 1e3:.1f} ms "
              f"(min {min(cost) * 1e3:.1f}, max {max(cost) * 1e3:.1f}); receipt {size / 1024:.0f} KiB")
        m_off, m_on = statistics.median(off), statistics.median(on)
        print(f"steady call, no checkpoints: {m_off * 1e6:.2f} µs; checkpoints every {ARGS.every:g} s: "
              f"{m_on * 1e6:.2f} µs; ratio {m_on / m_off:.3f}")
        from seamscope.capture.persist import MAX_SHARE

        print(f"checkpoints written per run: {statistics.median(counts):g}; share of the run's time: "
              f"median {statistics.median(shares) * 100:.2f}% (bound {MAX_SHARE * 100:.0f}% after the first)")
        sys.stdout.flush()


ARGS: argparse.Namespace

if __name__ == "__main__":
    main()
