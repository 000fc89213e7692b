"""Verdicts of a remedy trial (torch-free): figures over repetitions, the paired per-call
comparison of steady calls, the noise of the machine, what a candidate broke, the ranking.

Steady time is compared call by call, never as two medians over different calls: a remedy that
turns cold or fallback calls into steady ones changes which calls are steady, and the median of
the candidate's steady calls then holds work the baseline's does not. Only calls steady in both
(in every repetition) are paired; the others are reported as rows of their own.
"""

from __future__ import annotations

import statistics

import msgspec

from ...analyze.units import fmt_ns, fmt_variation
from ...model.trials import (
    CallGroup,
    CallTime,
    Candidate,
    Metric,
    MetricVerdict,
    Paired,
    RunFigures,
    Verdict,
    group_text,
)
from ..remedy_spec import parse_assignment
from . import stats

NOISE_LIMIT = 0.25
"""The same call varying by more than 25% between repetitions (the median over calls): the
timings cannot tell small effects apart, and a verdict the effect does not clear is ``noisy``."""
MIN_EFFECT = stats.MIN_EFFECT


def metric_verdict(ratios: list[float], baseline: list[float]) -> tuple[MetricVerdict, float | None, float | None]:
    """``faster``/``slower`` only when every repetition's ratio lies on the same side of 1 and the
    median ratio differs from 1 by more than the baseline's own spread between repetitions;
    ``noisy`` when it does not and that spread is beyond :data:`NOISE_LIMIT`.
    Returns (verdict, median ratio, baseline spread)."""
    if not ratios or not baseline or len(ratios) != len(baseline):
        return "n/a", None, None
    med = statistics.median(ratios)
    bmed = statistics.median(baseline)
    spread = (max(baseline) - min(baseline)) / bmed if bmed > 0 else 0.0
    if all(r < 1.0 for r in ratios) and 1.0 - med > spread:
        return "faster", med, spread
    if all(r > 1.0 for r in ratios) and med - 1.0 > spread:
        return "slower", med, spread
    if spread > NOISE_LIMIT:
        return "noisy", med, spread
    return "no measurable change", med, spread


METRICS = (
    ("total", "total_ns"),
    ("compile", "compile_ns"),
    ("steady median", "steady_median_ns"),
    ("steady p90", "steady_p90_ns"),
    ("breaks", "breaks"),
    ("recompiles", "recompiles"),
    ("fallbacks", "fallbacks"),
)
"""In the order a user asks: the run's time with compilation, compile time, steady time, counts."""


def metrics_of(runs: list[RunFigures], base_runs: list[RunFigures]) -> list[Metric]:
    """Each figure's median and spread over repetitions; timings also their ratios to the baseline
    of the same repetition (pairs where either side lacks the figure are left out). Total and
    compile time are judged by :func:`.stats.interval` over the repetitions where each side has
    two or more; with one, by the old floor rules (:func:`robust_total`, :func:`metric_verdict`).
    The steady figures are over each run's own steady calls: shown, never judged (see :func:`paired`)."""
    out = []
    for name, attr in METRICS:
        vals = [getattr(r, attr) for r in runs if r.ok and getattr(r, attr) is not None]
        ratios: list[float] = []
        bvals: list[float] = []
        if attr.endswith("_ns"):
            for r, b in zip(runs, base_runs, strict=False):
                x, y = getattr(r, attr), getattr(b, attr)
                if r.ok and b.ok and x is not None and y:
                    ratios.append(x / y)
                    bvals.append(float(y))
        verdict, med, spread = metric_verdict(ratios, bvals)
        if len(ratios) != len(runs):
            verdict = "n/a" if not ratios else verdict
        if attr == "total_ns" and ratios:
            verdict, med, spread = robust_total(runs, base_runs) or (verdict, med, spread)
        iv = None
        if attr in ("total_ns", "compile_ns"):
            base_vals = [float(getattr(b, attr)) for b in base_runs if b.ok and getattr(b, attr)]
            iv = stats.interval([float(v) for v in vals], base_vals)
            if iv is not None:
                verdict, med = stats.decide(iv), iv.ratio  # type: ignore[assignment]
                bm = statistics.median(base_vals)
                spread = (max(base_vals) - min(base_vals)) / bm if bm > 0 else 0.0
        out.append(Metric(name=name, median=float(statistics.median(vals)) if vals else None,
                          min=float(min(vals)) if vals else None, max=float(max(vals)) if vals else None,
                          ratios=ratios, ratio_median=med, baseline_spread=spread,
                          verdict=verdict if attr in ("total_ns", "compile_ns") else "n/a",
                          ci_low=iv.low if iv else None, ci_high=iv.high if iv else None))
    return out


