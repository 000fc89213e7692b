"""``make mutation``: mutation testing (mutmut) of the accounting against a fast torch-free test set.

The accounting modules are mutated one operator, constant or statement at a time; a mutant is
killed when some test fails. Nothing is excluded by pragma. It runs in a scratch copy of ``src/``
and of the chosen tests (mutmut writes a ``mutants/`` folder next to them), so the working tree is
never touched, and prints the kill rate: killed / (killed + survived + no tests + timeouts).

It fails (exit 1) when it measured nothing: no mutant was scored, some mutants were never run
(a runner error, a test module that cannot be imported in the copy), or the unmutated tests did
not pass there. A kill rate over no mutants is not a result.

Usage: ``python benchmarks/mutation.py [--jobs N] [--keep] [--only NAME ...]``. Not part of
``make test``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

MODULES = [
    "src/seamscope/model/builder.py",
    "src/seamscope/model/builder_account.py",  # one call's sums and events, split from the builder
    "src/seamscope/model/plan.py",  # the call plans, split from the builder
    "src/seamscope/analyze/summary.py",
    "src/seamscope/model/hashing.py",
    "src/seamscope/model/canonical.py",
    "src/seamscope/analyze/diff.py",
]

# Fast and torch-free: the fake event source, receipts, the oracle, the diff. Every module of
# tests/ that is not a test file (conftest.py, fakes.py: what the tests import) is copied too.
TESTS = [
    "tests/test_model_ledger.py",
    "tests/test_model_summary.py",
    "tests/test_model_receipt.py",
    "tests/test_verify.py",
    "tests/test_diff.py",
    "tests/test_native.py",
    "tests/test_device.py",
    "tests/test_sites.py",
    "tests/test_golden.py",
    "tests/test_fallback_phase.py",
    "tests/test_lane_windows.py",
]
# (tests/test_mutations.py rewrites the real source of these modules; under mutmut that source is
# its trampolined copy, so the five seed mutations are tested by ``make test``, not here.)
# Tests that run seamscope in a subprocess exercise the installed, unmutated code, and the schema
# golden file differs under mutmut's rewritten sources: skip them.
DESELECT = "not cli and not does_not_import and not torch and not subprocess and not committed_schema"


def helper_modules() -> list[str]:
    """The modules of tests/ that are not test files (conftest.py, fakes.py): the tests import them."""
    return sorted(f"tests/{p.name}" for p in (ROOT / "tests").glob("*.py") if not p.name.startswith("test_"))


SCORED = ("killed", "survived", "no_tests", "timeout", "suspicious")


def measured_nothing(stats: dict[str, int], returncode: int) -> str | None:
    """Why a mutmut run measured nothing worth a kill rate, or None when its figures stand."""
    if returncode != 0:
        return f"mutmut exited {returncode} (a runner error, or the unmutated tests failed)"
    scored = sum(stats.get(k, 0) for k in SCORED)
    if scored == 0:
        return f"no mutant was scored ({stats.get('total', 0)} generated)"
    # pytest's own exit 2 (a collection error: a test module that cannot import) is what mutmut
    # calls "check was interrupted by user"; such a mutant, or one never run, has no verdict
    unrun = stats.get("total", 0) - scored - stats.get("skipped", 0)
    if unrun:
        return f"{unrun} of {stats.get('total', 0)} mutants got no verdict (never run, a collection error, a crash)"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder and print its path")
    ap.add_argument("--only", nargs="*", default=None, metavar="NAME",
                    help="mutate only the modules whose path contains NAME (e.g. diff builder)")
    args = ap.parse_args()
    mutmut = Path(sys.executable).with_name("mutmut")
    if not mutmut.exists():
        print("mutmut is not installed: pip install -e '.[dev]'", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="seamscope-mutation-"))
    try:
        shutil.copytree(ROOT / "src", work / "src", ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
        (work / "tests").mkdir()
        tests = [t for t in TESTS if (ROOT / t).exists()]
        missing = sorted(set(TESTS) - set(tests))
        if missing:
            print(f"test files not found: {', '.join(missing)}", file=sys.stderr)
            return 2
        for t in tests + helper_modules():
            shutil.copy2(ROOT / t, work / t)
        if (ROOT / "docs").is_dir():  # the committed receipt schema a test compares against
            shutil.copytree(ROOT / "docs", work / "docs")
        for data in ("workloads", "golden", "inputs"):  # what the tests read: scripts, golden receipts, logs
            if (ROOT / "tests" / data).is_dir():
                shutil.copytree(ROOT / "tests" / data, work / "tests" / data)
        # the C hot path, built by `pip install -e .`: without it the tests of the builder's C
        # lane side skip, and its mutants survive
        native = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "src" / "seamscope").glob("_speedups*.so"))
        modules = [m for m in MODULES if not args.only or any(n in m for n in args.only)]
        only = "\n".join("    " + m for m in modules)
        (work / "setup.cfg").write_text(
            "[mutmut]\n"
            "source_paths = src\n"
            f"only_mutate =\n{only}\n"
            "pytest_add_cli_args =\n    -p\n    no:seamscope\n    -p\n    no:cacheprovider\n"
            f"    -q\n    -k\n    {DESELECT}\n"
            "pytest_add_cli_args_test_selection = tests/\n"
            "also_copy =\n    docs\n" + "".join(f"    {p}\n" for p in native) +
            "\n[tool:pytest]\ntestpaths = tests\ntimeout = 60\n"
            "markers =\n    torch: needs torch\n    inductor: inductor\n"
        )
        if not modules:
            print(f"no module matches --only {' '.join(args.only or [])}", file=sys.stderr)
            return 2
        print(f"mutating {len(modules)} modules against {len(tests)} test files in {work}")
        t0 = time.monotonic()
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", SEAMSCOPE_MUTATION="1")
        run = subprocess.run([str(mutmut), "run", "--max-children", str(args.jobs)], cwd=work,
                             env=env, check=False)
        subprocess.run([str(mutmut), "export-cicd-stats"], cwd=work, env=env, check=False,
                       stdout=subprocess.DEVNULL)
        stats_path = work / "mutants" / "mutmut-cicd-stats.json"
        if not stats_path.exists():
            print("mutmut produced no statistics", file=sys.stderr)
            return 1
        stats = json.loads(stats_path.read_text())
        res = subprocess.run([str(mutmut), "results"], cwd=work, env=env, capture_output=True,
                             text=True, check=False)
        survivors = [ln.strip() for ln in res.stdout.splitlines() if ln.strip()]
        scored = sum(stats.get(k, 0) for k in SCORED)
        killed = stats.get("killed", 0)
        rate = 100.0 * killed / scored if scored else 0.0
        print(json.dumps(stats, indent=1))
        if survivors:
            print(f"{len(survivors)} mutants not killed (first 40):")
            for s in survivors[:40]:
                print("  " + s)
        print(f"kill rate: {rate:.1f}% ({killed}/{scored}) in {time.monotonic() - t0:.0f} s")
        problem = measured_nothing(stats, run.returncode)
        if problem:
            print(f"mutation testing failed: {problem}", file=sys.stderr)
            return 1
        return 0
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
