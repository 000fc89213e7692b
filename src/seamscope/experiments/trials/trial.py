"""Remedy trials: the baseline and one candidate per applicable remedy, each run in a fresh process.

The order of work: a baseline run (its findings choose the candidates), then the timed
repetitions interleaved (baseline, A, B, baseline, A, B...) so that the machine's drift hits all
alike, then the output checks (the baseline, an eager run, each candidate once, and the baseline
again only where a candidate's outputs differ from its first: :mod:`.outputs`), each in a run of
its own outside the timed repetitions, then a combined candidate of the best remedies that do not
conflict, measured against a baseline interleaved with it.

A mark candidate whose first run still recompiles on another dimension of a source it marks gets
a follow-up candidate that marks them all. Under ``--budget`` a candidate starts only when its
runs fit, by measured run times. The arithmetic is torch-free and tested on fakes: the catalogue
in :mod:`.catalogue`, verdicts, pairing and ranking in :mod:`.verdicts`.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from dataclasses import dataclass, field

import msgspec

from ...analyze.units import fmt_ns
from ...errors import UnusableInput
from ...model.receipt import Receipt
from ...model.trials import (
    Candidate,
    Metric,
    OutputCheck,
    Overhead,
    RunFigures,
    Trials,
    Verdict,
    group_text,
)
from ..remedy_spec import RemedySpec, code_change, compile_override, spec_from_words
from . import fingerprint as fpmod
from . import load as loadmod
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
    Draft,
    catalogue,
    choose,
    compile_sites,
    family,
    only_matched_nothing,
    schedule,
    source_of_guard,
    unique_names,
)
from .outputs import baseline_check, differing, output_check, unknown_text
from .patches import attach as attach_patches
from .rewrites import rewrites
from .runs import BudgetSpent, Outcome, Setup, run_command, run_once, shell_join
from .split import EAGER, BaselineFailed, first_split, split_decision
from .verdicts import (
    choose_best,
    combine,
    compile_changes,
    metrics_of,
    overall,
    paired,
    rank,
    recommendable,
    retries,
    unmatched,
    wants_more,
)

# --- the trial ------------------------------------------------------------------------------------


@dataclass
class _State:
    setup: Setup
    drafts: list[Draft]
    runs: dict[str, list[RunFigures]] = field(default_factory=dict)
    checks: dict[str, Outcome] = field(default_factory=dict)
    not_tried: dict[str, str] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    started: float = 0.0
    run_s: list[float] = field(default_factory=list)
    times: dict[str, list[float]] = field(default_factory=dict)
    """Seconds each name's timed runs took (the budget's schedule)."""
    sites: list[str] = field(default_factory=list)
    """``FILE:LINE`` of the script's ``torch.compile`` calls (where a code change goes)."""
    compare_ns: int = 0
    baseline_check_runs: list[RunFigures] = field(default_factory=list)
    second: Outcome | None = None
    """The baseline's second check run, made only when a candidate's outputs differ from its first."""
    deterministic: bool | None = None
    extras: dict[str, RunExtra] = field(default_factory=dict)
    """How a candidate's processes start, where that is the remedy (:mod:`.cache`)."""
    short: dict[str, float] = field(default_factory=dict)
    """Undecided candidates the budget stopped: seconds one more round would have needed."""


def _progress(st: _State, text: str, remaining_runs: int) -> None:
    if st.setup.progress is None:
        return
    eta = ""
    if st.run_s:
        secs = statistics.median(st.run_s) * remaining_runs
        eta = f" · ETA {int(secs // 60)}m{int(secs % 60):02d}s"
    st.setup.progress(f"{text}{eta}")