def robust_total(runs: list[RunFigures], base_runs: list[RunFigures]) -> tuple[MetricVerdict, float, float] | None:
    """The total time's verdict from every call's minimum over the repetitions, summed (what one
    slow call or one slow repetition of it cannot move): ``faster``/``slower`` when the ratio of
    the sums clears :data:`MIN_EFFECT` and the noise (the median variation of one call between
    repetitions, every call of both sides, each weighted by its minimum time: the calls that make
    up the total decide how much it varies, so a millisecond call stalled on a busy machine does not
    hide a compile of seconds that changed threefold) and the median of the repetitions' own ratios
    lies on the same side; ``noisy`` when it does not and the noise is beyond :data:`NOISE_LIMIT`.
    None when a run lacks some of its calls (retention): the caller keeps the per-repetition figure.
    Returns (verdict, ratio, noise)."""
    ok = [r for r in runs if r.ok]
    bok = [r for r in base_runs if r.ok]
    if not ok or not bok or any(len(r.per_call) != r.calls or not r.per_call for r in ok + bok):
        return None
    cand, base = _by_call(ok), _by_call(bok)
    if set(cand) != set(base) or not cand:
        return None
    c_sum = sum(min(x.wall_ns for x in cand[i]) for i in cand)
    b_sum = sum(min(x.wall_ns for x in base[i]) for i in base)
    if b_sum <= 0:
        return None
    spreads = [((max(w) - min(w)) / min(w), float(min(w))) for side in (cand, base) for calls in side.values()
               if len(calls) > 1 and min(w := [x.wall_ns for x in calls]) > 0]
    noise = weighted_median(spreads) if spreads else 0.0
    ratio = c_sum / b_sum
    reps = [(r.total_ns or 0) / b.total_ns for r, b in zip(ok, bok, strict=False) if b.total_ns]
    rep_med = statistics.median(reps) if reps else ratio
    need = max(MIN_EFFECT, noise)
    if ratio < 1.0 - need and rep_med < 1.0:
        return "faster", ratio, noise
    if ratio > 1.0 + need and rep_med > 1.0:
        return "slower", ratio, noise
    if noise > NOISE_LIMIT:
        return "noisy", ratio, noise
    return "no measurable change", ratio, noise


def wants_more(runs: list[RunFigures], base_runs: list[RunFigures]) -> bool:
    """Whether a candidate is undecided and could still win (:func:`.stats.undecided` on its total
    time's interval); one that broke compilation or failed gets no more repetitions."""
    if not runs or not all(r.ok for r in runs) or compile_changes(runs, base_runs)[0]:
        return False
    total = next(m for m in metrics_of(runs, base_runs) if m.name == "total")
    if total.ci_low is None or total.ci_high is None or total.ratio_median is None:
        return total.verdict in ("noisy", "n/a") or (total.verdict == "no measurable change" and len(runs) < 2)
    iv = stats.Interval(ratio=total.ratio_median, low=total.ci_low, high=total.ci_high, n=len(runs),
                        n_base=len(base_runs), df=0.0)
    return stats.undecided(iv, total.verdict)


def weighted_median(pairs: list[tuple[float, float]]) -> float:
    """The median of ``(value, weight)`` pairs: the smallest value at or past half the total weight
    (the plain median's lower middle when every weight is equal)."""
    ordered = sorted(pairs)
    half = sum(w for _, w in ordered) / 2.0
    acc = 0.0
    for v, w in ordered:
        acc += w
        if acc >= half:
            return v
    return ordered[-1][0]


def _by_call(runs: list[RunFigures]) -> dict[int, list[CallTime]]:
    """Call index → its record in each repetition (only calls every repetition has)."""
    ok = [r for r in runs if r.ok and r.per_call]
    if not ok:
        return {}
    maps = [{c.index: c for c in r.per_call} for r in ok]
    common = set(maps[0]).intersection(*maps[1:])
    return {i: [m[i] for m in maps] for i in sorted(common)}


