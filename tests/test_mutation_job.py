"""``make mutation`` measures something or fails: its scratch copy can import what the tests
import, and a run that scored no mutant, or left mutants without a verdict, is an error."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _job():
    spec = importlib.util.spec_from_file_location("mutation_job", ROOT / "benchmarks" / "mutation.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _local_imports(path: Path) -> set[str]:
    """The modules of tests/ that a test file imports (``from fakes import ...``)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
    return {n for n in names if (ROOT / "tests" / f"{n}.py").exists()}


def test_the_scratch_copy_holds_every_test_module_the_chosen_tests_import(tmp_path) -> None:
    job = _job()
    copied = {Path(t).stem for t in job.TESTS} | {Path(h).stem for h in job.helper_modules()}
    for t in job.TESTS:
        assert (ROOT / t).exists(), t
        missing = _local_imports(ROOT / t) - copied
        assert not missing, f"{t} imports {missing}, which the mutation job does not copy"
    assert "fakes" in copied and "conftest" in copied


def test_a_run_that_scored_nothing_or_left_mutants_unjudged_fails() -> None:
    job = _job()
    ok = {"killed": 95, "survived": 5, "total": 100}
    assert job.measured_nothing(ok, 0) is None
    # the symptom of tests that cannot import: every mutant "interrupted", none scored
    assert "no mutant" in job.measured_nothing({"total": 2341, "check_was_interrupted_by_user": 2341}, 0)
    assert "no mutant" in job.measured_nothing({"total": 0}, 0)
    assert "no verdict" in job.measured_nothing({**ok, "total": 101}, 0)
    assert "exited" in job.measured_nothing(ok, 1)
    # mutants skipped by mutmut's own rules are not a failure
    assert job.measured_nothing({**ok, "skipped": 3, "total": 103}, 0) is None
