"""``try --budget`` as a hard bound, on fake runs and a fake clock.

GIVEN a trial whose budget ends while a run is still going (the run is killed there:
``BudgetSpent``), THEN the trial ends with what it measured, lists what it did not finish as over
the budget, runs nothing more, and says on its result during which run the budget ended (a run's
timeout, the budget left where that is shorter than ``--timeout``, is tested in
``test_trials_budget.py``).
"""

from __future__ import annotations

from seamscope.experiments.remedy_spec import spec_from_words
from seamscope.experiments.trials import runs as trial_runs
from seamscope.experiments.trials import trial as tr
from seamscope.experiments.trials.budget import BudgetSpent
from seamscope.experiments.trials.catalogue import Draft
from seamscope.model.trials import RunFigures


class _Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_run_killed_by_the_budget_ends_the_trial_with_what_was_measured(monkeypatch, tmp_path) -> None:
    from seamscope.experiments.trials.runs import Outcome

    log: list[str] = []
    clock = _Clock()

    def fake_run_once(setup, flags, rel_dir, label, fingerprint=False, extra=None):
        clock.now += 10.0
        log.append(rel_dir)
        if rel_dir == "trials/dyn/rep-1":  # it hangs: the budget kills it
            raise BudgetSpent(f"the budget ended during {rel_dir}", rel_dir)
        return Outcome(RunFigures(label=label, ok=True, exit_code=0, calls=3, total_ns=1000, steady_calls=2,
                                  steady_median_ns=100, per_call=[]), object(), "")

    drafts = [Draft(name="cso", spec=spec_from_words(["--dynamo-config", "capture_scalar_outputs=True"]),
                    origin="F1", targets="t", cost_ns=300),
              Draft(name="dyn", spec=spec_from_words(["--compile-option", "dynamic=true"]), origin="F2",
                    targets="t", cost_ns=200),
              Draft(name="limit", spec=spec_from_words(["--dynamo-config", "recompile_limit=64"]), origin="F3",
                    targets="t", cost_ns=100)]
    monkeypatch.setattr(tr, "run_once", fake_run_once)
    monkeypatch.setattr(tr, "catalogue", lambda receipt, *_, **__: drafts)
    monkeypatch.setattr(tr, "start_drafts", lambda receipt, *_, **__: [])
    spec = trial_runs.TrialSpec(script="s.py", args=[], out=str(tmp_path), repeat=2, budget_s=1000.0)
    result = tr.run_trials(spec, [], [], [], trial_runs.Services(clock=clock))
    t = result.trials
    assert result.budget_ended == "trials/dyn/rep-1"  # carried on the result, not written into the inputs
    assert log[-1] == "trials/dyn/rep-1"  # nothing ran after it
    by = {c.name: c for c in t.candidates}
    assert [r.label for r in by["cso"].runs] == ["rep-1"]  # what finished is kept
    for name in ("dyn", "limit"):
        assert by[name].status == "not tried" and (by[name].reason or "").startswith("over the budget"), by[name]
    assert not t.interrupted and "combined" not in by