def _timed(st: _State, names: list[tuple[str, list[str]]], reps: list[int], total_runs: int, done: list[int],
           keys: dict[str, str] | None = None) -> None:
    """Interleaved repetitions: for each repetition every candidate once, in order (the baseline
    first). ``reps``: the repetition numbers (each run's folder is ``trials/NAME/rep-K``);
    ``keys``: where a name's figures are kept, when not under its own name. Under ``--budget`` a
    candidate starts only when the runs still owed (see :func:`seconds_needed`) fit in what is
    left; later repetitions stop at the budget (those done are kept)."""
    keys = keys or {}
    for rep in reps:
        for name, flags in names:
            key = keys.get(name, name)
            if name in st.failed or name in st.not_tried:
                continue
            budget = st.setup.budget_s
            if budget is not None and name != "baseline":
                elapsed = st.setup.clock() - st.started
                if not st.runs.get(key):
                    need = seconds_needed(st, name)
                    if elapsed + need > budget:
                        left = max(0.0, budget - elapsed)
                        st.not_tried[name] = (f"over the budget: its runs and those still owed need about "
                                              f"{need:.0f} s, {left:.0f} s were left; about "
                                              f"{need - left:.0f} s more --budget would try it")
                        continue
                elif elapsed > budget:
                    continue  # the repetitions done so far are kept
            _progress(st, f"{name} · repetition {rep} · run {done[0] + 1}/{total_runs}", total_runs - done[0])
            t0 = st.setup.clock()
            oc = run_once(st.setup, flags, os.path.join("trials", name, f"rep-{rep}"), f"rep-{rep}",
                          extra=st.extras.get(name))
            took = st.setup.clock() - t0
            st.run_s.append(took)
            st.times.setdefault(key, []).append(took)
            done[0] += 1
            fig = msgspec.structs.replace(oc.figures, load_avg=loadmod.load_average(), cpus=loadmod.cpus())
            st.runs.setdefault(key, []).append(fig)
            if not oc.figures.ok:
                if name == "baseline":
                    raise BaselineFailed(oc.figures.error or "the baseline failed", oc.stderr)
                st.failed[name] = oc.figures.error or "failed"


def _adaptive(st: _State, drafts: list[Draft], base_key: str, total_runs: int, done: list[int],
              next_rep: int | None = None) -> int:
    """More repetitions, interleaved with the baseline's, for the candidates still undecided that
    could win (:func:`.verdicts.wants_more`), one round at a time, until each is decided,
    ``max_repeat`` is reached or the next round does not fit in the budget. Returns the runs planned."""
    setup = st.setup
    most = max(setup.repeat, setup.max_repeat or setup.repeat)
    rep = next_rep or len(st.runs.get(base_key, [])) + 1
    while True:
        base = st.runs.get(base_key, [])
        more = [d for d in drafts if d.name not in st.failed and d.name not in st.not_tried
                and 0 < len(st.runs.get(d.name, [])) < most and len(st.runs[d.name]) <= len(base)
                and wants_more(st.runs[d.name], base[: len(st.runs[d.name])])]
        if not more:
            return total_runs
        if setup.budget_s is not None:
            typical = statistics.median(st.run_s[1:]) if len(st.run_s) > 1 else first_run_estimate(st)
            owed = (3 + len(drafts)) * typical if base_key == "baseline" else typical
            if setup.clock() - st.started + (1 + len(more)) * typical + owed > setup.budget_s:
                for d in more:
                    st.short[d.name] = (1 + len(more)) * typical
                return total_runs
        total_runs += 1 + len(more)
        pair: list[tuple[str, list[str]]] = [("baseline", [])] + [(d.name, d.run_flags()) for d in more]
        _timed(st, pair, [rep], total_runs, done, keys={"baseline": base_key})
        rep += 1


def seconds_needed(st: _State, admitting: str) -> float:
    """Seconds of runs the trial still owes if ``admitting`` starts now, from the measured run
    times: the baseline's missing repetitions and its three output runs (the second check counted
    though it runs only where a candidate's outputs differ), each started
    candidate's missing repetitions and output run (at its own median), and the new candidate's
    repetitions and output run (at the baseline's median, its own being unknown). The first run
    is left out of the medians once there are others (it also started the fork server)."""
    # the very first run also waited for the fork server to import torch: later runs say more
    typical = statistics.median(st.run_s[1:]) if len(st.run_s) > 1 else first_run_estimate(st)
    own = st.times.get("baseline", [])
    base = statistics.median(own[1:]) if len(own) > 1 else typical
    need = (max(0, st.setup.repeat - len(st.runs.get("baseline", []))) + 3) * base
    for name, times in st.times.items():
        if name in ("baseline", admitting) or name in st.failed or name.startswith("baseline-"):
            continue
        need += (max(0, st.setup.repeat - len(st.runs.get(name, []))) + 1) * statistics.median(times)
    return need + (st.setup.repeat + 1) * base


