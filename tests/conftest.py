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
if MUTATION:
    from hypothesis import Phase, settings

    settings.register_profile("mutation", derandomize=True, database=None, phases=[Phase.explicit, Phase.generate])
    settings.load_profile("mutation")


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