def _phase(calls: list[CallTime]) -> str:
    phases = {c.phase for c in calls}
    return phases.pop() if len(phases) == 1 else "/".join(sorted(phases))


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def paired(runs: list[RunFigures], base_runs: list[RunFigures]) -> Paired:
    """The candidate's steady calls against the baseline's, call by call (see :class:`Paired`)."""
    cand, base = _by_call(runs), _by_call(base_runs)
    both = [i for i in sorted(set(cand) & set(base)) if _phase(cand[i]) == "steady" == _phase(base[i])
            and (cand[i][0].family is None or base[i][0].family is None or cand[i][0].family == base[i][0].family)]
    ratios, bmins, cmins, spreads, worst = [], [], [], [], 1.0
    for i in both:
        b = [c.wall_ns for c in base[i]]
        c = [x.wall_ns for x in cand[i]]
        if min(b) <= 0 or min(c) <= 0:
            continue
        ratios.append(min(c) / min(b))
        bmins.append(float(min(b)))
        cmins.append(float(min(c)))
        for side in (b, c):
            if len(side) > 1:
                spreads.append((max(side) - min(side)) / min(side))
                worst = max(worst, max(side) / min(side))
    reps = []
    for k in range(min(len(next(iter(cand.values()), [])), len(next(iter(base.values()), [])))):
        rr = [cand[i][k].wall_ns / base[i][k].wall_ns for i in both if base[i][k].wall_ns > 0]
        if rr:
            reps.append(statistics.median(rr))
    noise = statistics.median(spreads) if spreads else None
    med = statistics.median(ratios) if ratios else None
    # the test's figure: each repetition's median paired call, per side (one stalled call cannot move it)
    typical = [[statistics.median(float(side[i][k].wall_ns) for i in both) for k in range(len(side[both[0]]))]
               if both else [] for side in (cand, base)]
    iv = stats.interval(typical[0], typical[1]) if both else None
    verdict = stats.decide(iv) if iv is not None else paired_verdict(med, reps, noise, len(ratios))
    return Paired(calls=len(ratios), ratio_median=med, ci_low=iv.low if iv else None, ci_high=iv.high if iv else None,
                  ratio_low=_quantile(ratios, 0.25) if ratios else None,
                  ratio_high=_quantile(ratios, 0.75) if ratios else None,
                  baseline_ns=statistics.median(bmins) if bmins else None,
                  candidate_ns=statistics.median(cmins) if cmins else None,
                  rep_ratios=reps, noise=noise, worst_noise=worst if spreads else None,
                  verdict=verdict, unpaired=unpaired(cand, base))  # type: ignore[arg-type]


def paired_verdict(med: float | None, reps: list[float], noise: float | None, calls: int = 3) -> MetricVerdict:
    """``faster``/``slower`` when the median per-call ratio clears both :data:`MIN_EFFECT` and the
    noise (the median variation of one call between repetitions), and every repetition's own
    paired median lies on the same side of 1; ``noisy`` when it does not and the noise is beyond
    :data:`NOISE_LIMIT`. The median over calls of per-call minima is what one outlier (one slow
    call, one slow repetition of it) cannot move; with one repetition there is no minimum to take,
    and a median of fewer than three calls is one outlier's to move: no verdict (``n/a``)."""
    if med is None or (len(reps) < 2 and calls < 3):
        return "n/a"
    need = max(MIN_EFFECT, noise or 0.0)
    if med < 1.0 - need and all(r < 1.0 for r in reps):
        return "faster"
    if med > 1.0 + need and all(r > 1.0 for r in reps):
        return "slower"
    if noise is not None and noise > NOISE_LIMIT:
        return "noisy"
    return "no measurable change"