START_S = 0.5
"""Seconds a run spends starting and writing its receipt once the fork server is up (a generous
bound of what the trials' overhead benchmark measures: 0.09-0.45 s)."""


def first_run_estimate(st: _State) -> float:
    """What a run takes, from the first one alone: its script's own time plus a start, not its
    process time (which also waited for the fork server to import torch)."""
    first = (st.run_s or [0.0])[0]
    runs = st.runs.get("baseline") or []
    fig = runs[0] if runs else None
    if fig is None or fig.script_ns is None:
        return first
    return min(first, fig.script_ns / 1e9 + START_S)


def _check(st: _State, name: str, flags: list[str], rel: str) -> Outcome:
    oc = run_once(st.setup, flags, os.path.join("trials", rel), "check", fingerprint=True, extra=st.extras.get(name))
    st.checks[name] = oc
    return oc


def _second_check(st: _State, total_runs: int, done: list[int]) -> int:
    """The baseline's second check run, once, when a candidate's outputs differ from its first
    (whether the baseline is deterministic decides only then). Returns the runs planned."""
    tc = time.perf_counter_ns()
    differ = st.second is None and differing(st.checks.get("baseline"), st.checks)
    st.compare_ns += time.perf_counter_ns() - tc
    if not differ:
        return total_runs
    total_runs += 1
    _progress(st, "outputs · baseline again (a candidate's outputs differ from its first run)", total_runs - done[0])
    st.second = run_once(st.setup, [], os.path.join("trials", "baseline", "check-2"), "check-2", fingerprint=True)
    st.baseline_check_runs.append(st.second.figures)
    done[0] += 1
    tc = time.perf_counter_ns()
    b1, b2 = st.checks["baseline"].fingerprints, st.second.fingerprints
    if b1 is not None and b2 is not None:
        st.deterministic = fpmod.compare(b1, b2).equal
    st.compare_ns += time.perf_counter_ns() - tc
    return total_runs


def _candidate(st: _State, d: Draft, base_runs: list[RunFigures], check: OutputCheck) -> Candidate:
    flags = [f for f in d.spec.flags()]
    runs = st.runs.get(d.name, [])
    cmd = reproduce_command(d.run_flags(), st.setup, d.name, st.extras.get(d.name))
    change = d.change or code_change_of(d) or (change_at(d.spec, st.sites) if flags else "(none: the script as it is)")
    base = dict(name=d.name, flags=flags, origin=d.origin, targets=d.targets, target_cost_ns=d.cost_ns,
                code_change=change, command=cmd, start=d.start, env=dict(d.env), patch=d.patch, diff=d.diff,
                review=d.review, repetitions=len(runs),
                runs=runs, check=st.checks[d.name].figures if d.name in st.checks else None)
    if d.name in st.not_tried and not runs:
        return Candidate(**base, status="not tried", verdict="not tried",  # type: ignore[arg-type]
                         reason=st.not_tried[d.name])
    if d.name in st.failed:
        return Candidate(**base, status="failed", verdict="failed",  # type: ignore[arg-type]
                         reason=st.failed[d.name], outputs=check)
    ms = metrics_of(runs, base_runs[: len(runs)])
    pr = paired(runs, base_runs[: len(runs)])
    steady = pr.verdict
    total_m = next(m for m in ms if m.name == "total")
    total = total_m.verdict
    verdict: Verdict = overall(steady, total)
    broke, adds = compile_changes(runs, base_runs)
    missing, only_marks = unmatched(flags, runs)
    reason = None
    if missing and only_marks and len(missing) * 2 == len(flags):
        verdict, reason = "no effect", "the mark matched no source"
    elif missing:
        reason = "--mark-dynamic " + ", ".join(missing) + " matched no source"
    if check.status == "changes outputs":
        verdict = "changes outputs"
    elif check.status == "failed":
        verdict, reason = "failed", check.detail
    note = None
    if "noisy" in (steady, total, verdict):
        note = noise_text(pr.worst_noise, pr.noise if pr.noise is not None else total_m.baseline_spread,
                          loadmod.busy(runs + base_runs), loadmod.measured(runs + base_runs), total_m,
                          steady_only=total != "noisy" and verdict != "noisy")
    if d.name in st.short and verdict in ("noisy", "no measurable change"):
        more = (f"undecided after {len(runs)} repetitions: one more round needed about "
                f"{st.short[d.name]:.0f} s beyond the budget")
        note = f"{note}; {more}" if note else more
    return Candidate(**base, metrics=ms, steady_verdict=steady, total_verdict=total,  # type: ignore[arg-type]
                     verdict=verdict, outputs=check, reason=reason, paired=pr, broke=broke, adds=adds, noise_note=note)


