"""Budget decisions on ledgers built without torch (the fake event source)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from seamscope.gates.budget import (
    Budget,
    BudgetUsageError,
    allow_matches,
    budget,
    evaluate,
    scope_of,
)
from seamscope.model.fake import FakeCall, FakeProgram, FakeStep, play
from seamscope.model.ledger import Compilation, Ledger

R, ISL, C, F = "region", "island", "compile", "fallback"


def _ledger(*calls: list[tuple[str, str]], breaks: dict[str, str] | None = None) -> Ledger:
    prog = FakeProgram(
        breaks=breaks or {},
        calls=[FakeCall([FakeStep(k, 5, cid) for k, cid in steps]) for steps in calls],
    )
    return play(prog).build()


WARM = [(C, "0/0"), (R, "0/0"), (ISL, ""), (C, "1/0"), (R, "1/0")]
HIT = [(R, "0/0"), (ISL, ""), (R, "1/0")]
RECOMPILE = [(C, "0/1"), (R, "0/1"), (ISL, ""), (R, "1/0")]


def _with_guards(led: Ledger, guards: dict[str, list[str]]) -> Ledger:
    comps = [
        msgspec.structs.replace(c, failed_guards=guards.get(c.compile_id, c.failed_guards))
        for c in led.compilations
    ]
    return msgspec.structs.replace(led, compilations=comps)


def test_within_budget_when_steady_calls_cross_no_break() -> None:
    led = _ledger(WARM, HIT, HIT)
    r = evaluate(Budget(breaks=0, recompiles=0, phase="steady"), led, led.calls)
    assert r.ok, r.message()
    assert r.scope_calls == [1, 2]


def test_a_break_crossed_in_the_steady_phase_is_named_with_its_site() -> None:
    led = _ledger(WARM, HIT, HIT, breaks={"0/0": "print"})
    site = led.break_sites[0]
    r = evaluate(Budget(breaks=0, phase="steady"), led, led.calls)
    assert not r.ok
    assert [b.site_id for b in r.breaks] == [site.site_id]
    assert r.breaks[0].crossings == 2  # two steady calls, one distinct site
    msg = r.message()
    assert site.site_id in msg and "model.py:15" in msg and "GB0059" in msg
    assert "over the budget breaks=0" in msg


def test_breaks_count_distinct_sites_not_crossings() -> None:
    led = _ledger(WARM, *[HIT] * 5, breaks={"0/0": "print"})
    assert evaluate(Budget(breaks=1), led, led.calls).ok
    assert not evaluate(Budget(breaks=0), led, led.calls).ok


@pytest.mark.parametrize("entry", ["model.py:15", "model.py", "SITE"])
def test_an_allow_listed_break_passes(entry: str) -> None:
    led = _ledger(WARM, HIT, breaks={"0/0": "print"})
    sid = led.break_sites[0].site_id
    entry = sid if entry == "SITE" else entry
    r = evaluate(Budget(breaks=0, allow=(entry,)), led, led.calls)
    assert r.ok, r.message()
    assert [b.allowed_by for b in r.allowed] == [entry]
    assert r.unused_allow == []


def test_an_allow_entry_for_another_line_does_not_hide_the_break() -> None:
    led = _ledger(WARM, HIT, breaks={"0/0": "print"})
    r = evaluate(Budget(breaks=0, allow=("model.py:16",)), led, led.calls)
    assert not r.ok
    assert r.unused_allow == ["model.py:16"]
    assert "matched no break" in r.message()


def test_a_recompile_after_steady_state_fails_naming_the_failed_guard() -> None:
    led = _with_guards(
        _ledger(WARM, HIT, RECOMPILE), {"0/1": ["0/0: tensor 'x' size mismatch at index 0"]}
    )
    r = evaluate(Budget(recompiles=0, phase="steady"), led, led.calls)
    assert not r.ok
    assert [x.compile_id for x in r.recompiles] == ["0/1"]
    assert "tensor 'x' size mismatch at index 0" in r.message()
    assert "over the budget recompiles=0" in r.message()


def test_a_recompile_during_warm_up_is_allowed_by_a_steady_budget_but_not_by_a_cold_one() -> None:
    led = _ledger(WARM, RECOMPILE, HIT, HIT)
    assert evaluate(Budget(recompiles=0, phase="steady"), led, led.calls).ok
    assert not evaluate(Budget(recompiles=0, phase="cold"), led, led.calls).ok
    assert not evaluate(Budget(recompiles=0), led, led.calls).ok
    assert evaluate(Budget(recompiles=1), led, led.calls).ok


def test_fallbacks_are_counted() -> None:
    led = _ledger(WARM, [(F, "0/2"), (R, "1/0")])
    r = evaluate(Budget(fallbacks=0), led, led.calls)
    assert not r.ok and [f.compile_id for f in r.fallbacks] == ["0/2"]
    assert "recompile limit" in r.message()


def test_an_attempt_that_hit_the_recompile_limit_is_a_recompile_too() -> None:
    """As ``recompile_count`` and ``TORCH_LOGS=recompiles`` count it: every compile id with y > 0."""
    led = _ledger(WARM, [(F, "0/2"), (R, "1/0")])
    limit = Compilation(compile_id="0/2", frame_name="f", file="m.py", line=1, status="fallback", call_index=1,
                        fail_type="Unsupported", fail_reason="Dynamo recompile limit exceeded")
    led = msgspec.structs.replace(led, compilations=[*led.compilations, limit])
    r = evaluate(Budget(recompiles=0), led, led.calls)
    assert not r.ok and [x.compile_id for x in r.recompiles] == ["0/2"]
    assert evaluate(Budget(recompiles=1), led, led.calls).ok


def test_no_call_observed_fails_and_names_the_trap() -> None:
    led = _ledger()
    r = evaluate(Budget(breaks=0), led, [], unattributed_compiles=2)
    assert not r.ok
    msg = r.message()
    assert "no compiled call was observed inside the budget" in msg
    assert "before the budget began" in msg
    assert "2 compilation(s)" in msg


def test_steady_budget_without_a_steady_call_fails_instead_of_passing_on_nothing() -> None:
    led = _ledger(WARM)
    r = evaluate(Budget(breaks=0, phase="steady"), led, led.calls)
    assert not r.ok and "no steady call" in r.message()


def test_only_the_calls_given_are_judged() -> None:
    # A budget that joined a session judges the calls made inside it, not the earlier ones.
    led = _ledger(WARM, RECOMPILE, HIT, HIT)
    assert evaluate(Budget(recompiles=0), led, led.calls[2:]).ok


@given(st.lists(st.sampled_from(["cold", "steady"]), max_size=12))
def test_phases_split_the_calls_at_the_first_steady_call(phases: list[str]) -> None:
    led = _ledger(WARM)
    calls = [msgspec.structs.replace(led.calls[0], index=i, phase=p) for i, p in enumerate(phases)]
    cold, steady = scope_of(calls, "cold"), scope_of(calls, "steady")
    assert cold + steady == calls
    assert all(c.phase == "cold" for c in cold)
    assert not steady or steady[0].phase == "steady"
    assert scope_of(calls, None) == calls


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"breaks": -1}, "whole number"),
        ({"breaks": 1.5}, "whole number"),
        ({"recompiles": True}, "whole number"),
        ({"breaks": 0, "phase": "warm"}, "unknown phase"),
        ({"breaks": 0, "allow": "model.py:3"}, "a list"),
        ({"breaks": 0, "allow": [3]}, "allow entry"),
        ({}, "checks nothing"),
    ],
)
def test_a_malformed_budget_is_a_usage_error(kwargs: dict, words: str) -> None:
    with pytest.raises(BudgetUsageError, match=words):
        budget(**kwargs)


@pytest.mark.parametrize(
    "entry, expected",
    [
        ("Babcdef01", True),
        ("src/pkg/model.py:15", True),
        ("pkg/model.py:15", True),
        ("model.py:15", True),
        ("odel.py:15", False),
        ("model.py:14", False),
        ("model.py", True),
        ("other.py", False),
    ],
)
def test_allow_entries(entry: str, expected: bool) -> None:
    assert allow_matches(entry, "Babcdef01", "src/pkg/model.py", 15) is expected


def test_a_breaks_budget_fails_on_calls_that_ran_only_graphs_compiled_before_it() -> None:
    led = _ledger(WARM)
    blind = [msgspec.structs.replace(c, events=[]) for c in led.calls]
    r = evaluate(Budget(breaks=0), led, blind, graphs_before=3)
    assert not r.ok and f"{len(blind)} call(s) in scope ran only graphs compiled before" in r.message()
    assert evaluate(Budget(breaks=0), led, led.calls, graphs_before=3).ok  # their regions were timed
    assert evaluate(Budget(recompiles=0), led, blind, graphs_before=3).ok  # no breaks limit
    assert evaluate(Budget(breaks=0), led, blind, graphs_before=0).ok


def test_graph_runs_outside_any_call_are_noted_in_the_message() -> None:
    led = _ledger(WARM, RECOMPILE)
    r = evaluate(Budget(recompiles=0), led, led.calls, outside_graph_runs=4)
    assert not r.ok and "4 compiled graph run(s) happened inside the budget outside any observed call" in r.message()
    empty = evaluate(Budget(breaks=0), led, [], outside_graph_runs=2)
    assert "2 compiled graph run(s)" in empty.message()
    assert "torch._dynamo.optimize" in r.message()
    threads = evaluate(Budget(recompiles=0), led, led.calls, outside_graph_runs=4, foreign_calls=1).message()
    assert "1 call(s) were made on another thread" in threads and "torch._dynamo.optimize" not in threads