def unpaired(cand: dict[int, list[CallTime]], base: dict[int, list[CallTime]]) -> list[CallGroup]:
    """Consecutive calls whose phases differ between the two (cold or fallback on one side),
    each run of them one row, with the median ratio of minimum times where neither side compiled."""
    runs: list[tuple[str, str, list[int], list[float]]] = []
    for i in sorted(set(cand) | set(base)):
        bp = _phase(base[i]) if i in base else "absent"
        cp = _phase(cand[i]) if i in cand else "absent"
        if bp == cp:
            continue
        ratio = None
        if i in base and i in cand and "cold" not in bp and "cold" not in cp:
            b = min(c.wall_ns for c in base[i])
            ratio = min(c.wall_ns for c in cand[i]) / b if b > 0 else None
        if runs and runs[-1][2][-1] == i - 1 and runs[-1][:2] == (bp, cp):
            runs[-1][2].append(i)
        else:
            runs.append((bp, cp, [i], []))
        if ratio is not None:
            runs[-1][3].append(ratio)
    return [CallGroup(first=ids[0], last=ids[-1], baseline_phase=bp, phase=cp,
                      ratio=statistics.median(rs) if rs and len(rs) == len(ids) else None)
            for bp, cp, ids, rs in runs]


def overall(steady: MetricVerdict, total: MetricVerdict) -> Verdict:
    """The row's verdict: the total time's (every observed call, compilation included: what the
    script cost as it ran), else the paired steady time's. When the two disagree the table shows
    both and the decision gives the break-even number of calls. A total whose interval rules out a
    change is ``no measurable change`` even where the steady calls alone could not tell (sub-
    millisecond calls vary by half between fresh processes): the steady verdict stands beside it."""
    v = total if total != "n/a" else steady
    return "no measurable change" if v == "n/a" else v


ADDED = (("breaks", "break sites"), ("recompiles", "recompiles"))
"""The counts a candidate can add to (:func:`compile_changes`), by field, as its ``adds`` words them."""


def compile_changes(runs: list[RunFigures],
                    base_runs: list[RunFigures]) -> tuple[list[str], list[str], list[str]]:
    """(what the candidate broke: compile failures or fallbacks of a frame beyond the baseline's,
    what it adds: more break sites or recompiles than the baseline, per frame by status and count;
    what it reached: :func:`reached_breaks`)."""
    ok, bok = [r for r in runs if r.ok], [r for r in base_runs if r.ok]
    if not ok or not bok:
        return [], [], []
    broke: list[str] = []
    for key in sorted({k for r in ok for k in r.frame_status}):
        frame, _, status = key.rpartition(" ")
        if status not in ("failed", "fallback"):
            continue
        n = max(r.frame_status.get(key, 0) for r in ok)
        if n > max(r.frame_status.get(key, 0) for r in bok):
            texts = next((r.problems for r in ok if r.frame_status.get(key, 0) == n), [])
            mine = [p for p in texts if p.endswith(" in " + frame) and f" {status}" in p]
            broke += mine or [f"{frame}: {n} compilation(s) {status}"]
    adds = []
    for attr, word in ADDED:
        c = [getattr(r, attr) for r in ok if getattr(r, attr) is not None]
        b = [getattr(r, attr) for r in bok if getattr(r, attr) is not None]
        if c and b and statistics.median(c) > statistics.median(b):
            adds.append(f"{word} {statistics.median(b):g} → {statistics.median(c):g}")
    return broke, adds, reached_breaks(ok, bok)


def reached_breaks(ok: list[RunFigures], base_ok: list[RunFigures]) -> list[str]:
    """The break sites every run of the candidate met and no run of the baseline did
    (``ID: reason``): its change let Dynamo trace further, to a break the baseline never reached.
    Said beside the counts, which read the same where one break took another's place."""
    seen = {s for r in base_ok for s in r.break_sites}
    every = set.intersection(*(set(r.break_sites) for r in ok)) - seen
    return [f"{s}: {ok[0].break_reasons.get(s) or 'a break'}" for s in sorted(every)]


def unmatched(c_flags: list[str], runs: list[RunFigures]) -> tuple[list[str], bool]:
    """(the candidate's marks no run matched, whether marks are all it does)."""
    marks = [v for f, v in zip(c_flags[::2], c_flags[1::2], strict=True) if f == "--mark-dynamic"]
    ok = [r for r in runs if r.ok]
    if not marks or not ok:
        return [], False
    missing = [m for m in marks if all(m in r.unmatched_marks for r in ok)]
    return missing, len(marks) * 2 == len(c_flags)


def is_shape_policy(flags: list[str]) -> bool:
    """Whether the flags set a shape policy (marks, ``dynamic=``, automatic dynamic shapes)."""
    return any(conflict_key(f, v) == SHAPE_POLICY for f, v in zip(flags[::2], flags[1::2], strict=True))