def combined_names(ranked: list[Candidate], combo: list[str]) -> list[str]:
    """The candidates the combined one is made of: those recommendable whose every flag is in it
    (a winner left out for a conflict, a second shape policy, is not named)."""
    taken = set(zip(combo[::2], combo[1::2], strict=True))
    return [c.name for c in ranked if recommendable(c) and c.flags
            and set(zip(c.flags[::2], c.flags[1::2], strict=True)) <= taken]


def noise_text(worst: float | None, typical: float | None, busy: str | None = None, measured: str = "",
               total: Metric | None = None, steady_only: bool = False) -> str:
    """One line on why timings could not decide: how much the runs varied, the interval where
    there is one, and "the machine is busy" only when load was measured (``busy``). With
    ``steady_only`` the total decided the row and only the steady calls could not tell."""
    if steady_only:
        head = noise_text(worst, typical)
        tail = (f"; the total's interval {total.ci_low:.2f}–{total.ci_high:.2f}× decides the row"
                if total is not None and total.ci_low is not None and total.ci_high is not None else "")
        return f"the steady calls alone cannot tell: {head}{tail}"
    if worst is not None and typical is not None:
        text = f"the same call varied {worst:.3g}× between repetitions (typically {typical:.0%})"
    elif typical is not None:
        text = f"the same call varied typically {typical:.0%} between repetitions"
    else:
        text = "the timings varied between repetitions"
    if total is not None and total.ci_low is not None and total.ci_high is not None:
        text += f"; the total's interval {total.ci_low:.2f}–{total.ci_high:.2f}× is too wide to tell"
    if busy is not None:
        return text + f": the machine is busy ({busy}); rerun with more --repeat or on a quiet machine"
    return text + (f" ({measured}: not from load); more repetitions narrow the interval" if measured else "")


def reproduce_command(flags: list[str], setup: Setup, name: str, extra: RunExtra | None = None) -> str:
    """The command line of one timed run as it ran: the same flags and seed, its own empty
    inductor cache or the warm one it read, its environment (``--quiet --no-html`` and the
    timing record left out)."""
    words = run_command([*(extra.args if extra else []), *flags], setup,
                        os.path.join(setup.out, "trials", name, "rep-1"))
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


def _workload_trace(setup: Setup) -> tuple[list[int] | None, bool]:
    """(the length trace, whether the target is a workload ``FILE.py:FUNC``)."""
    from ..workload import is_workload_spec

    if not is_workload_spec(setup.script):
        return None, False
    from ..workload_run import parse_args, trace_lengths

    return trace_lengths(parse_args([setup.script, *setup.args])), True


