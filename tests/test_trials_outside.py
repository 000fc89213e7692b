"""What a trial's runs say beyond timings, torch-free on fabricated runs (``run_once`` replaced).

GIVEN a candidate whose runs show, in every repetition, the same failed guard (or break) that it
was meant to remove, THEN it is labelled ``did not remove its target``, never ranked above a
candidate that did nothing wrong, never chosen, and no saving is claimed for it, though it timed
faster. GIVEN a repetition ended by a signal seamscope did not send (an outside SIGTERM, sent here
to a real fresh process), THEN that repetition is run again once and the row says which and why;
a candidate fails only when its own script does.
"""

from __future__ import annotations

import os
import signal
import statistics
import threading
import time

import msgspec
import pytest

from seamscope.experiments.fresh import FreshProcesses, Job
from seamscope.experiments.remedy_spec import spec_from_words
from seamscope.experiments.trials import runs as trial_runs
from seamscope.experiments.trials import trial as tr
from seamscope.experiments.trials.catalogue import Draft
from seamscope.experiments.trials.runs import Outcome, outside_cause
from seamscope.model.trials import CallTime, RunFigures
from seamscope.render.trials_table import TrialsMarkdownRenderer

MS = 1_000_000
GUARD = "tensor 'input_ids' size mismatch at index 1. expected 7, actual 9"
OTHER = "tensor 'attention_mask' size mismatch at index 1. expected 7, actual 9"


def _figures(speed: float, k: int, guards: list[str], breaks: list[str] = (), causes: list[str] = (),
             reasons: dict[str, str] | None = None) -> RunFigures:
    """Call 0 compiles, calls 1-20 steady at ``speed``× the baseline (1% jitter per repetition)."""
    j = 1.0 + 0.01 * ((k * 5) % 3 - 1)
    per = [CallTime(index=0, phase="cold", wall_ns=int(500 * MS * speed * j))] + [
        CallTime(index=i, phase="steady", wall_ns=int((1.0 + 0.02 * i) * MS * speed * j)) for i in range(1, 21)]
    steady = [c.wall_ns for c in per[1:]]
    return RunFigures(label="x", ok=True, exit_code=0, total_ns=sum(c.wall_ns for c in per),
                      compile_ns=per[0].wall_ns // 2, steady_calls=20, steady_median_ns=int(statistics.median(steady)),
                      steady_p90_ns=max(steady), calls=21, breaks=len(breaks), recompiles=len(guards), fallbacks=0,
                      per_call=per, size_guards=list(guards), break_sites=list(breaks), cause_guards=list(causes),
                      break_reasons=dict(reasons or {}))


class _Runs:
    """Fake runs on a fake clock: ``make(name, k)`` gives a name's k-th run's figures; ``lost``:
    run folder → how many of its runs, first first, a signal from outside ends (``end(rel_dir)``
    makes such a run)."""

    def __init__(self, make, lost=None, end=None):
        self.make, self.lost, self.end = make, dict(lost or {}), end
        self.now, self.log, self.count = 0.0, [], {}

    def clock(self) -> float:
        return self.now

    def __call__(self, runner, flags, rel_dir, label, fingerprint=False, extra=None):
        self.now += 10.0
        self.log.append(rel_dir)
        if self.lost.get(rel_dir, 0) > 0:
            self.lost[rel_dir] -= 1
            return self.end(rel_dir)
        name = rel_dir.split("/")[1]
        k = self.count[name] = self.count.get(name, -1) + 1
        fig = msgspec.structs.replace(self.make(name, k), label=label, script_ns=9 * 10**9)
        if not fig.ok:
            return Outcome(fig, None, "Traceback ...\nValueError: boom\n")
        return Outcome(fig, object(), "", _prints() if fingerprint else None)


def _prints():
    from seamscope.experiments.trials import fingerprint as fpmod

    leaf = fpmod.Leaf(path="out", kind="tensor", dtype="torch.float32", shape=[4], sum=10.0, abs_sum=12.0, min=-1.0,
                      max=3.0, nans=0)
    return fpmod.Fingerprints(calls=[fpmod.CallPrint(index=0, leaves=[leaf])], calls_seen=1, stopped_at_update=None,
                              fingerprint_ns=0, script_ns=0)