VERDICT_ORDER = {"faster": 0, "no measurable change": 1, "noisy": 2, "slower": 3, "did not remove its target": 4,
                 "no effect": 5, "changes outputs": 6, "failed": 7, "not tried": 8}
"""The table's order: a candidate that did not do what it was for (its target came back, its mark
matched nothing) below every one that did, even a slower one (whose steady calls may be faster:
a long process's choice), as the verdicts say."""


def _ratio(c: Candidate, name: str) -> float:
    if name == "steady" and c.paired is not None and c.paired.ratio_median is not None:
        return c.paired.ratio_median
    for m in c.metrics:
        if m.name == ("steady median" if name == "steady" else name) and m.ratio_median is not None:
            return m.ratio_median
    return 1.0


def rank(cands: list[Candidate]) -> list[Candidate]:
    """A candidate that breaks compilation last (never recommended), then the verdict, then whether
    it adds breaks or recompiles, then the total time's ratio (what the user asked), then the
    paired steady ratio."""
    key = sorted(cands, key=lambda c: (bool(c.broke), VERDICT_ORDER[c.verdict], bool(c.adds), _ratio(c, "total"),
                                       _ratio(c, "steady"), c.name))
    return [msgspec.structs.replace(c, rank=i) for i, c in enumerate(key, 1)]


def recommendable(c: Candidate) -> bool:
    """Faster, nothing broken, and its outputs checked: equal, or undecidable because the baseline
    is not deterministic (said in the table). A remedy that changes outputs, or makes a frame fail
    to compile or fall back, is never recommended; one that drops guards (``unsafe``) only where its
    check run kept every recompile it needed (``trials/guard_check.py``)."""
    safe = not c.unsafe or (c.guard_check is not None and c.guard_check.status == "kept every recompile")
    return c.verdict == "faster" and not c.broke and safe and c.outputs.status in ("equal", "could not decide")


def _spread(c: Candidate) -> float:
    m = next((m for m in c.metrics if m.name == "total"), None)
    return max(MIN_EFFECT, (m.baseline_spread or 0.0) if m else 0.0)


STACKED = ("combined", "retried")


def best_single(ranked: list[Candidate]) -> Candidate | None:
    """The best recommendable candidate that is no stack."""
    return next((o for o in ranked if recommendable(o) and o.origin not in STACKED), None)


def stacked_no_better(c: Candidate, ranked: list[Candidate]) -> Candidate | None:
    """The best single recommendable candidate that the stacked candidate ``c`` does not beat beyond
    that one's noise (None: ``c`` is no stack, or it does beat it): a stack is more change to make
    and to keep, recommended only for time it measurably saves (a BART's regional attention with
    dynamic=true, 0.689×, against dynamic=true alone, 0.696×, was not)."""
    single = best_single(ranked)
    if c.origin not in STACKED or single is None:
        return None
    return None if _ratio(c, "total") < _ratio(single, "total") * (1.0 - _spread(single)) else single


def choose_best(ranked: list[Candidate]) -> Candidate | None:
    """The recommendation: the best recommendable candidate that adds no break or recompile; one
    that adds some only when it beats every such candidate beyond the noise (the best of those);
    a stacked one only when it beats the best single one beyond the noise."""
    clean = [c for c in ranked if recommendable(c) and not c.adds and stacked_no_better(c, ranked) is None]
    adding = [c for c in ranked if recommendable(c) and c.adds and stacked_no_better(c, ranked) is None
              and all(_ratio(c, "total") < _ratio(o, "total") * (1.0 - _spread(o)) for o in clean)]
    if adding:
        return min(adding, key=lambda c: (_ratio(c, "total"), c.rank))
    return clean[0] if clean else None


SHAPE_POLICY = "shape policy"


