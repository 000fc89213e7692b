"""What ``seamscope try`` decides on the repository's trial models with seamscope from two source
trees: an earlier one (``--before-src``) and this one. Per script and side: the chosen candidate,
its total ratio to the baseline with the interval, its verdict, and the seconds the trial took.
The sides are interleaved per script (before, after, before, after: ``--rounds``), so drift on the
machine hits both alike.

Printed, not asserted: run it on a machine with nothing else running.

    git worktree add --detach /tmp/before REV   # then build its C extensions there:
    (cd /tmp/before && "$OLDPWD/.venv/bin/python" setup.py -q build_ext --inplace)
    .venv/bin/python benchmarks/try_before_after.py --before-src /tmp/before/src [--only hf_generate]
        [--repeat 3] [--max-repeat 6] [--rounds 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
W = os.path.join(HERE, "tests", "workloads", "trials")
AFTER = os.path.join(HERE, "src")

# the trial models whose baseline run has something to fix (a recompile, a break, a fallback)
SCRIPTS = ["hf_stack", "hf_generate", "hf_seq", "lengths_repeats", "padded_pair", "shape_churn", "item_break",
           "limit_fallback", "hf_encode_mask", "disable_module"]


def trial(src: str, name: str, repeat: int, max_repeat: int) -> dict:
    """``seamscope try`` on one model, run with ``src`` first on ``PYTHONPATH``: its trials.json."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "o")
        cmd = [sys.executable, "-m", "seamscope", "try", "--quiet", "--repeat", str(repeat), "--max-repeat",
               str(max_repeat), "--out", out, os.path.join(W, name + ".py")]
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=d, env={**os.environ, "PYTHONPATH": src})
        seconds = time.perf_counter() - t0
        try:
            with open(os.path.join(out, "trials.json")) as f:
                t = json.load(f)
        except OSError:
            last = (p.stderr.strip().splitlines() or ["no trials.json written"])[-1]
            return {"_seconds": seconds, "_error": f"exit {p.returncode}: {last[:200]}"}
        t["_seconds"] = seconds
        return t


def figure(c: dict) -> str:
    """``NAME ×RATIO (LOW–HIGH) VERDICT`` of a candidate's total."""
    total = next((m for m in c.get("metrics") or [] if m["name"] == "total"), {})
    ratio = f"×{total['ratio_median']:.2f}" if total.get("ratio_median") is not None else "×–"
    iv = f" ({total['ci_low']:.2f}–{total['ci_high']:.2f})" if total.get("ci_low") is not None else ""
    return f"{c['name']} {ratio}{iv} {c['verdict']}"


def row(t: dict) -> str:
    """``CHOSEN ×RATIO (LOW–HIGH) VERDICT · N s``; where none was chosen, ``keep the script`` and
    the first-ranked candidate's figure."""
    if "_error" in t:
        return f"failed: {t['_error']} · {t['_seconds']:.0f} s"
    chosen = next((c for c in t["candidates"] if c["name"] == t.get("chosen")), None)
    if chosen is not None:
        return f"{figure(chosen)} · {t['_seconds']:.0f} s"
    first = next((c for c in t["candidates"] if c.get("runs")), None)
    best = f" (first ranked: {figure(first)})" if first is not None else " (no candidate ran)"
    return f"keep the script{best} · {t['_seconds']:.0f} s"


def where(src: str) -> str:
    """The seamscope a child with ``src`` first on ``PYTHONPATH`` imports (to check the side is that tree)."""
    code = "import os, seamscope; print(os.path.dirname(os.path.dirname(seamscope.__file__)))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": src})
    return p.stdout.strip() or p.stderr.strip()[-200:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before-src", required=True, help="The earlier tree's src folder.")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--max-repeat", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=2, help="Trials per side and script, interleaved.")
    ap.add_argument("--only", action="append", default=[], help="Only these scripts (names in SCRIPTS).")
    a = ap.parse_args()
    if not os.path.isfile(os.path.join(a.before_src, "seamscope", "__init__.py")):
        sys.exit(f"{a.before_src}: not a seamscope src folder")
    unknown = sorted(set(a.only) - set(SCRIPTS))
    if unknown:
        sys.exit(f"--only {', '.join(unknown)}: not a trial model here ({', '.join(SCRIPTS)})")
    for side, src in (("before", a.before_src), ("after", AFTER)):
        got = where(src)
        if os.path.realpath(got) != os.path.realpath(src):
            sys.exit(f"{side}: PYTHONPATH={src} imports seamscope from {got}")
        print(f"{side + ':':7s} {src}")
    print(f"load average at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPU(s)")
    for name in SCRIPTS:
        if a.only and name not in a.only:
            continue
        print(name)
        for r in range(1, a.rounds + 1):
            for side, src in (("before", a.before_src), ("after", AFTER)):
                t = trial(src, name, a.repeat, a.max_repeat)
                print(f"  {side:6s} {r}: {row(t)}", flush=True)


if __name__ == "__main__":
    main()
