"""A break that exists only under one grad mode: ``requires_grad_()`` on an intermediate that is
returned (as transformers' MRA attention does without its CUDA kernel) makes Dynamo restart and
break there ("requires_grad_() intermediate leaked as output", gb8985) with grad enabled, and
compile one graph under ``torch.no_grad()``. seamscope's break sites equal ``explain``'s break
reasons when both run under the same grad mode; compared across modes they differ, which is why
the census sweep runs ``explain`` under the grad mode of the observed calls."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from seamscope.capture import adapter  # noqa: E402
from seamscope.capture.session import session  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]


def attention(x):
    y = x * 2
    return torch.zeros_like(y).requires_grad_() + y.sum()  # an intermediate made to require grad


def observed(grad: bool) -> tuple[set[tuple[str, int]], int, int]:
    """(break sites, graphs, Dynamo's own graph count) of two calls in a session under ``grad``;
    every break is the leaked ``requires_grad_()`` one."""
    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    cf = torch.compile(attention, backend="eager")
    with session() as s, torch.set_grad_enabled(grad):
        for _ in range(2):
            cf(torch.ones(4))
    sm = s.receipt().summary
    sites = {(os.path.basename(b.file), b.line) for b in sm.break_sites}
    assert {b.gb_type for b in sm.break_sites} <= {"requires_grad_() intermediate leaked as output"}
    return sites, sm.graph_count, adapter.dynamo_counters()["stats"]["unique_graphs"]


def explained(grad: bool) -> set[tuple[str, int]]:
    torch._dynamo.reset()
    with torch.set_grad_enabled(grad):
        ex = torch._dynamo.explain(attention)(torch.ones(4))
    return {(os.path.basename(r.user_stack[-1].filename), r.user_stack[-1].lineno)
            for r in ex.break_reasons if r.user_stack}


def test_a_break_only_under_grad_is_seen_by_both_under_the_same_grad_mode():
    with_grad, graphs, unique = observed(True)
    assert with_grad and with_grad == explained(True)
    assert graphs == unique
    without, graphs, unique = observed(False)
    assert without == explained(False) == set()
    assert graphs == unique == 1
    # across modes, explain's sites are not among the observed run's: the sweep's one artifact
    assert not explained(True) <= without