def run_trials(setup: Setup, extra: list[RemedySpec], only: list[str], skip: list[str]) -> tuple[Trials, Receipt]:
    """The whole trial. Raises :class:`BaselineFailed` (nothing else run) when the script fails."""
    t_start = time.perf_counter_ns()
    st = _State(setup=setup, drafts=[], started=setup.clock())
    if setup.progress:
        setup.progress("baseline · first run (its findings choose the candidates)")
    t0 = setup.clock()
    # it also fills the cache directory (and saves the cache artifacts) a warm-start candidate reads
    first = run_once(setup, [], os.path.join("trials", "baseline", "rep-1"), "rep-1", extra=prime_extra(setup.out))
    st.run_s.append(setup.clock() - t0)
    split: Draft | None = None
    if not first.figures.ok or first.receipt is None:
        drop_warm(setup.out)
        if first.figures.exit_code != 1 or ".py:" in setup.script:  # a hang or a crash; a workload: no patch
            raise BaselineFailed(first.figures.error or "the baseline failed", first.stderr)
        split = first_split(setup, first)  # raises where the program fails eagerly too
        setup.baseline_flags = list(EAGER)  # the baseline is what works today: the script run eagerly
        t0 = setup.clock()
        first = run_once(setup, [], os.path.join("trials", "baseline", "rep-1"), "rep-1")
        st.run_s[0] = setup.clock() - t0
        if not first.figures.ok or first.receipt is None:
            raise BaselineFailed(first.figures.error or "the baseline failed eagerly", first.stderr)
    st.runs["baseline"] = [first.figures]
    st.times["baseline"] = [st.run_s[0]]
    st.sites = compile_sites(setup.script)
    folded: list[str] = []
    if split is not None:  # the compiled run fails: a working compiled run first, before any speed
        found = [split]
        folded.append(f"none: the compiled baseline fails ({split.targets}): its findings are not known; the "
                      f"baseline is the script run eagerly ({' '.join(EAGER)})")
    else:
        found = catalogue(first.receipt, *_workload_trace(setup), script=setup.script, folded=folded)
        changes = rewrites(first.receipt, setup.script)  # code changes no flag makes (:mod:`.rewrites`)
        for d in changes:  # a cause no flag removes may have a code change that does: say so where it is folded
            folded[:] = [f"{ln}; the code change {d.name} is tried for it" if ln.startswith(f"none: {d.origin} ")
                         else ln for ln in folded]
        found += changes
        found += start_drafts(first.receipt, folded, artifacts_file=warm_paths(setup.out)[1],
                              env={**os.environ, **setup.env})
    drafts = schedule(choose(found, only, skip))
    for i, spec in enumerate(extra, 1):
        drafts.append(Draft(name=f"user-{i}", spec=spec, origin="user", targets="given with --candidate"))
    drafts = unique_names(drafts)
    if only and not drafts:
        drop_warm(setup.out)
        raise UnusableInput(only_matched_nothing(found, only))
    attach_patches(drafts, setup.out, setup.script, first.receipt, folded)  # each run applies its patch
    st.drafts = drafts
    st.extras = {d.name: e for d in drafts if (e := extra_for(d, setup.out)) is not None}
    if not any(d.start for d in drafts):
        drop_warm(setup.out)  # no candidate reads it
    baseline = Draft(name="baseline", spec=RemedySpec(), origin="baseline", targets="the script as it is") \
        if split is None else Draft(name="baseline", spec=spec_from_words(EAGER), origin="baseline",
                                    targets="the script as it is, run eagerly: compiled, it fails")
    order: list[tuple[str, list[str]]] = [("baseline", [])] + [(d.name, d.run_flags()) for d in drafts]
    total_runs = len(order) * setup.repeat + 2 + len(drafts)  # the baseline's second check added where needed
    done = [1]
    trials_interrupted = budget_ended = False
    eager: Outcome | None = None
    try:
        # repetition 1 of the baseline is the run above; the others run interleaved
        _timed(st, order[1:], [1], total_runs, done)
        for d in more_dims(drafts, st.runs):  # a mark that left other dimensions changing
            attach_patches([d], setup.out, setup.script, first.receipt)
            drafts.append(d)
            order.append((d.name, d.run_flags()))
            total_runs += setup.repeat + 1
            _timed(st, [(d.name, d.run_flags())], [1], total_runs, done)
        if setup.repeat > 1:
            _timed(st, order, list(range(2, setup.repeat + 1)), total_runs, done)
        total_runs = _adaptive(st, drafts, "baseline", total_runs, done)
        # outputs, outside the timed repetitions
        _progress(st, "outputs · baseline and eager", total_runs - done[0])
        _check(st, "baseline", [], "baseline/check-1")
        eager = run_once(setup, ["--stance", "force_eager"], os.path.join("trials", "eager", "check"), "check",
                         fingerprint=True)
        st.baseline_check_runs = [eager.figures]
        done[0] += 2
        for d in drafts:
            if d.name in st.failed or d.name in st.not_tried:
                continue
            _progress(st, f"outputs · {d.name}", total_runs - done[0])
            _check(st, d.name, d.run_flags(), f"{d.name}/check")
            done[0] += 1
        total_runs = _second_check(st, total_runs, done)
    except KeyboardInterrupt:
        trials_interrupted = True
    except BudgetSpent:  # a run outlasted the budget (a hang): the trial ends with what it measured
        budget_ended = True
    base_fp = st.checks["baseline"].fingerprints if "baseline" in st.checks else None
    eager_fp = eager.fingerprints if eager is not None else None
    stopped = "interrupted" if trials_interrupted else "the budget ended before it"
    tc = time.perf_counter_ns()
    unknown = unknown_text(st.second, stopped)
    checks = {d.name: output_check(st.checks.get(d.name), base_fp, eager_fp, st.deterministic, unknown)
              for d in drafts}
    st.compare_ns += time.perf_counter_ns() - tc
    for d in drafts:
        if d.name not in st.runs and d.name not in st.not_tried and d.name not in st.failed:
            st.not_tried[d.name] = (
                "interrupted"
                if trials_interrupted
                else "over the budget: the budget ended before its runs"
                if budget_ended
                else "not reached"
            )
    base_runs = st.runs["baseline"]
    cands = [_candidate(st, d, base_runs, checks[d.name]) for d in drafts]
    ranked = rank(cands)
    # a second round against a baseline of its own: the winners stacked as one candidate, and a
    # candidate that failed alone retried with the one that removes what it failed from
    second: list[Draft] = []
    combo = None if trials_interrupted or budget_ended else combine(ranked)
    if combo is not None:
        second.append(Draft(name="combined", spec=spec_from_words(combo), origin="combined",
                            targets="the recommended remedies together: " + ", ".join(combined_names(ranked, combo))))
    if not trials_interrupted and not budget_ended:
        base_figs = st.runs["baseline"]
        for x, y, flags in retries(ranked, base_figs):
            second.append(Draft(name=f"{x.name}+{y.name}", spec=spec_from_words(flags), origin="retried",
                                targets=f"{x.name} again, with {y.name}, which removes the recompiles or fallbacks "
                                f"{x.name} hit alone"))
    if second and setup.budget_s is not None:
        room = setup.budget_s - (setup.clock() - st.started)
        again = int(st.second is None)  # the baseline's second check, where a stacked candidate differs
        while second and statistics.median(st.run_s) * ((1 + len(second)) * setup.repeat + len(second) + again) > room:
            second.pop()  # the combined candidate first, then the retries in order
    if second:
        attach_patches(second, setup.out, setup.script, first.receipt)  # stacked: one composed patch
        st.drafts += second
        try:
            pair: list[tuple[str, list[str]]] = [("baseline", [])] + [(d.name, d.run_flags()) for d in second]
            first_rep = len(st.runs["baseline"]) + 1  # after the repetitions the singles had
            reps = list(range(first_rep, first_rep + setup.repeat))
            total_runs += (1 + len(second)) * setup.repeat + len(second)
            _timed(st, pair, reps, total_runs, done, keys={"baseline": "baseline-2"})
            _adaptive(st, second, "baseline-2", total_runs, done, first_rep + setup.repeat)
            to_check = [d for d in second if d.name not in st.failed and st.runs.get(d.name)]
            for d in to_check:
                _progress(st, f"outputs · {d.name}", total_runs - done[0])
                _check(st, d.name, d.run_flags(), f"{d.name}/check")
                done[0] += 1
            total_runs = _second_check(st, total_runs, done)  # where only a stacked candidate differs
            names = {d.name for d in to_check}
            tc = time.perf_counter_ns()
            extra_cands = [_candidate(st, d, st.runs.get("baseline-2", []),
                                      output_check(st.checks[d.name], base_fp, eager_fp, st.deterministic,
                                                   unknown_text(st.second, stopped))
                                      if d.name in names else OutputCheck(status="not checked")) for d in second]
            st.compare_ns += time.perf_counter_ns() - tc
            ranked = rank(ranked + extra_cands)
        except KeyboardInterrupt:
            trials_interrupted = True
        except BudgetSpent:
            pass  # the combined candidate is left without its runs, as one the budget left out
    stopped = "interrupted" if trials_interrupted else "the budget ended before it"
    base_cand = _candidate(st, baseline, base_runs, baseline_check(st.checks.get("baseline"), st.second, eager_fp,
                                                                   st.deterministic, st.checks, stopped))
    base_cand = msgspec.structs.replace(base_cand, verdict="no measurable change", rank=0)
    ranked = [msgspec.structs.replace(c, trade=trade_text(c, base_cand)) if c.runs else c for c in ranked]
    chosen = choose_best(ranked)
    decision, trigger = _decision(chosen, ranked, base_cand, st.deterministic)
    if split is not None:
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
    trials = Trials(script=setup.script, args=list(setup.args), seed=setup.seed, repeat=setup.repeat,
                    tolerance=fpmod.tolerance_text(), deterministic=st.deterministic, baseline=base_cand,
                    candidates=ranked, chosen=chosen.name if chosen else None, decision=decision,
                    rollback_trigger=trigger, interrupted=trials_interrupted, overhead=overhead,
                    max_repeat=max(setup.repeat, setup.max_repeat or setup.repeat),
                    folded=folded)
    return trials, first.receipt


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


