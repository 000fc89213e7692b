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

# A command's crash is a traceback in the test, not the CLI's one-line backstop (exit 2), which a
# test expecting exit 2 for unusable input would take for its answer (tests of the backstop unset it).
os.environ.setdefault("SEAMSCOPE_TRACEBACK", "1")

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


TEST_PRELOAD = ("transformers", "transformers.models.llama.modeling_llama", "transformers.models.gpt2.modeling_gpt2",
                "torch._inductor.compile_fx")
"""What the test workloads' fresh processes import besides seamscope's own preloads (where installed):
Inductor's compiler (1.4 s of imports) is each inductor trial run's, forked after it instead."""


@pytest.fixture(scope="session")
def fresh_server():
    """One fork server for this test process's whole run: the fresh processes of ``seamscope try``,
    of the probe's isolated ladder and of the shape study, run in-process, are forked from it
    (``fresh.shared``; the study's own warm-up, importing the workload, is then each job's)
    instead of from a server each such command would start (a torch import each)."""
    import importlib.util

    from seamscope.experiments import fresh, ladder, shapes
    from seamscope.experiments.trials import runs as trial_runs

    extra = [m for m in TEST_PRELOAD if importlib.util.find_spec(m.split(".")[0]) is not None]
    preload = list(dict.fromkeys([*trial_runs.PRELOAD, *ladder.PRELOAD, *shapes.PRELOAD, *extra]))
    with fresh.FreshProcesses(preload=preload, warm=("fresh_jobs:compile_templates", None), mode="fork") as server, \
            fresh.shared(server, skip_warm=True):
        yield server


@pytest.fixture
def outside_the_shared_server():
    """For a test that starts the fork servers it checks: a test run's ``fresh_server``, shared
    since an earlier test made it, is set aside meanwhile (what the test made shared is kept)."""
    from seamscope.experiments import fresh

    saved = list(fresh._SHARED)
    fresh._SHARED.clear()
    yield
    fresh._SHARED[:0] = saved


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
    if hasattr(config, "workerinput") and config.getvalue("loadgroup"):
        config.pluginmanager.register(_GroupSuffix(), "seamscope-xdist-groups")


class _PassedRecorder:
    """In the controlling process only (pytest-xdist sends every worker's reports to it)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.passed: set[str] = set()
        self.failed: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = group_suffixless(report.nodeid)
        if report.failed:
            self.failed.add(nodeid)
        elif report.when == "call" and report.passed:
            self.passed.add(nodeid)

    def pytest_sessionfinish(self) -> None:
        with open(self.path, "w", encoding="utf-8") as f:
            f.writelines(f"{n}\n" for n in sorted(self.passed - self.failed))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker names each grouped test ``ID@GROUP``
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _skip_passed(config, items)
    if hasattr(config, "workerinput"):  # a pytest-xdist worker (each sees the same collection)
        _group_by_module_fixtures(items)
        _longest_first(items)


def _skip_passed(config: pytest.Config, items: list[pytest.Item]) -> None:
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


# --- parallel lanes: `--dist loadgroup` -----------------------------------------------------------
# The lanes spread single tests over the workers. Tests that share a module-scoped fixture (a study,
# a trial, a job run once for the assertions about it) go to one worker as one unit, or each worker
# would build the fixture again: they get an ``xdist_group`` mark here, one per set of tests linked
# by the module fixtures they use (and the tests that compile with inductor, one group). Then the
# tests that declare a longer timeout (or compile with inductor), then those of SLOW_MODULES, are
# queued first, so no long test starts last while the other worker idles. (pytest-xdist then puts
# the groups of several tests before the single tests, keeping this order among the single tests.)


INDUCTOR_GROUP = ("", "inductor")
"""The tests that compile with inductor share one worker: the first inductor compilation in a
process checks the C++ toolchain and the CPU's vector instructions (about 20 s of compiler runs,
then cached in the process), once for the lane instead of once per worker."""


SLOW_MODULES = frozenset({
    "test_adapter.py", "test_capture_transformers.py", "test_causes_transformers.py", "test_compile_time_torch.py",
    "test_ecosystems.py", "test_findings_torch.py", "test_import_torch_trace.py", "test_imports.py",
    "test_mutations_torch.py", "test_native.py", "test_notebook_kernel.py", "test_probe.py", "test_progress_line.py",
    "test_report_browser.py", "test_rewrite_static_cache.py", "test_run_cli.py", "test_shapes.py",
    "test_shapes_torch.py", "test_trace_filter.py", "test_upgrade_check.py", "test_watch_serving.py",
})
"""Modules with single tests of seconds each (they start processes, compile a transformers model, drive
a browser) that declare no longer timeout: queued after those that do, before the rest, so that the
last tests a worker gets are the sub-second ones. A module belongs here when one of its tests is
among the slowest of ``make test``'s ``--durations`` and is neither grouped nor marked with a timeout."""


