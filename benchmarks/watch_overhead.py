"""Watch mode's cost on top of capture: steady-call ratio and memory over many calls. Printed, not
timed in a test; run it on a quiet machine (``docs/performance.md``).

*Steady ratio*: one session over the 8-region workload of ``capture_overhead.py`` with a watcher
attached and its metrics synced (a Prometheus registry, no server), after the detail window; blocks
of 100 calls alternate between watch on (C's wall histogram on) and off: what watch mode adds per
steady call, as a ratio of block medians, over ``--rounds`` fresh sessions. A read of the
counts (what a Prometheus scrape does, between calls) is timed on its own. The ratio against plain
``torch.compile`` is ``capture_overhead.py``'s, times this one.

*Memory*: ``--memory N`` calls (default 1,000,000) of a one-region function under watch, the
process's resident size after 10,000 calls and at the end (flat: nothing grows per call).

Run: ``.venv/bin/python benchmarks/watch_overhead.py [--calls N] [--rounds R] [--memory N] [--size S]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture_overhead as co  # noqa: E402 - the same workload and its helpers

BLOCK = 100


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def ratio(calls: int, rounds: int, size: int, sync_every: float) -> None:
    import prometheus_client as pc

    from seamscope.capture.session import Session
    from seamscope.capture.watch import Watcher
    from seamscope.capture.watch_metrics import PrometheusSink
    from seamscope.model.watch import STEADY_BUCKETS_S

    x = torch.randn(size, size)
    ratios: list[float] = []
    sync_ns: list[int] = []
    on_all: list[int] = []
    off_all: list[int] = []
    for r in range(rounds):
        torch.compiler.reset()
        co.first_compiled_aside(x, "eager")
        s = Session(first_calls=64, call_cap=64)
        s.start()
        w = Watcher(0, sinks=[PrometheusSink(None, pc.CollectorRegistry())], sync_every=sync_every)
        w.attach(s)
        try:
            f = torch.compile(co.fresh_function(), backend="eager")
            for _ in range(200):  # compiled, then past the calls kept in detail
                f(x)
            lane = s._lane
            bounds = [round(b * 1e9) for b in STEADY_BUCKETS_S]
            on_r: list[int] = []
            off_r: list[int] = []
            for i in range(calls // BLOCK):
                on = (i + r) % 2 == 0
                if lane is not None:
                    lane.set_wall_buckets(bounds if on else ())
                times = [co.timed(f, x) for _ in range(BLOCK)]
                (on_r if on else off_r).append(int(statistics.median(times)))
            ratios += [a / b for a, b in zip(on_r, off_r, strict=False) if b]
            on_all += on_r
            off_all += off_r
            t0 = time.perf_counter_ns()
            w.sync()
            sync_ns.append(time.perf_counter_ns() - t0)
        finally:
            w.detach()
            s.stop()
    q = statistics.quantiles(ratios, n=4) if len(ratios) >= 4 else [min(ratios), statistics.median(ratios), max(ratios)]
    print(f"size {size}: steady call, watch on / watch off: {statistics.median(ratios):.4f} "
          f"(quartiles {q[0]:.4f}-{q[-1]:.4f}, {len(ratios)} block pairs of {BLOCK}); "
          f"median call {statistics.median(off_all) / 1e3:.1f} µs off, {statistics.median(on_all) / 1e3:.1f} µs on; "
          f"one read of the counts (a scrape's) {statistics.median(sync_ns) / 1e3:.0f} µs")


def memory(n: int) -> None:
    import prometheus_client as pc

    import seamscope

    torch.compiler.reset()
    x = torch.randn(4)
    with seamscope.watch(warmup=100, prometheus_registry=pc.CollectorRegistry(), sync_every=1.0) as w:
        f = torch.compile(lambda t: t + 1, backend="eager")
        for _ in range(10_000):
            f(x)
        start = rss_mib()
        for _ in range(n - 10_000):
            f(x)
        end = rss_mib()
        w.watcher.sync()
        calls = sum(w.watcher.last.calls.values()) if w.watcher.last else 0
    print(f"memory over {n:,} watched calls: {start:.1f} MiB after 10,000, {end:.1f} MiB at the end "
          f"({end - start:+.1f} MiB); {calls:,} calls counted, {len(w.events)} events")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=8000, help="calls per round (blocks of 100, watch on and off)")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--size", type=int, nargs="+", default=[64, 160])
    ap.add_argument("--sync-every", type=float, default=1.0)
    ap.add_argument("--memory", type=int, default=1_000_000, help="calls of the memory run (0: none)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    logging.getLogger("seamscope").setLevel(logging.ERROR)  # warm-up 0: every first compilation is an event
    from seamscope import _native

    print("capture path:", "C (seamscope._speedups)" if _native.NATIVE else f"pure Python ({_native.WHY_NOT})")
    for size in args.size:
        ratio(args.calls, args.rounds, size, args.sync_every)
    if args.memory:
        memory(args.memory)


if __name__ == "__main__":
    main()