def conflict_key(flag: str, value: str) -> str | None:
    """Two flags conflict when they set the same thing (a setting, a compile option, the stance);
    ``dynamic=``, ``--mark-dynamic`` and ``automatic_dynamic_shapes_mark_as`` are all one shape
    policy, so at most one of them is combined."""
    if flag == "--mark-dynamic":
        return SHAPE_POLICY
    if flag == "--dynamo-config":
        name, op, _ = parse_assignment(flag, value)
        if name.startswith("automatic_dynamic_shapes"):
            return SHAPE_POLICY
        return None if op == "+=" else f"config:{name}"
    if flag == "--compile-option":
        name = value.split("=", 1)[0]
        if name == "recompile_limit":  # the per-callable form of the process-wide setting
            return "config:recompile_limit"
        return SHAPE_POLICY if name == "dynamic" else "option:" + name
    if flag == "--stance":
        return "stance"
    if flag == "--pad":
        return "pad"
    if flag in ("--guard-filter", "--skip-guard-eval-unsafe-after"):  # one value each (a second replaces the first)
        return flag
    return None


def frames_clash(flags: list[str], other: list[str]) -> bool:
    """A mark names a source of a frame the baseline compiled (the whole model's ``input_ids``);
    ``--regional`` compiles the blocks instead, whose arguments have other names, so stacked the
    mark matches nothing and its line is dead code in the patch. ``dynamic=true`` stacks."""
    a, b = set(flags[::2]), set(other[::2])
    return ("--regional" in a and "--mark-dynamic" in b) or ("--mark-dynamic" in a and "--regional" in b)


def combine(cands: list[Candidate]) -> list[str] | None:
    """The flags of the best recommendable candidates that add nothing and do not conflict
    (None: fewer than two)."""
    taken: dict[str, str] = {}
    flags: list[str] = []
    used = 0
    for c in cands:
        if not recommendable(c) or c.adds or c.start or c.env or not c.flags:  # a process start or a code change
            continue
        pairs = list(zip(c.flags[::2], c.flags[1::2], strict=True))
        keys = [conflict_key(f, v) for f, v in pairs]
        if any(k is not None and k in taken for k in keys) or frames_clash(flags, c.flags):
            continue
        for (f, v), k in zip(pairs, keys, strict=True):
            if k is not None:
                taken[k] = c.name
            if [f, v] not in [flags[i:i + 2] for i in range(0, len(flags), 2)]:
                flags += [f, v]
        used += 1
    return flags if used >= 2 else None


def _count(c: Candidate | RunFigures, name: str) -> float:
    if isinstance(c, RunFigures):
        return float(getattr(c, name) or 0)
    m = next((m for m in c.metrics if m.name == name and m.median is not None), None)
    return float(m.median) if m is not None and m.median is not None else 0.0


def retries(ranked: list[Candidate], base_runs: list[RunFigures], most: int = 2) -> list[tuple[Candidate, Candidate,
                                                                                                  list[str]]]:
    """Candidates that failed alone from a cause another removes, with that other one and their
    flags together: X recompiled or fell back (a regional block hitting the recompile limit on
    shape churn) and was not recommendable; Y is recommendable, has fewer recompiles than the
    baseline and no fallback, and does not conflict with X. At most ``most``, best Y first."""
    base_rec = statistics.median([_count(r, "recompiles") for r in base_runs if r.ok] or [0.0])
    # a helper must be flags (a code-change candidate is its patch, with no flags to add to X's)
    helpers = [c for c in ranked if recommendable(c) and not c.start and not c.env and c.flags
               and c.origin not in STACKED
               and _count(c, "recompiles") < base_rec and _count(c, "fallbacks") == 0]
    out: list[tuple[Candidate, Candidate, list[str]]] = []
    for x in ranked:
        if (recommendable(x) and not x.adds) or x.status != "tried" or x.start or x.env or not x.flags \
                or x.origin in STACKED or x.verdict in ("changes outputs", "failed", "no effect"):
            continue
        if _count(x, "recompiles") == 0 and _count(x, "fallbacks") == 0:
            continue  # it did not fail from churn: nothing another candidate removes
        xkeys = {k for f, v in zip(x.flags[::2], x.flags[1::2], strict=True) if (k := conflict_key(f, v)) is not None}
        for y in helpers:
            ykeys = {k for f, v in zip(y.flags[::2], y.flags[1::2], strict=True)
                     if (k := conflict_key(f, v)) is not None}
            if y.name != x.name and not (xkeys & ykeys) and not frames_clash(x.flags, y.flags):
                out.append((x, y, [*x.flags, *y.flags]))
                break
        if len(out) >= most:
            break
    return out