def _ratio_text(c: Candidate, name: str) -> str:
    m = next((m for m in c.metrics if m.name == name and m.ratio_median is not None), None)
    if m is None:
        return "n/a"
    return f"{m.ratio_median:.3f}× ({m.verdict}; noise {m.baseline_spread or 0:.1%})"


def paired_text(c: Candidate) -> str:
    """``0.91× over 3 calls steady in both (0.85–0.97)``, or why there is none."""
    p = c.paired
    if p is None or p.ratio_median is None:
        return "no call steady in both"
    spread = f", {p.ratio_low:.2f}–{p.ratio_high:.2f}" if p.calls > 1 and p.ratio_low is not None else ""
    return f"{p.ratio_median:.3f}× over {p.calls} call(s) steady in both (minimum per call{spread})"


def change_at(spec: RemedySpec, sites: list[str]) -> str:
    """The code change, placed at the script's ``torch.compile`` call where its source shows one:
    ``pass dynamic=True to torch.compile at model.py:12``; a setting goes before that call."""
    text = code_change(spec)
    if not sites or spec.disable or spec.pad is not None:
        return text
    where = ", ".join(sites[:3])
    if spec.compile_option and not (spec.dynamo_config or spec.mark_dynamic or spec.stance):
        vals = ", ".join(f"{k}={v!r}" for k, v in (compile_override(o) for o in spec.compile_option))
        return f"pass {vals} to torch.compile at {where}"
    return f"{text} (before the torch.compile call at {where})"


