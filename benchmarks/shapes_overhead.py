"""Speed target of the shape study: its wall time <= 1.2 x the sum of its policies' own runs.

A policy's own run is that policy alone in a fresh interpreter (``python -m
seamscope.experiments.shapes_worker --spec``), process start-up and its own eager references
included. The study pays start-up once (its zygote forks each policy). Prints the ratio.

    .venv/bin/python benchmarks/shapes_overhead.py [WORKLOAD] [--lengths 128,129,256] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import msgspec

from seamscope.experiments.shapes import WorkerSpec, run_study

TARGET = 1.2


def own_run(workload: str, trace: list[int], policy: str, dim: int | None, tmp: str) -> float:
    spec = WorkerSpec(kind="policy", workload=workload, trace=trace, dim=dim, policy=policy,
                      result=os.path.join(tmp, "r.json"), log=os.path.join(tmp, "own.log"))
    path = os.path.join(tmp, "spec.json")
    with open(path, "wb") as f:
        f.write(msgspec.json.encode(spec))
    t0 = time.perf_counter()
    with open(spec.log, "ab") as log:
        subprocess.run([sys.executable, "-m", "seamscope.experiments.shapes_worker", "--spec", path],
                       check=True, stdout=log, stderr=log)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("workload", nargs="?", default="src/seamscope/examples/decoder.py:workload")
    ap.add_argument("--lengths", default="16,17,32,33")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--policies", default="static,auto,dynamic,pow2")
    a = ap.parse_args()
    base = [int(x) for x in a.lengths.split(",")]
    policies = a.policies.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        study = run_study(a.workload, base, policies, repeat=a.repeat, workdir=os.path.join(tmp, "study"))
        wall = time.perf_counter() - t0
        if study.error is not None:
            print(f"study failed: {study.error}")
            return 1
        own = {p: own_run(a.workload, base * a.repeat, p, study.spec.dim, tmp) for p in policies}
    total = sum(own.values())
    for p in policies:
        inside = next(r.process_wall_ns for r in study.results if r.policy == p) or 0
        print(f"{p:>14}: own run {own[p]:7.2f} s   inside the study {inside / 1e9:7.2f} s")
    ratio = wall / total
    print(f"study wall {wall:.2f} s / sum of own runs {total:.2f} s = {ratio:.2f} (target <= {TARGET})")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
