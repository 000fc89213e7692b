"""Shared fixtures. Torch is imported lazily so torch-free tests stay torch-free."""

from __future__ import annotations

import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = sys.executable

MUTATION = os.environ.get("SEAMSCOPE_MUTATION") == "1"
"""Set by ``make mutation``: every mutant reruns the tests, so property tests run fewer,
reproducible examples and do not shrink a failure (a mutant only needs to fail)."""
FUZZ = os.environ.get("SEAMSCOPE_FUZZ") == "1"
"""Set by ``make fuzz``: fresh random draws on every run, to look for new counterexamples. A
failure found that way is pinned as an ``@example`` on the test, so ``make test`` keeps it."""

try:
    from hypothesis import Phase, settings
except ImportError:  # the torch-free core job may run without the dev extras
    settings = None  # type: ignore[assignment]
if settings is not None:
    # ``make test`` draws the same examples on every run, whether or not ``CI`` is set (Hypothesis
    # would load its own derandomized ``ci`` profile only when it is): a commit that changed nothing
    # related cannot fail by chance. No example database, so no run depends on an earlier one.
    settings.register_profile("seamscope", derandomize=True, database=None, max_examples=100, deadline=None)
    settings.register_profile("fuzz", derandomize=False, max_examples=500, deadline=None)
    settings.register_profile(
        "mutation", derandomize=True, database=None, phases=[Phase.explicit, Phase.generate], deadline=None
    )
    settings.load_profile("mutation" if MUTATION else "fuzz" if FUZZ else "seamscope")


def examples(n: int) -> int:
    """Hypothesis examples for a property test: ``n``, or at most 30 under mutation testing."""
    return min(n, 30) if MUTATION else n


@pytest.fixture
def dynamo_reset():
    """A clean Dynamo cache and counters before and after a torch test."""
    import torch

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    yield
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()


@pytest.fixture(autouse=True)
def _no_session_left_behind():
    """No test may leave a capture session installed (after pyinstrument's autouse check)."""
    yield
    mod = sys.modules.get("seamscope.capture.session")
    if mod is not None and mod.active_session() is not None:
        s = mod.active_session()
        s.stop()
        pytest.fail("a seamscope session was left active")


# --- lanes: each test runs once per `make test` -------------------------------------------------
# The torch-free lane (``.venv-notorch``) records the tests that passed there; the torch lane then
# deselects exactly those, so a torch-free test runs once, and a test that skipped without torch
# or an extra (``importorskip`` inside an unmarked test) still runs, in the lane that has them.


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("seamscope lanes")
    group.addoption("--record-passed", metavar="FILE", default=None,
                    help="write the ids of the tests that passed to FILE (the torch-free lane)")
    group.addoption("--skip-passed", metavar="FILE", default=None,
                    help="deselect the tests FILE lists (they passed in the torch-free lane); FILE must exist")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--record-passed") and not hasattr(config, "workerinput"):
        config.pluginmanager.register(_PassedRecorder(config.getoption("--record-passed")), "seamscope-lanes")


class _PassedRecorder:
    """In the controlling process only (pytest-xdist sends every worker's reports to it)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.passed: set[str] = set()
        self.failed: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed.add(report.nodeid)
        elif report.when == "call" and report.passed:
            self.passed.add(report.nodeid)

    def pytest_sessionfinish(self) -> None:
        with open(self.path, "w", encoding="utf-8") as f:
            f.writelines(f"{n}\n" for n in sorted(self.passed - self.failed))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    path = config.getoption("--skip-passed")
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                done = {ln.strip() for ln in f if ln.strip()}
        except OSError as e:
            raise pytest.UsageError(f"--skip-passed {path}: {e.strerror}; run the torch-free lane first "
                                    "(make test-notorch)") from None
        keep = [it for it in items if it.nodeid not in done]
        if len(keep) != len(items):
            config.hook.pytest_deselected(items=[it for it in items if it.nodeid in done])
            items[:] = keep