def _trial(monkeypatch, tmp_path, drafts, make, lost=None, end=None, receipt=None, repeat=2):
    from seamscope.experiments.trials import load as loadmod

    monkeypatch.setattr(loadmod, "load_average", lambda: 0.5)  # a quiet machine, as measured
    monkeypatch.setattr(loadmod, "cpus", lambda: 2)
    fake = _Runs(make, lost, end)

    def run_once(runner, flags, rel_dir, label, fingerprint=False, extra=None):
        oc = fake(runner, flags, rel_dir, label, fingerprint, extra)
        if receipt is not None and rel_dir == "trials/baseline/rep-1":
            oc.receipt = receipt
        return oc

    monkeypatch.setattr(tr, "run_once", run_once)
    monkeypatch.setattr(tr, "catalogue", lambda receipt, *_, **__: list(drafts))
    monkeypatch.setattr(tr, "rewrites", lambda receipt, script: [])
    monkeypatch.setattr(tr, "start_drafts", lambda receipt, *_, **__: [])
    spec = trial_runs.TrialSpec(script="s.py", args=[], out=str(tmp_path), repeat=repeat)
    result = tr.run_trials(spec, [], [], [], trial_runs.Services(clock=fake.clock))
    return result.trials, fake.log


def _draft(name: str, words: list[str], origin: str = "F1") -> Draft:
    return Draft(name=name, spec=spec_from_words(words), origin=origin, targets="t", cost_ns=100)


# --- a candidate that changed nothing --------------------------------------------------------------


def test_a_mark_whose_target_guard_still_fails_in_every_run_is_labelled_and_never_chosen(monkeypatch, tmp_path):
    """The padded pair: marking ``input_ids`` alone leaves the same guard failing (the unmarked
    mask pins the length); it timed faster (one compilation's noise), and is still not chosen."""
    def make(name, k):
        if name == "baseline":
            return _figures(1.0, k, [GUARD, OTHER])
        if name == "mark-ids":  # faster as timed, yet the guard it targeted fails in every run
            return _figures(0.6, k, [GUARD])
        return _figures(0.8, k, [])  # marks both: the guards are gone

    ids = _draft("mark-ids", ["--mark-dynamic", "L['input_ids']:1"])
    both = _draft("mark-both", ["--mark-dynamic", "L['input_ids']:1", "--mark-dynamic", "L['attention_mask']:1"])
    t, _ = _trial(monkeypatch, tmp_path, [ids, both], make)
    by = {c.name: c for c in t.candidates}
    c = by["mark-ids"]
    assert c.total_verdict == "faster"  # what the timings alone said
    assert c.verdict == "did not remove its target" and GUARD in (c.reason or "") and "2 run(s)" in c.reason
    assert c.trade is None  # no saving claimed
    assert by["mark-both"].verdict == "faster" and t.chosen == "mark-both"
    assert [x.name for x in t.candidates] == ["mark-both", "mark-ids"]
    md = TrialsMarkdownRenderer().render(t)
    assert f"mark-ids: did not remove its target: the guard it targeted failed again in each of its 2 run(s): " \
           f"{GUARD}" in md
    # alone, it is not chosen, and the decision says why
    t, _ = _trial(monkeypatch, tmp_path, [ids], make)
    assert t.chosen is None and "mark-ids did not remove its target" in t.decision
    assert "saved" not in t.decision


def test_a_candidate_whose_target_break_happens_again_in_every_run_is_labelled(monkeypatch, tmp_path):
    from types import SimpleNamespace as NS

    site = "B0123abcd"
    receipt = NS(findings=NS(findings=[NS(finding_id=site, site_id=site, churn=None)]))

    def make(name, k):
        if name == "cso":  # the break stays in one repetition of two: it did remove it once
            return _figures(0.7, k, [], [site] if k == 0 else [])
        return _figures(0.7 if name == "stays" else 1.0, k, [], [site])

    cso = _draft("cso", ["--dynamo-config", "capture_scalar_outputs=True"], origin=site)
    stays = _draft("stays", ["--dynamo-config", "capture_dynamic_output_shape_ops=True"], origin=site)
    t, _ = _trial(monkeypatch, tmp_path, [cso, stays], make, receipt=receipt)
    by = {c.name: c for c in t.candidates}
    assert by["stays"].verdict == "did not remove its target" and site in (by["stays"].reason or "")
    assert by["cso"].verdict == "faster" and t.chosen == "cso"


