"""pytest plugin (entry point ``pytest11``): the ``compile_budget`` marker.

Inert unless a test carries the marker: importing this module imports neither torch nor the rest
of seamscope, and unmarked tests pass through every hook untouched.

A marked test runs inside :func:`seamscope.budget`. The window opens before the test's fixtures
are set up. Calls of a model compiled anywhere (a fixture of any scope, at import time) are
observed; a breaks limit over calls that ran only graphs compiled and run before the window
fails, saying why it cannot judge them. The budget is judged
after the test body returns; a test that already failed (or skipped) is reported as it is.
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator
from typing import Any

import pytest

MARKER = "compile_budget"
_FIELDS = ("breaks", "recompiles", "fallbacks", "phase", "allow")
_WINDOW = pytest.StashKey[Any]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("seamscope").addoption(
        "--seamscope-out", metavar="DIR", default=None,
        help="Write each compile_budget test's receipt to DIR/<test id>/ (for seamscope check, "
             "seamscope report, or as a CI artifact).",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(breaks=None, recompiles=None, fallbacks=None, phase=None, allow=()): run the "
        "test inside seamscope.budget(...): fail it when torch.compile breaks at more sites, "
        "recompiles or falls back more than allowed (phase: None, \"cold\" or \"steady\"; allow: "
        "site ids, \"file:line\" or \"file\")",
    )


def _window(item: pytest.Item, marker: pytest.Mark) -> Any:
    """The budget the marker asks for; a malformed marker fails the test, never passes it."""
    from .budget import BudgetUsageError, budget

    where = f"@pytest.mark.{MARKER} on {item.nodeid}"
    if marker.args:
        pytest.fail(
            f"{where}: takes keyword arguments only ({', '.join(_FIELDS)}), got positional "
            f"{marker.args!r}",
            pytrace=False,
        )
    unknown = sorted(set(marker.kwargs) - set(_FIELDS))
    if unknown:
        pytest.fail(
            f"{where}: unknown argument(s) {', '.join(unknown)} (known: {', '.join(_FIELDS)})",
            pytrace=False,
        )
    out_root = item.config.getoption("seamscope_out", None)
    out = None
    if out_root:
        out = os.path.join(out_root, re.sub(r"[^A-Za-z0-9_.-]+", "_", item.nodeid).strip("_"))
    try:
        return budget(**marker.kwargs, out=out)
    except BudgetUsageError as e:
        pytest.fail(f"{where}: {e}", pytrace=False)


def _close(item: pytest.Item, exc: BaseException | None) -> None:
    __tracebackhide__ = True
    w = item.stash.get(_WINDOW, None)
    if w is None:
        return
    del item.stash[_WINDOW]
    if exc is None:
        w.__exit__(None, None, None)
    else:
        w.__exit__(type(exc), exc, exc.__traceback__)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return (yield)
    w = _window(item, marker)
    w.__enter__()
    item.stash[_WINDOW] = w
    try:
        return (yield)
    except BaseException as e:
        _close(item, e)
        raise


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    __tracebackhide__ = True
    if _WINDOW not in item.stash:
        return (yield)
    try:
        res = yield
    except BaseException as e:
        _close(item, e)
        raise
    _close(item, None)  # raises BudgetExceeded (an AssertionError) when over budget
    return res


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, Any, Any]:
    # The call never ran (setup skipped or errored after the window opened): close it unjudged.
    if _WINDOW in item.stash:
        _close(item, RuntimeError("the test body did not run"))
    return (yield)