# --- the decision's prose -------------------------------------------------------------------------


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
        text = f"the same call varied {worst:.3g}× between repetitions (typically {fmt_variation(typical)})"
    elif typical is not None:
        text = f"the same call varied typically {fmt_variation(typical)} between repetitions"
    else:
        text = "the timings varied between repetitions"
    if total is not None and total.ci_low is not None and total.ci_high is not None:
        text += f"; the total's interval {total.ci_low:.2f}–{total.ci_high:.2f}× is too wide to tell"
    if busy is not None:
        return text + f": the machine is busy ({busy}); rerun with more --repeat or on a quiet machine"
    return text + (f" ({measured}: not from load); more repetitions narrow the interval" if measured else "")


def _ratio_text(c: Candidate, name: str) -> str:
    m = next((m for m in c.metrics if m.name == name and m.ratio_median is not None), None)
    if m is None:
        return "n/a"
    if len(m.ratios) < 2:  # one run has no variation to measure: a 0% would read as a quiet machine
        return f"{m.ratio_median:.3f}× ({m.verdict}; noise not measured: one repetition)"
    return f"{m.ratio_median:.3f}× ({m.verdict}; noise {fmt_variation(m.baseline_spread or 0, 1)})"


def paired_text(c: Candidate) -> str:
    """``0.91× over 3 calls steady in both (0.85–0.97)``, or why there is none."""
    p = c.paired
    if p is None or p.ratio_median is None:
        return "no call steady in both"
    spread = f", {p.ratio_low:.2f}–{p.ratio_high:.2f}" if p.calls > 1 and p.ratio_low is not None else ""
    return f"{p.ratio_median:.3f}× over {p.calls} call(s) steady in both (minimum per call{spread})"


def decision_text(chosen: Candidate | None, ranked: list[Candidate], base: Candidate,
              deterministic: bool | None) -> tuple[str, str | None]:
    """The decision in words, and when to undo it: the chosen candidate's evidence (its verdicts,
    the trade, the noise), or why the script is kept as it is."""
    if chosen is None:
        why = "no candidate was faster with its outputs unchanged and its compilation intact"
        if deterministic is False:
            why += " (the baseline is not deterministic, so outputs could not be compared)"
        for c in ranked:
            g = c.guard_check
            if c.verdict != "faster":
                continue
            if g is not None and g.status == "broke a recompile":
                why += f"; {c.name} was faster but is not recommended: unsafe, it {g.broke}"
            elif c.broke:
                why += f"; {c.name} was faster but is not recommended: it breaks compilation ({c.broke[0]})"
            elif g is not None and g.status == "could not check":
                why += (f"; {c.name} was faster but is not recommended: unsafe, and its check run could not tell "
                        f"({g.detail})")
        for c in ranked:
            if c.verdict == "did not remove its target":
                why += f"; {c.name} did not remove its target ({c.reason})"
        noisy = [c for c in ranked if c.verdict == "noisy"]
        if noisy:
            why += ("; the timings were noisy (" + (noisy[0].noise_note or "") + "); what stayed stable: "
                    + "; ".join(f"{c.name}: {stable_text(c)}" for c in noisy[:3]))
        if (longer := for_longer_runs(None, ranked)) is not None:
            why += "; " + longer
        return f"keep the script as it is: {why}", None
    patch = f" (the patch: {chosen.patch})" if chosen.patch else ""
    evidence = (f"{chosen.name}: {chosen.code_change}{patch}; total {_ratio_text(chosen, 'total')}, "
                f"compile {_ratio_text(chosen, 'compile')}, steady {paired_text(chosen)} ({chosen.steady_verdict}), "
                f"outputs {chosen.outputs.status}")
    if chosen.paired is not None and chosen.paired.unpaired:
        evidence += "; " + "; ".join(group_text(g) for g in chosen.paired.unpaired[:3])
    if chosen.origin in STACKED:
        single = best_single(ranked)
        evidence += f"; stacked remedies ({chosen.targets})"
        if single is not None:
            evidence += (f", measured against a baseline of their own: total {_ratio_text(chosen, 'total')} against "
                         f"the best single one, {single.name}: {_ratio_text(single, 'total')}")
    for c in ranked:  # a stack left out for the simpler change: said, since it ranks above it
        if c.rank < chosen.rank and recommendable(c) and stacked_no_better(c, ranked) is chosen:
            evidence += (f"; {c.name} ({c.targets}) was not measurably faster than {chosen.name} alone (total "
                         f"{_ratio_text(c, 'total')} against {_ratio_text(chosen, 'total')}): the simpler change")
    if chosen.adds:
        evidence += "; it adds " + ", ".join(chosen.adds) + " (and beats every candidate that adds nothing)"
    if chosen.unsafe and chosen.guard_check is not None:
        kept = [r.label for r in chosen.guard_check.probes if r.outcome == "recompiled"]
        evidence += (f"; unsafe (it drops guards): every change its check run made gave the baseline's outputs "
                     f"({'; '.join(kept)}); a change it was not shown can still run stale code")
    if chosen.trade:
        evidence += "; the trade: " + chosen.trade
    elif chosen.steady_verdict == "slower":
        evidence += "; " + break_even(chosen, base)
    if (longer := for_longer_runs(chosen, ranked)) is not None:
        evidence += "; " + longer
    if chosen.noise_note:
        evidence += "; " + chosen.noise_note
    if (chosen.repetitions or len(chosen.runs)) < 2:
        evidence += "; one repetition is a sketch: confirm with --repeat 3 before applying"
    return evidence, rollback_trigger(chosen, base)