def test_a_break_gone_but_its_line_broken_again_for_another_reason_says_both(monkeypatch, tmp_path):
    """A reorderable ``print`` whose argument reads a tensor's value: the print's break is gone, the
    same line breaks at ``Tensor.item()``; the site id is the place, so both reasons are named."""
    from types import SimpleNamespace as NS

    site = "B3cfaf5d0"
    receipt = NS(findings=NS(findings=[NS(finding_id=site, site_id=site, churn=None)]))
    was, now = "Failed to trace builtin operator", "Unsupported Tensor.item() call with capture_scalar_outputs=False"

    def make(name, k):
        why = now if name == "reorder" else was
        return _figures(0.7 if name == "reorder" else 1.0, k, [], [site], reasons={site: why})

    reorder = _draft("reorder", ["--dynamo-config", "reorderable_logging_functions+=builtins:print"], origin=site)
    t, _ = _trial(monkeypatch, tmp_path, [reorder], make, receipt=receipt)
    c = t.candidates[0]
    assert c.verdict == "did not remove its target" and t.chosen is None
    said = f"is gone, but the same line still breaks in each of its {c.repetitions} run(s), for another reason: "
    assert f"{site}: {was}) {said}" in (c.reason or "")
    assert (c.reason or "").endswith(now)


def test_a_code_change_whose_target_value_guard_still_fails_in_every_run_is_labelled(monkeypatch, tmp_path):
    """A ``tensor-scalar`` candidate for a recompile on ``L['scale'] == 0.5`` whose runs still
    recompile on that guard (another value of it: the same cause) is labelled and not chosen; an
    ``always-pass`` one whose flag guard is gone, though its runs recompile on something else, is
    ranked and chosen."""
    from types import SimpleNamespace as NS

    value, flag = "L['scale'] == 0.5", "L['mask'] is None"
    receipt = NS(findings=NS(findings=[
        NS(finding_id="FR1", site_id=None, churn=NS(pattern="value", guards=[value + "  # return x * scale"])),
        NS(finding_id="FR2", site_id=None, churn=NS(pattern="flag", guards=[flag]))]))

    def make(name, k):
        if name == "baseline":
            return _figures(1.0, k, [], causes=[value, flag])
        if name == "tensor-scalar-scale":  # timed faster, yet recompiles on the value it was to remove
            return _figures(0.6, k, [], causes=["L['scale'] == 0.7"])
        return _figures(0.8, k, [], causes=[value])  # the mask's recompile is gone

    from seamscope.experiments.unified_diff import make as make_diff

    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.py").write_text("y = f(x, 0.5)\n")
    scalar, passed = (Draft(name=name, spec=spec_from_words([]), origin=origin, targets="t", cost_ns=100,
                            diff=make_diff("y = f(x, 0.5)\n", after, "s.py"), change=name)
                      for name, origin, after in (("tensor-scalar-scale", "FR1", "y = f(x, t(0.5))\n"),
                                                  ("always-pass-mask", "FR2", "y = f(x, 0.5, m)\n")))
    t, _ = _trial(monkeypatch, tmp_path, [scalar, passed], make, receipt=receipt)
    by = {c.name: c for c in t.candidates}
    c = by["tensor-scalar-scale"]
    assert c.total_verdict == "faster" and c.verdict == "did not remove its target" and c.trade is None
    assert c.reason == f"the guard it targeted failed again in each of its 2 run(s): {value}"
    assert by["always-pass-mask"].verdict == "faster" and t.chosen == "always-pass-mask"
    assert [x.name for x in t.candidates] == ["always-pass-mask", "tensor-scalar-scale"]


def test_a_runs_recompile_causes_are_read_by_the_findings_rule():
    """Each recompile's cause as the findings name it (``cause_guards``: what failed against every
    cached variant), once per pattern and subject: another value of the same guard is the same cause,
    counted again."""
    from types import SimpleNamespace as NS

    from seamscope.experiments.trials.runs import recompile_causes, size_guards

    comps = [NS(failed_guards=[]), NS(failed_guards=["0/0: L['scale'] == 0.5  # return x * scale"]),
             NS(failed_guards=["0/1: L['scale'] == 0.7; L['mask'] is None", "0/0: L['scale'] == 0.5"])]
    # two recompiles, one cause: how many it explained is kept beside it
    assert recompile_causes(NS(ledger=NS(compilations=comps))) == {"L['scale'] == 0.5": 2}
    # a size guard is kept on its own, not with the other guards its variant's reason lists
    comps = [NS(failed_guards=[f"0/0: {GUARD}; {OTHER}; L['cache'].layers[0].is_initialized == False"])]
    assert size_guards(NS(ledger=NS(compilations=comps))) == [GUARD, OTHER]


# --- a repetition lost to the outside ---------------------------------------------------------------


def test_outside_causes_are_the_signals_seamscope_does_not_send():
    assert outside_cause(143, None) == "ended by SIGTERM, not sent by seamscope"  # seamscope run's own exit
    assert outside_cause(-signal.SIGTERM, None) == "ended by SIGTERM, not sent by seamscope"
    assert outside_cause(129, None) == "ended by SIGHUP, not sent by seamscope"
    assert "out of memory" in (outside_cause(-signal.SIGKILL, None) or "")
    assert outside_cause(None, "the fork server died") == "the fork server died"
    for own in (0, 1, 2, -signal.SIGSEGV, -signal.SIGABRT, None):  # its own failure, or hung (seamscope's kill)
        assert outside_cause(own, None) is None


def _sigterm_from_outside(tmp_path):
    """A real fresh process, ended by a SIGTERM this test sends it (as a CI runner or a user would)."""
    pid_file = tmp_path / "pid"

    def send() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if pid_file.exists() and pid_file.read_text():
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
                return
            time.sleep(0.02)

    def end(rel_dir):
        sender = threading.Thread(target=send)
        sender.start()
        with FreshProcesses(mode="process") as one:
            ended = one.run(Job(entry="fresh_jobs:wait_for_a_signal", arg=str(pid_file)), timeout=120)
        sender.join()
        fig = RunFigures(label=rel_dir.rsplit("/", 1)[1], ok=False, exit_code=ended.exit_code,
                         error=f"crashed: killed by signal {ended.signal}")
        return Outcome(fig, None, "", None, outside_cause(ended.exit_code, ended.lost))

    return end


def test_a_repetition_ended_by_an_outside_sigterm_is_run_again_and_said(monkeypatch, tmp_path):
    def make(name, k):
        if name == "broken":  # its own script fails: failed, never run again
            return RunFigures(label="x", ok=False, exit_code=1, error="exit 1: ValueError: boom")
        return _figures(0.6 if name == "cso" else 1.0, k, [])

    cso = _draft("cso", ["--dynamo-config", "capture_scalar_outputs=True"])
    broken = _draft("broken", ["--compile-option", "dynamic=true"])
    t, log = _trial(monkeypatch, tmp_path, [cso, broken], make, lost={"trials/cso/rep-2": 1},
                    end=_sigterm_from_outside(tmp_path))
    assert log.count("trials/cso/rep-2") == 2 and log.count("trials/broken/rep-1") == 1
    by = {c.name: c for c in t.candidates}
    c = by["cso"]
    assert c.verdict == "faster" and c.status == "tried" and t.chosen == "cso"
    assert [r.label for r in c.runs] == ["rep-1", "rep-2"] and all(r.ok for r in c.runs)
    assert c.retried == ["repetition 2 run again: the first ended by SIGTERM, not sent by seamscope"]
    assert by["broken"].verdict == "failed" and by["broken"].retried == []
    md = TrialsMarkdownRenderer().render(t)
    assert "cso: repetition 2 run again: the first ended by SIGTERM, not sent by seamscope" in md
    assert "2 (1 run again)" in md


def test_a_repetition_lost_twice_fails_the_candidate_with_why(monkeypatch, tmp_path):
    def killed(rel_dir):  # the kernel's out-of-memory killer, twice
        return Outcome(RunFigures(label="rep-1", ok=False, exit_code=-9, error="crashed: killed by signal SIGKILL"),
                       None, "", None, outside_cause(-9, None))

    cso = _draft("cso", ["--dynamo-config", "capture_scalar_outputs=True"])
    t, log = _trial(monkeypatch, tmp_path, [cso], lambda name, k: _figures(1.0, k, []),
                    lost={"trials/cso/rep-1": 2}, end=killed)
    c = t.candidates[0]
    assert log.count("trials/cso/rep-1") == 2  # run again once, no more
    assert c.verdict == "failed" and "SIGKILL" in (c.reason or "")
    assert c.retried == ["repetition 1 run again: the first killed by SIGKILL, not sent by seamscope (the machine: "
                         "out of memory, or a user)"]


@pytest.fixture(autouse=True)
def _jobs_on_path(monkeypatch):
    """``fresh_jobs`` (beside this file) importable in a new interpreter."""
    here = os.path.dirname(os.path.abspath(__file__))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))


def test_variation_beyond_twice_is_said_as_a_ratio():
    from seamscope.analyze.units import fmt_variation
    from seamscope.experiments.trials.verdicts import noise_text

    assert fmt_variation(0.12) == "12%" and fmt_variation(0.032, 1) == "3.2%"
    assert fmt_variation(37.86) == "38.9×" and fmt_variation(1.05) == "2.05×"
    text = noise_text(38.9, 37.86)
    assert "typically 38.9×" in text and "%" not in text
