"""What capture's hot path costs in a tight loop, without torch's work around it.

A plain Python function stands for the compiled callable and for each compiled graph: the
difference between the observed and the plain loop is seamscope's own instructions per call and
per region crossing. In a real call the same instructions cost about twice as much (torch's code
runs in between and shares the caches); ``capture_overhead.py`` measures that. Rounds alternate
plain and observed loops; medians.

Run: ``.venv/bin/python benchmarks/capture_micro.py [--regions N]``; ``SEAMSCOPE_PURE_PYTHON=1``
for the pure-Python path.
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--regions", type=int, default=8)
    ap.add_argument("--calls", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()

    import torch  # noqa: F401  (the session needs it)

    from seamscope import _native
    from seamscope.capture.session import Session

    s = Session(first_calls=16, call_cap=16)
    s.start()
    try:
        def graph(x: int) -> int:
            return x

        timers = [s._wrap_graph(graph, f"{i}/0", autograd=False) for i in range(args.regions)]
        plain_graphs = [graph] * args.regions

        def run_with(graphs):  # type: ignore[no-untyped-def]
            def fn(x: int) -> int:
                for g in graphs:
                    x = g(x)
                return x
            return fn

        plain = run_with(plain_graphs)
        empty = run_with([])
        observed_empty = s._tracked(empty)
        observed = s._tracked(run_with(timers))
        for f in (plain, empty, observed_empty, observed):
            for _ in range(2000):
                f(1)

        def loop(f) -> float:  # type: ignore[no-untyped-def]
            t0 = time.perf_counter_ns()
            for _ in range(args.calls):
                f(1)
            return (time.perf_counter_ns() - t0) / args.calls

        res: dict[str, list[float]] = {k: [] for k in ("plain", "empty", "observed_empty", "observed")}
        for _ in range(args.rounds):
            res["plain"].append(loop(plain))
            res["observed"].append(loop(observed))
            res["empty"].append(loop(empty))
            res["observed_empty"].append(loop(observed_empty))
    finally:
        s.stop()
    med = {k: statistics.median(v) for k, v in res.items()}
    call_ns = med["observed_empty"] - med["empty"]
    per_region = (med["observed"] - med["plain"] - call_ns) / max(args.regions, 1)
    path = "C (seamscope._speedups)" if _native.NATIVE else f"pure Python ({_native.WHY_NOT})"
    print(f"capture path: {path}; clock inside a call: {_native.TICKS or 'clock_gettime'}")
    print(f"a call: {call_ns:.0f} ns; a region crossing: {per_region:.0f} ns; "
          f"a steady call of {args.regions} regions: {med['observed'] - med['plain']:.0f} ns "
          f"(plain loop {med['plain']:.0f} ns, observed {med['observed']:.0f} ns)")


if __name__ == "__main__":
    main()
