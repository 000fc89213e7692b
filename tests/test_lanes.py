"""``make test`` runs each test once: the torch-free lane records what passed there
(``--record-passed``), the torch lane deselects exactly that (``--skip-passed``); a test that
skipped or failed in the first lane runs in the second."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")

SUITE = """
import pytest

def test_passes():
    pass

def test_skips():
    pytest.skip("needs something this lane lacks")

@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    assert n == 1

def test_fails_in_teardown(broken):
    pass

@pytest.fixture
def broken():
    yield
    raise RuntimeError("teardown")
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    shutil.copy(CONFTEST, pytester.path / "conftest.py")
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def test_the_second_lane_runs_exactly_what_did_not_pass_in_the_first(suite: pytest.Pytester) -> None:
    record = suite.path / "passed.txt"
    first = suite.runpytest_subprocess("--record-passed", str(record), "-p", "no:cacheprovider")
    first.assert_outcomes(passed=3, skipped=1, failed=1, errors=1)
    assert record.read_text().splitlines() == ["test_suite.py::test_param[1]", "test_suite.py::test_passes"]
    second = suite.runpytest_subprocess("--skip-passed", str(record), "-p", "no:cacheprovider", "-v")
    second.assert_outcomes(skipped=1, failed=1, passed=1, errors=1, deselected=2)
    second.stdout.fnmatch_lines(["*test_skips SKIPPED*", "*test_param?2? FAILED*"])


def test_a_missing_record_is_an_error_not_a_full_run(suite: pytest.Pytester) -> None:
    res = suite.runpytest_subprocess("--skip-passed", str(suite.path / "nope.txt"))
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--skip-passed*run the torch-free lane first*"])

