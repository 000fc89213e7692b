"""What ``seamscope try`` decides on the repository's trial models, on a quiet machine and with a
planted CPU load (a busy loop on every core for the whole trial), side by side: per candidate the
verdict, the repetitions it had, the total's interval, and whether the note blamed the load.

Printed, not asserted: run it on a machine with nothing else running.

    .venv/bin/python benchmarks/try_decides.py [--max-repeat 6] [--only hf_steady]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

# the test suite's trial models, at the sizes of docs/try.md's table: the suite runs them smaller
# (one GPT-2 layer for the A/A, two Llama layers, three generated tokens, three lengths) to fit its
# time budget
W = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "workloads", "trials")
SIZES = {"TRIAL_LAYERS": "4", "TRIAL_TOKENS": "6", "TRIAL_LENGTHS": "4", "TRIAL_STEADY_LAYERS": "2"}

CASES = {
    # the baseline against itself (recompile_limit=8 is the default) and a planted 40% slowdown
    "hf_steady": ["--only", "no-catalogue-candidate", "--candidate", "--dynamo-config recompile_limit=8",
                  "--candidate", "--compile-option backend=planted_backends:slow"],
    # regional compilation and dynamic=true on a repeated layer recompiling on length: stacked
    "hf_stack": ["--only", "regional", "--only", "dynamic=true"],
    # a KV cache under generate: one mark for every layer
    "hf_generate": ["--only", "mark-dynamic"],
    "lengths_repeats": ["--only", "dynamic=true"],
}

LOOP = "import time\nend = time.monotonic() + 3600\nwhile time.monotonic() < end:\n    pass\n"


def settle(most_s: float = 120.0) -> None:
    """Wait until the 1-minute load average has come down from the previous case's planted load
    (it decays over about a minute), so that the quiet trial is measured quiet."""
    end = time.monotonic() + most_s
    while time.monotonic() < end and os.getloadavg()[0] >= 1.2:
        time.sleep(2)


def trial(name: str, words: list[str], repeat: int, max_repeat: int, loaded: bool) -> dict:
    if not loaded:
        settle()
    busy = [subprocess.Popen([sys.executable, "-c", LOOP]) for _ in range(os.cpu_count() or 1)] if loaded else []
    try:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "o")
            cmd = [sys.executable, "-m", "seamscope", "try", "--quiet", "--repeat", str(repeat), "--max-repeat",
                   str(max_repeat), "--out", out, *words, os.path.join(W, name + ".py")]
            t0 = time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **SIZES})
            if p.returncode != 0:
                sys.exit(f"{name}: {p.stderr[-2000:]}")
            with open(os.path.join(out, "trials.json")) as f:
                t = json.load(f)
            t["_seconds"] = time.perf_counter() - t0
            return t
    finally:
        for b in busy:
            b.kill()
            b.wait()


def rows(t: dict) -> dict[str, str]:
    out = {}
    for c in t["candidates"]:
        total = next((m for m in c["metrics"] if m["name"] == "total"), {})
        iv = (f"{total['ci_low']:.2f}–{total['ci_high']:.2f}" if total.get("ci_low") is not None else "–")
        blamed = "busy" if "the machine is busy" in (c.get("noise_note") or "") else ""
        chosen = " ✓" if c["name"] == t["chosen"] else ""
        reps = c.get("repetitions", len(c["runs"]))
        out[c["name"]] = f"{c['verdict']}{chosen} · {reps} reps · {iv} {blamed}".strip()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-repeat", type=int, default=6)
    ap.add_argument("--only", action="append", default=[], help="Only these models (names in CASES).")
    a = ap.parse_args()
    for name, words in CASES.items():
        if a.only and name not in a.only:
            continue
        quiet = trial(name, words, a.repeat, a.max_repeat, loaded=False)
        loaded = trial(name, words, a.repeat, a.max_repeat, loaded=True)
        q, lo = rows(quiet), rows(loaded)
        print(f"{name}  (quiet {quiet['_seconds']:.0f} s, loaded {loaded['_seconds']:.0f} s)")
        for cand in sorted(set(q) | set(lo)):
            print(f"  {cand:40s} quiet: {q.get(cand, '–'):45s} loaded: {lo.get(cand, '–')}")


if __name__ == "__main__":
    main()
