"""``seamscope.budget`` as a context manager on real ``torch.compile`` (backend eager)."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.torch, pytest.mark.usefixtures("dynamo_reset")]


def _f(x):  # type: ignore[no-untyped-def]
    return (x * 2).sin() + 1


def test_a_budget_inside_a_session_judges_only_its_own_calls() -> None:
    import torch

    import seamscope
    from seamscope.gates.budget import BudgetExceeded

    with seamscope.session() as s:
        f = torch.compile(_f, backend="eager")
        f(torch.ones(4))
        f(torch.ones(6))  # a recompile before the budget: not its business
        with seamscope.budget(recompiles=0, label="gated") as outer:
            f(torch.ones(8))  # automatic dynamic: a cache hit
            with pytest.raises(BudgetExceeded, match="no compiled call was observed"):
                with seamscope.budget(breaks=0):
                    pass
            f(torch.ones(8))
        assert s.builder.call_observers == []  # every window unhooked itself
    assert outer.result is not None and outer.result.calls == 2
    assert [c.family for c in s.ledger.calls] == [None, None, "gated", "gated"]


def test_a_budget_decorates_a_function_and_judges_each_call_afresh() -> None:
    import torch

    import seamscope
    from seamscope.gates.budget import BudgetExceeded

    @seamscope.budget(recompiles=0)
    def run(n: int) -> None:
        torch._dynamo.reset()
        f = torch.compile(_f, backend="eager")
        f(torch.ones(4))
        f(torch.ones(n))

    run(4)
    with pytest.raises(BudgetExceeded, match="size mismatch at index 0. expected 4, actual 5"):
        run(5)


def test_the_code_inside_failing_is_the_news_not_the_budget() -> None:
    import torch

    import seamscope

    with pytest.raises(ValueError, match="boom"):
        with seamscope.budget(breaks=0):
            torch.compile(_f, backend="eager")(torch.ones(2))
            raise ValueError("boom")
