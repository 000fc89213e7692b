"""How long ``seamscope merge`` takes and how much memory it holds for many ranks.

One real receipt (``--receipt PATH``, else one made here by ``seamscope run`` of a small compiled
script: a graph break, a recompile, 12 calls) is copied into N ranks' receipts with varied figures
(``tests/rank_receipts.py``: a few percent of noise per call, two ranks slower, one rank's first
compile 5× longer). Then, for each N of ``--ranks``: the merge (reading every rank, comparing,
hashing the merged receipt) timed, Python's traced memory (tracemalloc) held for the ranks after
reading them and at the peak, and the merged receipt written (receipt.json, calls.csv, the report).

    python benchmarks/merge_scale.py --ranks 64,256,1024
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import tracemalloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

SCRIPT = """
import torch

@torch.compile(backend="eager")
def step(x):
    y = torch.sin(x) + 1
    print("break")
    return torch.cos(y).sum()

for i in range(12):
    step(torch.randn(8 if i < 6 else 16, 64))
"""


def real_receipt(tmp: str) -> str:
    script = os.path.join(tmp, "job.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(SCRIPT)
    out = os.path.join(tmp, "one")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.path.join(ROOT, "src")}
    subprocess.run([sys.executable, "-m", "seamscope", "run", "--quiet", "--out", out, script],
                   check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return os.path.join(out, "receipt.json")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", default="256", help="comma-separated rank counts")
    ap.add_argument("--receipt", default=None, help="a real receipt to copy (default: one made here)")
    a = ap.parse_args()

    from rank_receipts import write_ranks

    from seamscope.analyze.ranks import gather, merge
    from seamscope.commands.merge import write_merged
    from seamscope.ingest.receipt import load_receipt

    with tempfile.TemporaryDirectory() as tmp:
        real = a.receipt or real_receipt(tmp)
        warm = os.path.join(tmp, "warm")
        write_ranks(real, warm, 2)
        merge(gather(warm))  # imports and caches warmed
        tracemalloc.start()
        one = load_receipt(real)
        one_size = tracemalloc.get_traced_memory()[0]
        del one
        tracemalloc.stop()
        print(f"one receipt: {os.path.getsize(real) / 2**10:.0f} KiB on disk, {one_size / 2**10:.0f} KiB parsed "
              f"(traced), {len(load_receipt(real).ledger.calls)} calls")
        for n in [int(x) for x in a.ranks.split(",")]:
            d = os.path.join(tmp, f"r{n}")
            write_ranks(real, d, n, slow=(n // 3, 2 * n // 3), cold=min(17, n - 1))
            t0 = time.perf_counter()
            receipt = merge(gather(d))
            t_merge = time.perf_counter() - t0
            t0 = time.perf_counter()
            write_merged(receipt, os.path.join(d, "merged"))
            t_write = time.perf_counter() - t0
            del receipt
            tracemalloc.start()
            base = tracemalloc.get_traced_memory()[0]
            g = gather(d)
            held = tracemalloc.get_traced_memory()[0] - base
            receipt = merge(g)
            peak = tracemalloc.get_traced_memory()[1] - base
            tracemalloc.stop()
            size = os.path.getsize(os.path.join(d, "merged", "receipt.json"))
            sec = receipt.ranks
            print(f"{n} ranks: merge {t_merge:.2f} s, write {t_write:.2f} s; traced memory held for the ranks "
                  f"{held / 2**20:.2f} MiB ({held / n / 2**10:.1f} KiB a rank), peak {peak / 2**20:.2f} MiB "
                  f"(all {n} parsed receipts at once: {n * one_size / 2**20:.1f} MiB); merged receipt "
                  f"{size / 2**20:.2f} MiB; {len(sec.divergences)} divergence(s), {len(sec.skews)} skew(s)")
            del receipt, g


if __name__ == "__main__":
    main()