def _decision(chosen: Candidate | None, ranked: list[Candidate], base: Candidate,
              deterministic: bool | None) -> tuple[str, str | None]:
    if chosen is None:
        why = "no candidate was faster with its outputs unchanged and its compilation intact"
        if deterministic is False:
            why += " (the baseline is not deterministic, so outputs could not be compared)"
        for c in ranked:
            if c.broke and c.verdict == "faster":
                why += f"; {c.name} was faster but is not recommended: it breaks compilation ({c.broke[0]})"
        noisy = [c for c in ranked if c.verdict == "noisy"]
        if noisy:
            why += ("; the timings were noisy (" + (noisy[0].noise_note or "") + "); what stayed stable: "
                    + "; ".join(f"{c.name}: {stable_text(c)}" for c in noisy[:3]))
        return f"keep the script as it is: {why}", None
    patch = f" (the patch: {chosen.patch})" if chosen.patch else ""
    evidence = (f"{chosen.name}: {chosen.code_change}{patch}; total {_ratio_text(chosen, 'total')}, "
                f"compile {_ratio_text(chosen, 'compile')}, steady {paired_text(chosen)} ({chosen.steady_verdict}), "
                f"outputs {chosen.outputs.status}")
    if chosen.paired is not None and chosen.paired.unpaired:
        evidence += "; " + "; ".join(group_text(g) for g in chosen.paired.unpaired[:3])
    if chosen.origin in ("combined", "retried"):
        single = next((c for c in ranked if recommendable(c) and c.origin not in ("combined", "retried")), None)
        evidence += f"; stacked remedies ({chosen.targets})"
        if single is not None:
            evidence += (f", measured against a baseline of their own: total {_ratio_text(chosen, 'total')} against "
                         f"the best single one, {single.name}: {_ratio_text(single, 'total')}")
    if chosen.adds:
        evidence += "; it adds " + ", ".join(chosen.adds) + " (and beats every candidate that adds nothing)"
    if chosen.trade:
        evidence += "; the trade: " + chosen.trade
    elif chosen.steady_verdict == "slower":
        evidence += "; " + break_even(chosen, base)
    if chosen.noise_note:
        evidence += "; " + chosen.noise_note
    return evidence, rollback_trigger(chosen, base)


