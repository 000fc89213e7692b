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



# --- two workers, `--dist loadgroup` --------------------------------------------------------------

SHARED = """
import os
import pytest

LOG = os.path.join(os.path.dirname(__file__), "log.txt")


def note(text):
    with open(LOG, "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + " " + text + "\\n")


@pytest.fixture(scope="module")
def study():
    note("built study")
    return 42


@pytest.fixture(scope="module")
def trial(study):
    return study + 1


@pytest.mark.parametrize("n", range(6))
def test_uses_the_study(study, n):
    note("ran study")
    assert study == 42


@pytest.mark.parametrize("n", range(6))
def test_uses_the_trial(trial, n):
    note("ran trial")


@pytest.mark.parametrize("n", range(6))
def test_alone(n):
    note("ran alone")


@pytest.mark.timeout(900)
def test_long():
    note("ran long")


@pytest.mark.inductor
@pytest.mark.parametrize("n", range(4))
def test_compiles_with_inductor(n):
    note("ran inductor")
"""


SLOW = """
import os


def test_slow():
    with open(os.path.join(os.path.dirname(__file__), "log.txt"), "a") as f:
        f.write(os.environ.get("PYTEST_XDIST_WORKER", "-") + " ran slow\\n")
"""


def _log(pytester: pytest.Pytester) -> list[tuple[str, str]]:
    lines = (pytester.path / "log.txt").read_text().splitlines()
    return [(w, text) for w, text in (ln.split(" ", 1) for ln in lines)]


def test_tests_sharing_a_module_fixture_run_on_one_worker_the_rest_spread(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    shutil.copy(CONFTEST, pytester.path / "conftest.py")
    # a module named in the conftest's SLOW_MODULES (collected after test_shared.py)
    pytester.makepyfile(test_shared=SHARED, test_watch_serving=SLOW)
    record = pytester.path / "passed.txt"
    res = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider",
                                        "--record-passed", str(record))
    res.assert_outcomes(passed=24)
    log = _log(pytester)
    # the study (and the trial built on it) once, on the worker that ran every test using them
    (builder,) = [w for w, text in log if text == "built study"]
    assert {w for w, text in log if text in ("ran study", "ran trial")} == {builder}
    assert len({w for w, text in log if text == "ran inductor"}) == 1  # one worker compiles with inductor
    assert {w for w, _ in log} == {"gw0", "gw1"}  # the other tests spread
    # the single test that declares a long timeout is queued before the other single tests (the
    # groups go first): its worker ran none of those before it
    (long_on,) = [w for w, text in log if text == "ran long"]
    mine = [text for w, text in log if w == long_on]
    assert "ran alone" not in mine[:mine.index("ran long")], log
    # then the single tests of the slow modules, before the other single tests
    (slow_on,) = [w for w, text in log if text == "ran slow"]
    mine = [text for w, text in log if w == slow_on]
    assert "ran alone" not in mine[:mine.index("ran slow")], log
    # the lane's record names tests as pytest does, without pytest-xdist's group suffix
    ids = record.read_text().splitlines()
    assert len(ids) == 24 and not [i for i in ids if "@" in i]
    assert "test_shared.py::test_uses_the_trial[0]" in ids
