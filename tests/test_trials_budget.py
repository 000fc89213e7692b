"""The schedule of ``try`` (:class:`Budget`), torch-free on a fake clock.

GIVEN measured run times, THEN every "is there room?" question is one rule: the runs still owed,
each at its name's median (the trial's first run left out, a name with no run at the baseline's);
GIVEN no budget, THEN everything fits and a run's timeout is ``--timeout``; GIVEN a budget that
ended, THEN no run starts, and the exception says before which run.
"""

from __future__ import annotations

import pytest

from seamscope.experiments.trials.budget import BASELINE, OUTPUT_RUNS, START_S, Budget, BudgetSpent
from seamscope.experiments.trials.runs import TrialSpec, default_max_repeat


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0  # the trial starts at a clock that is not 0: elapsed is from the start

    def __call__(self) -> float:
        return self.now


def test_the_clock_starts_when_the_budget_is_made_and_the_deadline_is_start_plus_budget() -> None:
    clock = _Clock()
    b = Budget(60.0, clock=clock)
    assert (b.start, b.deadline, b.elapsed(), b.left()) == (100.0, 160.0, 0.0, 60.0)
    clock.now = 170.0
    assert b.left() == 0.0 and b.spent()
    assert Budget(None, clock=clock).left() is None and not Budget(None, clock=clock).spent()


def test_the_first_run_is_estimated_from_its_script_time_and_left_out_of_the_medians() -> None:
    clock = _Clock()
    b = Budget(1000.0, clock=clock)
    b.record(BASELINE, 50.0, script_s=8.0)  # it also waited for the fork server to import torch
    assert b.typical() == pytest.approx(8.0 + START_S)
    assert b.per_run(BASELINE) == pytest.approx(8.0 + START_S) == b.per_run("never-ran")
    b.record("a", 12.0)
    b.record(BASELINE, 10.0)
    assert b.typical() == 11.0  # the runs after the first
    assert b.per_run(BASELINE) == 10.0 and b.per_run("a") == 12.0
    assert b.per_run("b") == 10.0  # no run yet: the baseline's
    assert b.done(BASELINE) == 2 and b.done("a") == 1 and b.run_s == [50.0, 12.0, 10.0]
    # a first run quicker than its script time plus a start is taken as it is
    quick = Budget(None, clock=clock)
    quick.record(BASELINE, 3.0, script_s=8.0)
    assert quick.typical() == 3.0


def test_one_rule_for_the_seconds_owed_and_what_fits() -> None:
    clock = _Clock()
    b = Budget(200.0, clock=clock)
    b.record(BASELINE, 50.0)
    b.record("a", 20.0)
    b.record(BASELINE, 10.0)
    clock.now += 80.0
    assert b.owed({BASELINE: 2, "a": 1, "b": 3, "gone": 0}) == 2 * 10 + 20 + 3 * 10
    assert b.fits({BASELINE: 12}) and not b.fits({BASELINE: 13})  # 80 + 120 = 200 fits; 210 does not
    assert b.shortfall({BASELINE: 13}) == (130.0, 120.0)
    # a new candidate with repeat 3: the baseline's missing repetition and its output runs, the
    # started candidate's two missing repetitions and its output run, the new one's three and one
    owed = b.admitting("b", 3, started=["a", BASELINE, "b"])
    assert owed == {BASELINE: 1 + OUTPUT_RUNS, "a": 2 + 1, "b": 3 + 1}
    assert b.missing(2, {BASELINE: 0, "a": 1}) == {BASELINE: 0, "a": 2}
    assert Budget(None, clock=clock).fits({BASELINE: 10**9})


def test_a_run_s_timeout_is_the_shorter_of_timeout_and_the_budget_left() -> None:
    clock = _Clock()
    b = Budget(30.0, timeout=100.0, clock=clock)
    assert b.timeout("trials/baseline/rep-1") == (30.0, True)
    clock.now += 29.0
    assert b.timeout("x") == (pytest.approx(1.0), True)
    assert Budget(None, timeout=7.0, clock=clock).timeout("x") == (7.0, False)
    assert Budget(1000.0, timeout=7.0, clock=clock).timeout("x") == (7.0, False)
    assert Budget(None, clock=clock).timeout("x") == (None, False)
    clock.now += 2.0
    with pytest.raises(BudgetSpent, match="the budget ended before trials/a/rep-2") as e:
        b.timeout("trials/a/rep-2")
    assert e.value.during == "trials/a/rep-2"


def test_the_spec_is_frozen_and_resolves_max_repeat_once() -> None:
    spec = TrialSpec(script="s.py", args=[], out="o", repeat=3)
    assert spec.max_repeat == spec.most == 3  # None: no more than --repeat
    assert TrialSpec(script="s.py", args=[], out="o", repeat=4, max_repeat=2).most == 4  # never below repeat
    assert TrialSpec(script="s.py", args=[], out="o", repeat=3, max_repeat=6).most == 6
    assert (default_max_repeat(1), default_max_repeat(3), default_max_repeat(8)) == (1, 6, 8)
    with pytest.raises(AttributeError):
        spec.repeat = 5  # type: ignore[misc]