def _module_fixtures(item: pytest.Item) -> list[str]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return [name for name, defs in info.name2fixturedefs.items()
            if name in item.fixturenames and defs and defs[-1].scope in ("class", "module", "package")]


def _group_by_module_fixtures(items: list[pytest.Item]) -> None:
    parent: dict[tuple[str, str], tuple[str, str]] = {}

    def find(k: tuple[str, str]) -> tuple[str, str]:
        while parent.setdefault(k, k) != k:
            k = parent[k]
        return k

    used: dict[pytest.Item, list[tuple[str, str]]] = {}
    for item in items:
        names = [(item.nodeid.split("::", 1)[0], n) for n in _module_fixtures(item)]
        if item.get_closest_marker("inductor") is not None:
            names.append(INDUCTOR_GROUP)
        if names:
            used[item] = names
            for other in names[1:]:
                parent[find(other)] = find(names[0])
    for item, names in used.items():
        if item.get_closest_marker("xdist_group") is None:
            path, name = find(names[0])
            item.add_marker(pytest.mark.xdist_group(f"{path}::{name}" if path else name))


def _declared_length(item: pytest.Item) -> tuple[float, bool, bool]:
    mark = item.get_closest_marker("timeout")
    timeout = float(mark.args[0]) if mark is not None and mark.args else 0.0
    slow = os.path.basename(item.nodeid.split("::", 1)[0]) in SLOW_MODULES
    return timeout, item.get_closest_marker("inductor") is not None, slow


def _group_of(item: pytest.Item) -> str | None:
    """The group pytest-xdist schedules the test in: its ``xdist_group`` names joined, as it does."""
    names = sorted({str(m.args[0] if m.args else m.kwargs.get("name", "default"))
                    for m in item.iter_markers("xdist_group")})
    return "_".join(names) if names else None


def _longest_first(items: list[pytest.Item]) -> None:
    """Stable: a group's tests share one key (its longest member's) and keep their order."""
    key = {item: _declared_length(item) for item in items}
    groups: dict[str, tuple[float, bool, bool]] = {}
    for item in items:
        g = _group_of(item)
        if g is not None:
            groups[g] = max(groups.get(g, key[item]), key[item])
    for item in items:
        g = _group_of(item)
        if g is not None:
            key[item] = groups[g]
    items.sort(key=lambda it: (-key[it][0], not key[it][1], not key[it][2]))


class _GroupSuffix:
    """pytest-xdist names a grouped test ``ID@GROUP`` on the worker, and its controller schedules by
    that suffix. pytest 9.2 keeps the id elsewhere (pytest-xdist issue #1386): the name xdist sets
    is then lost, and every test would be scheduled alone. Where the suffix is missing, this sets
    it where this pytest keeps the id."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            group = _group_of(item)
            if group is None or group_suffixless(item.nodeid) != item.nodeid:
                continue
            nodeid = f"{item.nodeid}@{group}"
            if hasattr(item, "_id"):
                from _pytest.nodeid import coerce_node_id

                item._id = coerce_node_id(nodeid)
            else:
                item._nodeid = nodeid


def group_suffixless(nodeid: str) -> str:
    """The test id without the ``@group`` suffix pytest-xdist's loadgroup adds to grouped tests."""
    return nodeid.rsplit("@", 1)[0] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid
