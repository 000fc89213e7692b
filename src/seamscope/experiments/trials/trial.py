"""Remedy trials: the baseline and one candidate per applicable remedy, each run in a fresh process.

:func:`run_trials` reads as its rounds:

0. **the baseline's first run**: its findings choose the candidates (:func:`_candidates`);
1. **the single candidates** (:func:`_singles`): the timed repetitions interleaved (baseline, A,
   B, baseline, A, B...) so that the machine's drift hits all alike, a follow-up for a mark that
   left other dimensions of its source changing, more repetitions for the undecided, then the
   output checks (the baseline, an eager run, each candidate once, and the baseline again only
   where a candidate's outputs differ from its first: :mod:`.outputs`), each in a run of its own
   outside the timed repetitions;
2. **the stacked candidates** (:func:`_stacked`): the best remedies that do not conflict as one
   candidate, and a candidate that failed alone retried with the one that removes what it failed
   from, measured against a baseline interleaved with them;
3. **the decision** (:func:`_trials`): ranking, the chosen candidate and its prose
   (:mod:`.verdicts`).

Under ``--budget`` a candidate starts only when its runs fit (:class:`.budget.Budget`, which owns
the schedule); the budget that ended is carried on the result (:class:`TrialResult`). A
repetition ended from outside (a signal seamscope did not send, the machine) is run again once.
The arithmetic is torch-free and tested on fakes: the catalogue in :mod:`.catalogue`, verdicts,
pairing, ranking and the decision's prose in :mod:`.verdicts`.
"""

from __future__ import annotations

import dataclasses
import os
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec

from ...errors import UnusableInput
from ...model.receipt import Receipt
from ...model.trials import Candidate, GuardCheck, OutputCheck, Overhead, RunFigures, Trials
from ..remedy_spec import RemedySpec, code_change, compile_override, spec_from_words
from . import fingerprint as fpmod
from . import load as loadmod
from .budget import BASELINE, OUTPUT_RUNS, Budget, BudgetSpent
from .cache import (
    RunExtra,
    code_change_of,
    drop_warm,
    env_prefix,
    extra_for,
    prime_extra,
    start_drafts,
    trade_text,
    warm_paths,
)
from .catalogue import (
    catalogue,
    choose,
    compile_sites,
    family,
    only_matched_nothing,
    schedule,
    source_of_guard,
    unique_names,
)
from .draft import Draft
from .guard_check import guard_check
from .outputs import baseline_check, differing, output_check, unknown_text
from .patches import attach as attach_patches
from .rewrites import rewrites
from .runs import Outcome, Runner, Services, TrialSpec, run_command, run_once, shell_join
from .split import EAGER, BaselineFailed, first_split, split_decision
from .targets import Target, kept_target, target_of
from .verdicts import (
    choose_best,
    combine,
    combined_names,
    compile_changes,
    decision_text,
    metrics_of,
    noise_text,
    overall,
    paired,
    rank,
    retries,
    unmatched,
    wants_more,
)

_T = TypeVar("_T")

# --- the trial's state ----------------------------------------------------------------------------


@dataclass(frozen=True)
class TrialResult:
    """What :func:`run_trials` returns: the trials, the baseline's first receipt, and the run the
    budget ended during (None: it did not end a run)."""

    trials: Trials
    receipt: Receipt
    budget_ended: str | None = None


@dataclass
class _State:
    """What the trial has measured so far (its inputs are ``spec``; its schedule is ``budget``)."""

    spec: TrialSpec
    services: Services
    budget: Budget
    runner: Runner
    first: Receipt | None = None
    drafts: list[Draft] = field(default_factory=list)
    runs: dict[str, list[RunFigures]] = field(default_factory=dict)
    checks: dict[str, Outcome] = field(default_factory=dict)
    not_tried: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    sites: list[str] = field(default_factory=list)
    """``FILE:LINE`` of the script's ``torch.compile`` calls (where a code change goes)."""
    folded: list[str] = field(default_factory=list)
    compare_ns: int = 0
    baseline_check_runs: list[RunFigures] = field(default_factory=list)
    eager: Outcome | None = None
    second: Outcome | None = None
    """The baseline's second check run, made only when a candidate's outputs differ from its first."""
    deterministic: bool | None = None
    extras: dict[str, RunExtra] = field(default_factory=dict)
    """How a candidate's processes start, where that is the remedy (:mod:`.cache`)."""
    short: dict[str, float] = field(default_factory=dict)
    """Undecided candidates the budget stopped: seconds one more round would have needed."""
    retried: dict[str, list[str]] = field(default_factory=dict)
    """Per name, each run lost to the outside and run again (``repetition 2 run again: ...``)."""
    targets: dict[str, Target] = field(default_factory=dict)
    """Per candidate, the failed guards and break sites its cause showed in the baseline."""
    stopped: str | None = None
    """``interrupted`` (Ctrl-C, SIGTERM), ``budget`` (it ended during a run), or None."""
    budget_ended: str | None = None
    total_runs: int = 0
    done: int = 1
    split: Draft | None = None
    """Where the compiled script fails and runs eagerly: the disabled function's candidate (the
    baseline is then the script run eagerly, :mod:`.split`)."""

    def over(self, name: str) -> bool:
        """Nothing more runs for ``name``: it failed or was left out."""
        return name in self.failed or name in self.not_tried

    def stopped_text(self) -> str:
        return "interrupted" if self.stopped == "interrupted" else "the budget ended before it"


def _progress(st: _State, text: str) -> None:
    if st.services.progress is None:
        return
    eta = ""
    if st.budget.run_s:
        secs = statistics.median(st.budget.run_s) * (st.total_runs - st.done)
        eta = f" · ETA {int(secs // 60)}m{int(secs % 60):02d}s"
    st.services.progress(f"{text}{eta}")


def _once_more(st: _State, name: str, what: str, flags: list[str], rel_dir: str, label: str,
               fingerprint: bool = False, extra: RunExtra | None = None, probe: bool = False) -> Outcome:
    """A run, and once more where the first ended from outside (a signal seamscope did not send,
    the machine): that run says nothing of the candidate. The row says which run and why.
    ``probe``: the check run of an unsafe guard setting (:mod:`.guard_check`)."""
    more = {"probe": True} if probe else {}  # a run that probes nothing is started as every other run is
    oc = run_once(st.runner, flags, rel_dir, label, fingerprint=fingerprint, extra=extra, **more)
    if oc.outside is not None and not oc.figures.ok:
        st.retried.setdefault(name, []).append(f"{what} run again: the first {oc.outside}")
        oc = run_once(st.runner, flags, rel_dir, label, fingerprint=fingerprint, extra=extra, **more)
    return oc


# --- the runs -------------------------------------------------------------------------------------


def _admitted(st: _State, name: str, key: str) -> bool:
    """Whether ``name`` may run now: the baseline always; a candidate's first run only when the
    runs still owed with it fit (else it is not tried, with the seconds it needed); a later one
    while the budget lasts (the repetitions done are kept)."""
    b = st.budget
    if b.seconds is None or name == BASELINE:
        return True
    if st.runs.get(key):
        return not b.spent()
    started = [k for k in b.times if not st.over(k) and not k.startswith(BASELINE + "-")]
    owed = b.admitting(name, st.spec.repeat, started)
    if b.fits(owed):
        return True
    need, left = b.shortfall(owed)
    st.not_tried[name] = (f"over the budget: its runs and those still owed need about {need:.0f} s, {left:.0f} s "
                          f"were left; about {need - left:.0f} s more --budget would try it")
    return False


def _timed(st: _State, names: list[tuple[str, list[str]]], reps: list[int], keys: dict[str, str] | None = None) -> None:
    """Interleaved repetitions: for each repetition every candidate once, in order (the baseline
    first). ``reps``: the repetition numbers (each run's folder is ``trials/NAME/rep-K``);
    ``keys``: where a name's figures are kept, when not under its own name."""
    keys = keys or {}
    for rep in reps:
        for name, flags in names:
            key = keys.get(name, name)
            if st.over(name) or not _admitted(st, name, key):
                continue
            _progress(st, f"{name} · repetition {rep} · run {st.done + 1}/{st.total_runs}")
            t0 = st.budget.clock()
            oc = _once_more(st, name, f"repetition {rep}", flags, os.path.join("trials", name, f"rep-{rep}"),
                            f"rep-{rep}", extra=st.extras.get(name))
            st.budget.record(key, st.budget.clock() - t0)
            st.done += 1
            fig = msgspec.structs.replace(oc.figures, load_avg=loadmod.load_average(), cpus=loadmod.cpus())
            st.runs.setdefault(key, []).append(fig)
            if not oc.figures.ok:
                if name == BASELINE:
                    raise BaselineFailed(oc.figures.error or "the baseline failed", oc.stderr)
                st.failed[name] = oc.figures.error or "failed"


def _adaptive(st: _State, drafts: list[Draft], base_key: str, outputs: dict[str, int],
              next_rep: int | None = None) -> None:
    """More repetitions, interleaved with the baseline's, for the candidates still undecided that
    could win (:func:`.verdicts.wants_more`), one round at a time, until each is decided,
    ``max_repeat`` is reached or the round and the output runs owed after it (``outputs``) do
    not fit in the budget."""
    rep = next_rep or len(st.runs.get(base_key, [])) + 1
    while True:
        base = st.runs.get(base_key, [])
        more = [d for d in drafts if not st.over(d.name)
                and 0 < len(st.runs.get(d.name, [])) < st.spec.most and len(st.runs[d.name]) <= len(base)
                and wants_more(st.runs[d.name], base[: len(st.runs[d.name])])]
        if not more:
            return
        round_ = {base_key: 1, **{d.name: 1 for d in more}}
        if not st.budget.fits({**outputs, **{k: n + outputs.get(k, 0) for k, n in round_.items()}}):
            for d in more:
                st.short[d.name] = st.budget.owed(round_)
            return
        st.total_runs += 1 + len(more)
        pair: list[tuple[str, list[str]]] = [(BASELINE, [])] + [(d.name, d.run_flags()) for d in more]
        _timed(st, pair, [rep], keys={BASELINE: base_key})
        rep += 1


def _check(st: _State, name: str, flags: list[str], rel: str, probe: bool = False) -> Outcome:
    oc = _once_more(st, name, "the output check", flags, os.path.join("trials", rel), "check", fingerprint=True,
                    extra=st.extras.get(name), probe=probe)
    st.checks[name] = oc
    st.done += 1
    return oc


def _checks(st: _State, drafts: list[Draft]) -> None:
    for d in drafts:
        if not st.over(d.name) and st.runs.get(d.name):
            _progress(st, f"outputs · {d.name}")
            _check(st, d.name, d.run_flags(), f"{d.name}/check", probe=d.spec.unsafe())


def _second_check(st: _State) -> None:
    """The baseline's second check run, once, when a candidate's outputs differ from its first
    (whether the baseline is deterministic decides only then)."""
    tc = time.perf_counter_ns()
    differ = st.second is None and differing(st.checks.get(BASELINE), st.checks)
    st.compare_ns += time.perf_counter_ns() - tc
    if not differ:
        return
    st.total_runs += 1
    _progress(st, "outputs · baseline again (a candidate's outputs differ from its first run)")
    st.second = run_once(st.runner, [], os.path.join("trials", BASELINE, "check-2"), "check-2", fingerprint=True)
    st.baseline_check_runs.append(st.second.figures)
    st.done += 1
    tc = time.perf_counter_ns()
    b1, b2 = st.checks[BASELINE].fingerprints, st.second.fingerprints
    if b1 is not None and b2 is not None:
        st.deterministic = fpmod.compare(b1, b2).equal
    st.compare_ns += time.perf_counter_ns() - tc


# --- the rounds -----------------------------------------------------------------------------------


def _candidates(st: _State, extra: list[RemedySpec], only: list[str], skip: list[str]) -> list[Draft]:
    """Round 0: the baseline's first run (it also fills the cache directory a warm-start candidate
    reads), and the candidates its findings suggest, with the user's own, each with its patch."""
    spec = st.spec
    _progress(st, "baseline · first run (its findings choose the candidates)")
    t0 = st.budget.clock()
    first = _once_more(st, BASELINE, "repetition 1", [], os.path.join("trials", BASELINE, "rep-1"), "rep-1",
                       extra=prime_extra(spec.out))
    script_ns = first.figures.script_ns
    st.budget.record(BASELINE, st.budget.clock() - t0, script_ns / 1e9 if script_ns is not None else None)
    _say_how_runs_start(st)
    if not first.figures.ok or first.receipt is None:
        drop_warm(spec.out)
        first = _split(st, first)  # raises where the program fails eagerly too, or nothing lets it compile
        spec = st.spec
    st.first = receipt = first.receipt
    assert receipt is not None
    st.runs[BASELINE] = [first.figures]
    st.sites = compile_sites(spec.script)
    if st.split is not None:  # the compiled run fails: a working compiled run first, before any speed
        found = [st.split]
        st.folded.append(f"none: the compiled baseline fails ({st.split.targets}): its findings are not known; "
                         f"the baseline is the script run eagerly ({' '.join(EAGER)})")
    else:
        found = catalogue(receipt, *_workload_trace(spec), script=spec.script, folded=st.folded)
        changes = rewrites(receipt, spec.script)  # code changes no flag makes (:mod:`.rewrites`)
        for d in changes:  # a cause no flag removes may have a code change that does: say so where it is folded
            st.folded[:] = [f"{ln}; the code change {d.name} is tried for it" if ln.startswith(f"none: {d.origin} ")
                            else ln for ln in st.folded]
        found += changes
        found += start_drafts(receipt, st.folded, artifacts_file=warm_paths(spec.out)[1],
                              env={**os.environ, **spec.env})
    drafts = schedule(choose(found, only, skip))
    for i, user in enumerate(extra, 1):
        drafts.append(Draft(name=f"user-{i}", spec=user, origin="user", targets="given with --candidate"))
    drafts = unique_names(drafts)
    if only and not drafts:
        drop_warm(spec.out)
        raise UnusableInput(only_matched_nothing(found, only))
    attach_patches(drafts, spec.out, spec.script, receipt, st.folded)  # each run applies its patch
    st.extras = {d.name: e for d in drafts if (e := extra_for(d, spec.out)) is not None}
    if not any(d.start for d in drafts):
        drop_warm(spec.out)  # no candidate reads it
    st.drafts = drafts
    return drafts


def _say_how_runs_start(st: _State) -> None:
    """Where the fork server refused (what it imported started a thread or initialized CUDA), every
    run pays an interpreter's start and its imports: the progress line says so, once, and why."""
    processes = st.services.processes
    why = processes.refused if processes is not None else None
    if why is not None:
        _progress(st, "each run starts a new interpreter: forking the server that imported torch and the "
                      f"script's libraries is unsafe ({why})")


def _split(st: _State, first: Outcome) -> Outcome:
    """The seeds' first split where the compiled baseline fails (:mod:`.split`): the candidate that
    disables the failing function, and the baseline's first run again, eagerly (what works today)."""
    spec = st.spec
    if first.figures.exit_code != 1 or ".py:" in spec.script:  # a hang or a crash; a workload: no patch
        raise BaselineFailed(first.figures.error or "the baseline failed", first.stderr)
    st.split = first_split(st.runner, st.services.progress, first)
    st.spec = dataclasses.replace(spec, baseline_flags=tuple(EAGER))
    st.runner = Runner(st.spec, st.budget, st.services.processes)
    t0 = st.budget.clock()
    again = run_once(st.runner, [], os.path.join("trials", BASELINE, "rep-1"), "rep-1")
    st.budget.record(BASELINE, st.budget.clock() - t0, None)
    if not again.figures.ok or again.receipt is None:
        raise BaselineFailed(again.figures.error or "the baseline failed eagerly", again.stderr)
    return again


def _singles(st: _State, drafts: list[Draft]) -> bool:
    """Round 1: the single candidates' repetitions (the baseline's first is the run of round 0),
    a mark's follow-up, the undecided's further rounds, then the output runs."""
    spec = st.spec
    order: list[tuple[str, list[str]]] = [(BASELINE, [])] + [(d.name, d.run_flags()) for d in drafts]
    st.total_runs = len(order) * spec.repeat + 2 + len(drafts)  # the baseline's second check added where needed
    _timed(st, order[1:], [1])
    for d in more_dims(drafts, st.runs):  # a mark that left other dimensions changing
        attach_patches([d], spec.out, spec.script, st.first)
        drafts.append(d)
        order.append((d.name, d.run_flags()))
        st.total_runs += spec.repeat + 1
        _timed(st, [(d.name, d.run_flags())], [1])
    if spec.repeat > 1:
        _timed(st, order, list(range(2, spec.repeat + 1)))
    _adaptive(st, drafts, BASELINE, {BASELINE: OUTPUT_RUNS, **{d.name: 1 for d in drafts}})
    _progress(st, "outputs · baseline and eager")  # outside the timed repetitions
    # an unsafe guard setting is checked against the baseline's calls on inputs changed on purpose
    _check(st, BASELINE, [], "baseline/check-1", probe=any(d.spec.unsafe() for d in drafts))
    st.eager = run_once(st.runner, ["--stance", "force_eager"], os.path.join("trials", "eager", "check"), "check",
                        fingerprint=True)
    st.baseline_check_runs = [st.eager.figures]
    st.done += 1
    _checks(st, drafts)
    _second_check(st)
    return True


def _stacked(st: _State, second: list[Draft]) -> list[Candidate]:
    """Round 2, against a baseline of its own (``baseline-2``): the stacked candidates'
    repetitions, the undecided's further rounds, their output runs."""
    spec = st.spec
    attach_patches(second, spec.out, spec.script, st.first)  # stacked: one composed patch
    st.drafts += second
    pair: list[tuple[str, list[str]]] = [(BASELINE, [])] + [(d.name, d.run_flags()) for d in second]
    first_rep = len(st.runs[BASELINE]) + 1  # after the repetitions the singles had
    st.total_runs += (1 + len(second)) * spec.repeat + len(second)
    _timed(st, pair, list(range(first_rep, first_rep + spec.repeat)), keys={BASELINE: "baseline-2"})
    _adaptive(st, second, "baseline-2", {d.name: 1 for d in second}, first_rep + spec.repeat)
    _checks(st, second)
    _second_check(st)  # where only a stacked candidate differs
    tc = time.perf_counter_ns()
    cands = [_candidate(st, d, st.runs.get("baseline-2", []), _output_check(st, d.name)
                        if d.name in st.checks else OutputCheck(status="not checked")) for d in second]
    st.compare_ns += time.perf_counter_ns() - tc
    return cands


def _stopping(st: _State, round_: Callable[[], _T], budget_stops: bool = True) -> _T | None:
    """A round's result, or None where Ctrl-C or SIGTERM (``interrupted``) or the budget ending
    during a run stopped it with what it measured. With ``budget_stops`` False the budget ending
    leaves the round's candidates out, as ones the budget did not fit, and the trial goes on."""
    try:
        return round_()
    except KeyboardInterrupt:
        st.stopped = "interrupted"
    except BudgetSpent as e:  # a run outlasted the budget (a hang)
        st.budget_ended = e.during
        if budget_stops:
            st.stopped = "budget"
    return None


def run_trials(spec: TrialSpec, extra: list[RemedySpec], only: list[str], skip: list[str],
               services: Services | None = None) -> TrialResult:
    """The whole trial, round by round. Raises :class:`BaselineFailed` (nothing else run) when the
    script fails, :class:`.budget.BudgetSpent` when the budget ends in the baseline's first run."""
    t_start = time.perf_counter_ns()
    services = services or Services()
    budget = Budget(spec.budget_s, spec.timeout, services.clock)  # the trial's clock starts here
    st = _State(spec=spec, services=services, budget=budget, runner=Runner(spec, budget, services.processes))
    drafts = _candidates(st, extra, only, skip)  # 0: the baseline's first run chooses the candidates
    _stopping(st, lambda: _singles(st, drafts))  # 1: the single candidates
    ranked = rank(_judged(st, drafts))
    second = _second_drafts(st, ranked) if st.stopped is None else []
    stacked = _stopping(st, lambda: _stacked(st, second), budget_stops=False) if second else None  # 2: stacked
    if stacked is not None:
        ranked = rank(ranked + stacked)
    assert st.first is not None
    return TrialResult(_trials(st, ranked, t_start), st.first, st.budget_ended)  # 3: the decision


# --- judging --------------------------------------------------------------------------------------


def _output_check(st: _State, name: str) -> OutputCheck:
    base_fp = st.checks[BASELINE].fingerprints if BASELINE in st.checks else None
    eager_fp = st.eager.fingerprints if st.eager is not None else None
    return output_check(st.checks.get(name), base_fp, eager_fp, st.deterministic,
                        unknown_text(st.second, st.stopped_text()))


def _judged(st: _State, drafts: list[Draft]) -> list[Candidate]:
    """Round 1's candidates with their verdicts; those without runs say why."""
    tc = time.perf_counter_ns()
    checks = {d.name: _output_check(st, d.name) for d in drafts}
    st.compare_ns += time.perf_counter_ns() - tc
    for d in drafts:
        if d.name not in st.runs and not st.over(d.name):
            st.not_tried[d.name] = {"interrupted": "interrupted",
                                    "budget": "over the budget: the budget ended before its runs"}.get(
                st.stopped or "", "not reached")
    st.targets = {d.name: t for d in drafts if (t := target_of(d, st.first, st.runs[BASELINE])) is not None}
    return [_candidate(st, d, st.runs[BASELINE], checks[d.name]) for d in drafts]


def _second_drafts(st: _State, ranked: list[Candidate]) -> list[Draft]:
    """The winners stacked as one candidate, and a candidate that failed alone retried with the
    one that removes what it failed from; as many as fit in the budget (the combined one dropped
    first, then the retries in order)."""
    second: list[Draft] = []
    combo = combine(ranked)
    if combo is not None:
        second.append(Draft(name="combined", spec=spec_from_words(combo), origin="combined",
                            targets="the recommended remedies together: " + ", ".join(combined_names(ranked, combo))))
    for x, y, flags in retries(ranked, st.runs[BASELINE]):
        second.append(Draft(name=f"{x.name}+{y.name}", spec=spec_from_words(flags), origin="retried",
                            targets=f"{x.name} again, with {y.name}, which removes the recompiles or fallbacks "
                            f"{x.name} hit alone"))
    again = int(st.second is None)  # the baseline's second check, where a stacked candidate differs
    repeat = st.spec.repeat
    while second and not st.budget.fits({"baseline-2": repeat, BASELINE: again,
                                         **{d.name: repeat + 1 for d in second}}):
        second.pop()
    return second


def _candidate(st: _State, d: Draft, base_runs: list[RunFigures], check: OutputCheck) -> Candidate:
    flags = [f for f in d.spec.flags()]
    runs = st.runs.get(d.name, [])
    cmd = reproduce_command(d.run_flags(), st.spec, d.name, st.extras.get(d.name))
    change = d.change or code_change_of(d) or (change_at(d.spec, st.sites) if flags else "(none: the script as it is)")
    guards = _guard_check(st, d)
    base = dict(name=d.name, flags=flags, origin=d.origin, targets=d.targets, target_cost_ns=d.cost_ns,
                code_change=change, command=cmd, start=d.start, env=dict(d.env), patch=d.patch, diff=d.diff,
                review=d.review, repetitions=len(runs), retried=st.retried.get(d.name, []),
                runs=runs, check=st.checks[d.name].figures if d.name in st.checks else None,
                unsafe=d.spec.unsafe(), guard_check=guards)
    if d.name in st.not_tried and not runs:
        return Candidate(**base, status="not tried", verdict="not tried",  # type: ignore[arg-type]
                         reason=st.not_tried[d.name])
    if d.name in st.failed:
        return Candidate(**base, status="failed", verdict="failed",  # type: ignore[arg-type]
                         reason=st.failed[d.name], outputs=check)
    ms = metrics_of(runs, base_runs[: len(runs)])
    pr = paired(runs, base_runs[: len(runs)])
    total_m = next(m for m in ms if m.name == "total")
    verdict = overall(pr.verdict, total_m.verdict)
    broke, adds, reached = compile_changes(runs, base_runs)
    if guards is not None and guards.broke is not None:
        broke = [*broke, guards.broke]
    missing, only_marks = unmatched(flags, runs)
    reason = None
    if missing and only_marks and len(missing) * 2 == len(flags):
        verdict, reason = "no effect", "the mark matched no source"
    elif missing:
        reason = "--mark-dynamic " + ", ".join(missing) + " matched no source"
    marks = [v for f, v in zip(flags[::2], flags[1::2], strict=False) if f == "--mark-dynamic"]
    kept = kept_target(st.targets.get(d.name), runs, base_runs, marks)
    if kept is not None and verdict != "no effect":
        verdict, reason = "did not remove its target", kept
    if check.status == "changes outputs":
        verdict = "changes outputs"
    elif check.status == "failed":
        verdict, reason = "failed", check.detail
    note = None
    if "noisy" in (pr.verdict, total_m.verdict, verdict):
        note = noise_text(pr.worst_noise, pr.noise if pr.noise is not None else total_m.baseline_spread,
                          loadmod.busy(runs + base_runs), loadmod.measured(runs + base_runs), total_m,
                          steady_only=total_m.verdict != "noisy" and verdict != "noisy")
    if d.name in st.short and verdict in ("noisy", "no measurable change"):
        more = (f"undecided after {len(runs)} repetitions: one more round needed about "
                f"{st.short[d.name]:.0f} s beyond the budget")
        note = f"{note}; {more}" if note else more
    return Candidate(**base, metrics=ms, steady_verdict=pr.verdict, total_verdict=total_m.verdict,  # type: ignore[arg-type]
                     verdict=verdict, outputs=check, reason=reason, paired=pr, broke=broke, adds=adds, reached=reached,
                     noise_note=note)


def _guard_check(st: _State, d: Draft) -> GuardCheck | None:
    """An unsafe candidate's check run against the baseline's (:mod:`.guard_check`); None for a safe one."""
    if not d.spec.unsafe():
        return None
    cand = st.checks.get(d.name)
    if cand is None:
        return GuardCheck(status="could not check", detail="its check run did not run")
    base = st.checks.get(BASELINE)
    return guard_check(base.fingerprints if base is not None else None, cand.fingerprints, cand.figures.error,
                       st.deterministic)


def _trials(st: _State, ranked: list[Candidate], t_start: int) -> Trials:
    """Round 3: the baseline's own row, each candidate's trade, the choice, its prose, the trial's cost."""
    spec = st.spec
    baseline = Draft(name=BASELINE, spec=RemedySpec(), origin=BASELINE, targets="the script as it is") \
        if st.split is None else Draft(name=BASELINE, spec=spec_from_words(EAGER), origin=BASELINE,
                                       targets="the script as it is, run eagerly: compiled, it fails")
    eager_fp = st.eager.fingerprints if st.eager is not None else None
    base_cand = _candidate(st, baseline, st.runs[BASELINE], baseline_check(
        st.checks.get(BASELINE), st.second, eager_fp, st.deterministic, st.checks, st.stopped_text()))
    base_cand = msgspec.structs.replace(base_cand, verdict="no measurable change", rank=0)
    ranked = [msgspec.structs.replace(c, trade=trade_text(c, base_cand))
              if c.runs and c.verdict != "did not remove its target" else c for c in ranked]
    chosen = choose_best(ranked)
    decision, trigger = decision_text(chosen, ranked, base_cand, st.deterministic)
    if st.split is not None:
        chosen, decision, trigger = split_decision(ranked, chosen, decision, trigger)
    timed = [r for rs in st.runs.values() for r in rs]
    checked = [oc.figures for oc in st.checks.values()] + st.baseline_check_runs
    script_ns = sum(r.script_ns or 0 for r in timed)
    fp_ns = sum(oc.fingerprints.fingerprint_ns for oc in st.checks.values() if oc.fingerprints is not None)
    process_ns = sum(r.process_ns for r in timed)
    own = (process_ns - script_ns) + fp_ns + st.compare_ns
    overhead = Overhead(trial_ns=time.perf_counter_ns() - t_start, timed_process_ns=process_ns,
                        timed_script_ns=script_ns, check_process_ns=sum(r.process_ns for r in checked),
                        fingerprint_ns=fp_ns, compare_ns=st.compare_ns,
                        own_share=own / script_ns if script_ns else None)
    return Trials(script=spec.script, args=list(spec.args), seed=spec.seed, repeat=spec.repeat,
                  tolerance=fpmod.tolerance_text(), deterministic=st.deterministic, baseline=base_cand,
                  candidates=ranked, chosen=chosen.name if chosen else None, decision=decision,
                  rollback_trigger=trigger, interrupted=st.stopped == "interrupted", overhead=overhead,
                  max_repeat=spec.most, folded=st.folded)


def reproduce_command(flags: list[str], spec: TrialSpec, name: str, extra: RunExtra | None = None) -> str:
    """The command line of one timed run as it ran: the same flags and seed, its own empty
    inductor cache or the warm one it read, its environment (``--quiet --no-html`` and the
    timing record left out)."""
    words = run_command([*(extra.args if extra else []), *flags], spec,
                        os.path.join(spec.out, "trials", name, "rep-1"))
    return env_prefix(extra) + shell_join(words)


def more_dims(drafts: list[Draft], runs: dict[str, list[RunFigures]]) -> list[Draft]:
    """For a mark candidate whose first run still recompiled on another dimension of a source it
    marks (a guard names only the first dimension that changed: height, then width), one more
    candidate that marks them all."""
    out = []
    names = {d.name for d in drafts}
    for d in drafts:
        if not d.spec.mark_dynamic or not runs.get(d.name) or not runs[d.name][0].ok:
            continue
        marked = set(d.spec.mark_dynamic)
        bases = {m.rpartition(":")[0] for m in marked}

        extra = sorted({family(s) or s for g in runs[d.name][0].size_guards if (s := source_of_guard(g)) is not None
                        and _covered(s.rpartition(":")[0], bases)} - marked)
        if not extra or f"{d.name}-all" in names:
            continue
        spec = msgspec.structs.replace(d.spec, mark_dynamic=tuple(sorted(marked | set(extra))))
        out.append(Draft(name=f"{d.name}-all", spec=spec, origin=d.origin, cost_ns=d.cost_ns,
                         targets=f"{d.targets} (its run still recompiled on {', '.join(extra)})"))
    return out


def _covered(base: str, bases: set[str]) -> bool:
    """A marked source, or a member of a marked family (a regex, ``...\\Z``)."""
    return base in bases or any(b.endswith("\\Z") and re.match(b, base) is not None for b in bases)


def _workload_trace(spec: TrialSpec) -> tuple[list[int] | None, bool]:
    """(the length trace, whether the target is a workload ``FILE.py:FUNC``)."""
    from ..workload import is_workload_spec

    if not is_workload_spec(spec.script):
        return None, False
    from ..workload_run import parse_args, trace_lengths

    return trace_lengths(parse_args([spec.script, *spec.args])), True


def top_receipt(trials: Trials, out: str) -> Receipt | None:
    """The receipt ``try`` puts at the top of ``out``: the chosen candidate's first run that wrote one
    (else the baseline's), its decision record the trial's (the change, the note, when to undo it,
    the output tolerance), hashed again; None when no such run wrote a receipt."""
    from ...analyze.receipt import rehash
    from ...ingest.receipt import load_receipt
    from ...model.receipt import Decision

    chosen = next((c for c in trials.candidates if c.name == trials.chosen), None)
    source = chosen or trials.baseline
    run = next((r for r in source.runs if r.ok and r.receipt), None)
    if run is None or run.receipt is None:
        return None
    receipt = load_receipt(os.path.join(out, run.receipt))
    decision = msgspec.structs.replace(
        receipt.decision or Decision(),
        intervention=(f"{chosen.code_change} (seamscope try: {chosen.name}; {chosen.command})"
                      if chosen is not None else None),
        note=trials.decision,
        rollback_trigger=trials.rollback_trigger,
        tolerance=trials.tolerance,
    )
    return rehash(msgspec.structs.replace(receipt, decision=decision))


def change_at(spec: RemedySpec, sites: list[str]) -> str:
    """The code change (a stacked spec's every part), placed at the script's ``torch.compile`` call where
    its source shows one: options alone passed to it, a setting before it, regional compilation in its place."""
    text = code_change(spec)
    if not sites or spec.disable or spec.pad is not None or spec.skip_guard_eval_after is not None:
        return text
    if spec.guard_filter is not None and spec == RemedySpec(guard_filter=spec.guard_filter):
        return (f"pass options={{'guard_filter_fn': torch.compiler.{spec.guard_filter}}} to torch.compile at "
                f"{', '.join(sites[:3])} (unsafe: drops guards)")
    where = ", ".join(sites[:3])
    if spec.compile_option and spec == RemedySpec(compile_option=spec.compile_option):
        vals = ", ".join(f"{k}={v!r}" for k, v in (compile_override(o) for o in spec.compile_option))
        return f"pass {vals} to torch.compile at {where}"
    if spec.regional:  # the blocks' compile calls replace the whole model's
        return f"{text} (in place of the torch.compile call at {where})"
    return f"{text} (before the torch.compile call at {where})"