def rollback_trigger(chosen: Candidate, base: Candidate) -> str:
    """When to undo the chosen remedy, from its own figures: the slowest steady median and the
    most recompiles it had in any repetition of the trial (what it met every time). The
    baseline's steady median is over other calls (a remedy changes which calls are steady), so
    it is said beside the threshold, never used as it."""
    rec = next((m for m in chosen.metrics if m.name == "recompiles"), None)
    steady = next((m for m in chosen.metrics if m.name == "steady median"), None)
    parts = []
    if steady is not None and steady.max is not None:
        parts.append(f"if steady calls take longer than {fmt_ns(steady.max)} median per call (the slowest of this "
                     f"remedy's {chosen.repetitions or len(chosen.runs)} repetition(s); the baseline's: "
                     f"{fmt_ns(_median_of(base, 'steady median'))}, over the calls steady there)")
    parts.append(f"if recompiles exceed {int(rec.max) if rec and rec.max is not None else 0} per run")
    parts.append("or if outputs differ from eager beyond the tolerance")
    return "roll back " + ", ".join(parts)


def stable_text(c: Candidate) -> str:
    """The figures noise does not move: compile time (its ratio) and the counts."""
    parts = []
    comp = next((m for m in c.metrics if m.name == "compile" and m.ratio_median is not None), None)
    if comp is not None:
        parts.append(f"compile {comp.ratio_median:.2f}×")
    parts += c.adds
    for name in ("recompiles", "fallbacks", "breaks"):
        m = next((m for m in c.metrics if m.name == name and m.median is not None), None)
        if m is not None:
            parts.append(f"{name} {m.median:g}")
    return ", ".join(parts) or "nothing"


def break_even(chosen: Candidate, base: Candidate) -> str:
    """A remedy that saves compile time but makes steady calls slower pays off only up to some
    number of steady calls: the total time saved over the steady time lost per call, the loss
    from the paired comparison (calls steady in both), never from two medians over different calls."""
    saved = (_median_of(base, "total") or 0) - (_median_of(chosen, "total") or 0)
    p = chosen.paired
    lost = 0.0
    if p is not None and p.ratio_median is not None and p.baseline_ns is not None:
        lost = (p.ratio_median - 1.0) * p.baseline_ns
    if saved <= 0 or lost <= 0:
        return "steady calls are slower"
    return (f"steady calls are slower by {fmt_ns(lost)} each (paired over {p.calls if p else 0} calls): it pays "
            f"off for runs of up to about {int(saved / lost):,} more steady calls than this one")


def _median_of(c: Candidate, name: str) -> float | None:
    return next((m.median for m in c.metrics if m.name == name), None)