def for_longer_runs(chosen: Candidate | None, ranked: list[Candidate]) -> str | None:
    """The candidate for a long process (a training run of many steps), said beside the decision,
    never instead of it: where the chosen remedy wins on total time but makes steady calls slower,
    the best recommendable candidate whose steady calls are faster; where none is chosen, the best
    whose steady calls are faster though its total is not (its compilation costs more than this
    short run's steady calls save), with outputs intact and nothing broken."""
    if chosen is not None and chosen.steady_verdict != "slower":
        return None
    if chosen is not None:
        alt = next((c for c in ranked if c is not chosen and recommendable(c) and c.steady_verdict == "faster"), None)
        lead = "for a process past that break-even"
    else:
        alt = next((c for c in ranked if c.steady_verdict == "faster"
                    and c.verdict in ("slower", "no measurable change") and not c.broke and not c.unsafe
                    and c.outputs.status in ("equal", "could not decide")), None)
        lead = "for a long process"
    if alt is None:
        return None
    text = (f"{lead}, {alt.name} makes steady calls faster: steady {paired_text(alt)}, "
            f"total {_ratio_text(alt, 'total')}, outputs {alt.outputs.status}")
    return text + (f" ({alt.trade})" if chosen is None and alt.trade else "")


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
    parts += c.adds  # ``recompiles 1 → 2``: that count is said there, with the baseline's
    said = {name for name, word in ADDED if any(a.startswith(word + " ") for a in c.adds)}
    for name in ("recompiles", "fallbacks", "breaks"):
        m = next((m for m in c.metrics if m.name == name and m.median is not None), None)
        if m is not None and name not in said:
            parts.append(f"{name} {m.median:g}")
    return ", ".join(parts) or "nothing"


def break_even(chosen: Candidate, base: Candidate) -> str:
    """A remedy that saves compile time but makes steady calls slower pays off only up to some
    number of steady calls: the total time saved over the steady time lost per call, the loss
    from the paired comparison (calls steady in both), never from two medians over different
    calls, and each figure only where its verdict decided it (``faster``, ``slower``)."""
    total = next((m for m in chosen.metrics if m.name == "total"), None)
    saved = 0.0
    if total is not None and total.verdict == "faster":
        saved = (_median_of(base, "total") or 0) - (_median_of(chosen, "total") or 0)
    p = chosen.paired
    lost = 0.0
    if chosen.steady_verdict == "slower" and p is not None and p.ratio_median is not None and p.baseline_ns is not None:
        lost = (p.ratio_median - 1.0) * p.baseline_ns
    if saved <= 0 or lost <= 0:
        return "steady calls are slower"
    return (f"steady calls are slower by {fmt_ns(lost)} each (paired over {p.calls if p else 0} calls): it pays "
            f"off for runs of up to about {int(saved / lost):,} more steady calls than this one")


def _median_of(c: Candidate, name: str) -> float | None:
    return next((m.median for m in c.metrics if m.name == name), None)
