"""Many ranks' receipts made from one real receipt, for the scale test and ``benchmarks/merge_scale.py``.

Each rank's receipt is the real one with its rank and world size set and its calls' figures varied:
every call's durations scaled by a few percent (rank by rank, call by call; a steady call to the
real receipt's steady median first, so that the ranks' noise is the few percent), the ranks in ``slow``
1.6× slower in their steady calls, and rank ``cold``'s first compile ``cold_factor``× longer (a cold
cache: it compiles while the others wait). Durations inside a call are scaled together, so a call's
parts still add up to its wall time.
"""

from __future__ import annotations

import json
import os
from typing import Any

SLOW_FACTOR = 1.6


def _scale_call(call: dict[str, Any], f: float) -> None:
    call["wall_ns"] = int(call["wall_ns"] * f)
    for ev in call.get("events", []):
        if "duration_ns" in ev:
            ev["duration_ns"] = int(ev["duration_ns"] * f)


def write_ranks(real_receipt: str, out: str, n: int, *, slow: tuple[int, ...] = (), cold: int | None = None,
                cold_factor: float = 5.0) -> dict[int, int]:
    """Write ``out/rank-R/receipt.json`` for R < n; return each rank's compile time in its first
    compiling call (ns), as written."""
    with open(real_receipt, encoding="utf-8") as fh:
        text = fh.read()
    first_compile: dict[int, int] = {}
    walls = sorted(c["wall_ns"] for c in json.loads(text)["ledger"]["calls"] if c["phase"] == "steady")
    median = walls[(len(walls) - 1) // 2] if walls else 0
    for r in range(n):
        d = json.loads(text)
        led = d["ledger"]
        led["run"]["rank"], led["run"]["world_size"] = r, n
        compiled_once = False
        for c in led["calls"]:
            f = 1 + 0.03 * (((r * 37 + c["index"] * 11) % 7) - 3) / 3  # within ±3 %
            if c["phase"] == "steady":
                f *= median / max(c["wall_ns"], 1) * (SLOW_FACTOR if r in slow else 1)
            _scale_call(c, f)
            compiles = [ev for ev in c["events"] if ev.get("type") == "compile"]
            if compiles and not compiled_once:
                compiled_once = True
                if r == cold:
                    for ev in compiles:
                        extra = int(ev["duration_ns"] * (cold_factor - 1))
                        ev["duration_ns"] += extra
                        c["wall_ns"] += extra
                first_compile[r] = sum(ev["duration_ns"] for ev in compiles)
        os.makedirs(os.path.join(out, f"rank-{r}"), exist_ok=True)
        with open(os.path.join(out, f"rank-{r}", "receipt.json"), "w", encoding="utf-8") as fh:
            json.dump(d, fh)
    return first_compile
