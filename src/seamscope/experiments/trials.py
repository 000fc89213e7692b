"""Remedy trials: the baseline and one candidate per applicable remedy, each run in a fresh process.

The order of work: a baseline run (its findings choose the candidates), then the timed
repetitions interleaved (baseline, A, B, baseline, A, B...) so that the machine's drift hits all
alike, then the output checks (baseline twice, an eager run, each candidate once), each in a run
of its own outside the timed repetitions, then a combined candidate of the best remedies that do
not conflict, measured against a baseline interleaved with it.

The arithmetic (catalogue, verdicts, ranking) is torch-free and tested on fakes.
"""

from __future__ import annotations

import os
import re
import statistics
import time
from dataclasses import dataclass, field

import msgspec

from ..analyze.units import fmt_ns
from ..capture.remedies import (
    RemedySpec,
    code_change,
    parse_assignment,
    per_callable_limit,
    spec_from_words,
)
from ..model.receipt import Receipt
from ..model.trials import (
    Candidate,
    Metric,
    MetricVerdict,
    OutputCheck,
    Overhead,
    RunFigures,
    Trials,
    Verdict,
)
from . import fingerprint as fpmod
from .trial_runs import Outcome, Setup, run_command, run_once, shell_join

# --- the catalogue (torch-free) -------------------------------------------------------------------


@dataclass
class Draft:
    """A candidate before it runs."""

    name: str
    spec: RemedySpec
    origin: str
    targets: str
    cost_ns: int = 0


_GUARD_SIZE = re.compile(r"tensor '(.+?)' (?:size|stride) mismatch at index (\d+)")


def source_of_guard(guard: str) -> str | None:
    """``tensor 'x' size mismatch at index 0`` → ``L['x']:0`` (the syntax of ``dynamic_sources``).

    Names Dynamo prints as a plain local become ``L['name']``; others (``L['self']...``) are kept."""
    m = _GUARD_SIZE.search(guard)
    if m is None:
        return None
    name, dim = m.group(1), m.group(2)
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        name = f"L['{name}']"
    return f"{name}:{dim}"


def _slug(text: str) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()
    return s[:48] or "candidate"


def buckets_for(lengths: list[int]) -> str | None:
    """Four buckets at the quartiles of the trace's distinct lengths (the largest is the last), as
    a ``buckets:`` policy; None when there are too few distinct lengths to bucket."""
    distinct = sorted(set(lengths))
    if len(distinct) < 3:
        return None
    picks = sorted({distinct[min(len(distinct) - 1, (len(distinct) * q) // 4)] for q in (1, 2, 3)} | {distinct[-1]})
    return "buckets:" + ",".join(str(n) for n in picks)


def module_of(file: str, script: str | None) -> str | None:
    """The importable name of a source file as ``--disable`` takes it: ``__main__`` for the
    script itself, a dotted path below the script's folder or below ``site-packages``; None when
    there is none to give (a workload's own file cannot be patched either)."""
    if script is None or not file.endswith(".py"):
        return None
    workload = ".py:" in script
    own = os.path.abspath(script.rpartition(":")[0] if workload else script)
    path = os.path.abspath(file)
    if path == own:
        return None if workload else "__main__"
    root = os.path.dirname(own)
    norm = path.replace(os.sep, "/")
    if "/site-packages/" in norm:
        rel = norm.rsplit("/site-packages/", 1)[1]
    elif path.startswith(root + os.sep):
        rel = os.path.relpath(path, root).replace(os.sep, "/")
    else:
        return None
    parts = rel[: -len(".py")].split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts) if parts and all(p.isidentifier() for p in parts) else None


def disable_targets(receipt: Receipt, script: str | None) -> list[tuple[str, int, int]]:
    """Functions called from a compiled frame that hold two or more break sites, as
    ``(MODULE:QUALNAME, summed cost of their break findings, sites)``, costliest first: wrapped in
    ``torch.compiler.disable`` they become one explicit boundary instead of several breaks."""
    frames = {c.compile_id: c.frame_name for c in receipt.ledger.compilations}
    cost = {f.site_id: (f.cost_ns or 0) for f in (receipt.findings.findings if receipt.findings else []) if f.site_id}
    groups: dict[str, list[str]] = {}
    inlined: set[str] = set()
    for site in receipt.ledger.break_sites:
        scope = site.scope or site.function
        mod = module_of(site.file, script)
        if not scope or "<" in scope or mod is None:
            continue
        target = f"{mod}:{scope}"
        groups.setdefault(target, []).append(site.site_id)
        if any(frames.get(cid) not in (None, scope.rsplit(".", 1)[-1]) for cid in site.compile_ids):
            inlined.add(target)  # reached from a caller's compiled frame: the function is a callee
    out = [(t, sum(cost.get(i, 0) for i in ids), len(ids)) for t, ids in groups.items()
           if len(ids) >= 2 and t in inlined]
    return sorted(out, key=lambda x: (-x[1], x[0]))


def catalogue(receipt: Receipt, workload_lengths: list[int] | None = None, workload: bool = False,
              script: str | None = None) -> list[Draft]:
    """One candidate per applicable remedy of the baseline's findings, costliest finding first.

    For a workload target (``FILE.py:FUNC``), shape churn also gets the shape study's padding
    policies: ``pow2``, and with a length trace four buckets at its quartiles. A function that
    holds several break sites gets ``--disable`` (one boundary for them all)."""
    out: dict[str, Draft] = {}

    def add(name: str, flags: list[str], origin: str, targets: str, cost: int) -> None:
        spec = spec_from_words(flags)
        key = " ".join(spec.flags())
        if key in out:
            out[key].cost_ns = max(out[key].cost_ns, cost)
            return
        out[key] = Draft(name=_slug(name), spec=spec, origin=origin, targets=targets, cost_ns=cost)

    fs = receipt.findings
    if fs is None:
        return []
    for f in fs.findings:
        cost = 0
        if f.cost is not None:
            cost = f.cost.estimated_ns
        elif f.churn is not None:
            cost = f.churn.compile_ns
        for r in f.remedies:
            if r.action in ("capture_scalar_outputs", "capture_dynamic_output_shape_ops"):
                add(r.action, ["--dynamo-config", f"{r.action}=True"], f.finding_id, f.sentence, cost)
            elif r.action == "reorder_logging":
                for key, val in r.config.items():
                    fn = val.removeprefix("add ").strip()
                    target = f"builtins:{fn}" if "." not in fn and ":" not in fn else fn.replace(".", ":", 1)
                    if ":" in target:
                        add(f"{key} {fn}", ["--dynamo-config", f"{key}+={target}"], f.finding_id, f.sentence, cost)
            elif r.action == "fix_churn_or_raise_limit":
                add("recompile_limit 64", ["--dynamo-config", "recompile_limit=64"], f.finding_id, f.sentence, cost)
        if f.churn is not None and f.churn.pattern in ("shape", "recompile_limit", "stride"):
            sources = sorted({s for g in f.churn.guards if (s := source_of_guard(g)) is not None})
            add("dynamic=True", ["--compile-option", "dynamic=true"], f.finding_id, f.sentence, cost)
            for s in sources[:2]:
                add(f"mark dynamic {s}", ["--mark-dynamic", s], f.finding_id, f.sentence, cost)
            if f.churn.pattern == "shape":
                add("mark as unbacked", ["--dynamo-config", "automatic_dynamic_shapes_mark_as='unbacked'"],
                    f.finding_id, f.sentence, cost)
            if f.churn.fallback:
                add("recompile_limit 64", ["--dynamo-config", "recompile_limit=64"], f.finding_id, f.sentence, cost)
            if workload and f.churn.pattern in ("shape", "recompile_limit"):
                add("pad pow2", ["--pad", "pow2"], f.finding_id, f.sentence, cost)
                buckets = buckets_for(workload_lengths or [])
                if buckets is not None:
                    add(f"pad {buckets}", ["--pad", buckets], f.finding_id, f.sentence, cost)
    for target, cost, n in disable_targets(receipt, script)[:2]:
        add(f"disable {target}", ["--disable", target], "breaks", f"{n} break sites inside {target}", cost)
    if receipt.summary.fallback_count and not any("recompile_limit" in k for k in out):
        add("recompile_limit 64", ["--dynamo-config", "recompile_limit=64"], "fallbacks",
            f"{receipt.summary.fallback_count} frame(s) fell back to eager", 0)
    for d in list(out.values()):  # a frame hit the limit: also the per-callable limit (torch 2.13+)
        if (flags := per_callable_limit(d.spec, receipt.ledger.environment.torch_version)) is not None:
            add(f"{d.name} per callable", flags, d.origin, d.targets, d.cost_ns)
    drafts = sorted(out.values(), key=lambda d: (-d.cost_ns, d.name))
    return _unique_names(drafts)


def _unique_names(drafts: list[Draft]) -> list[Draft]:
    seen: dict[str, int] = {}
    for d in drafts:
        n = seen.get(d.name, 0)
        seen[d.name] = n + 1
        if n:
            d.name = f"{d.name}-{n + 1}"
    return drafts


def choose(drafts: list[Draft], only: list[str], skip: list[str]) -> list[Draft]:
    """``--only``/``--skip``: names (or a part of the flags)."""

    def hit(d: Draft, keys: list[str]) -> bool:
        flags = " ".join(d.spec.flags())
        return any(k == d.name or k in flags for k in keys)

    if only:
        drafts = [d for d in drafts if hit(d, only)]
    return [d for d in drafts if not hit(d, skip)]


# --- verdicts (torch-free) ------------------------------------------------------------------------


def metric_verdict(ratios: list[float], baseline: list[float]) -> tuple[MetricVerdict, float | None, float | None]:
    """``faster``/``slower`` only when every repetition's ratio lies on the same side of 1 and the
    median ratio differs from 1 by more than the baseline's own spread between repetitions.
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
    return "no measurable change", med, spread


METRICS = (
    ("steady median", "steady_median_ns"),
    ("steady p90", "steady_p90_ns"),
    ("total", "total_ns"),
    ("compile", "compile_ns"),
    ("breaks", "breaks"),
    ("recompiles", "recompiles"),
    ("fallbacks", "fallbacks"),
)


def metrics_of(runs: list[RunFigures], base_runs: list[RunFigures]) -> list[Metric]:
    """Each figure's median and spread over repetitions; timings also their ratios to the baseline
    of the same repetition (pairs where either side lacks the figure are left out)."""
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
        out.append(Metric(name=name, median=float(statistics.median(vals)) if vals else None,
                          min=float(min(vals)) if vals else None, max=float(max(vals)) if vals else None,
                          ratios=ratios, ratio_median=med, baseline_spread=spread,
                          verdict=verdict if attr in ("steady_median_ns", "total_ns", "steady_p90_ns", "compile_ns")
                          else "n/a"))
    return out


def overall(steady: MetricVerdict, total: MetricVerdict) -> Verdict:
    """The row's verdict: the total time's (every observed call, compilation included: what the
    script cost as it ran), else the steady time's. When the two disagree the table shows both and
    the decision gives the break-even number of calls."""
    v = total if total != "n/a" else steady
    return "no measurable change" if v == "n/a" else v


VERDICT_ORDER = {"faster": 0, "no measurable change": 1, "slower": 2, "changes outputs": 3, "failed": 4, "not tried": 5}


def _median_ratio(c: Candidate, name: str) -> float:
    for m in c.metrics:
        if m.name == name and m.ratio_median is not None:
            return m.ratio_median
    return 1.0


def rank(cands: list[Candidate]) -> list[Candidate]:
    """Verdict first, then the steady median ratio, then the total ratio."""
    key = sorted(cands, key=lambda c: (VERDICT_ORDER[c.verdict], _median_ratio(c, "steady median"),
                                       _median_ratio(c, "total"), c.name))
    return [msgspec.structs.replace(c, rank=i) for i, c in enumerate(key, 1)]


def recommendable(c: Candidate) -> bool:
    """Faster, and its outputs checked: equal, or undecidable because the baseline is not
    deterministic (said in the table). A remedy that changes outputs is never recommended."""
    return c.verdict == "faster" and c.outputs.status in ("equal", "could not decide")


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
    return None


def combine(cands: list[Candidate]) -> list[str] | None:
    """The flags of the best recommendable candidates that do not conflict (None: fewer than two)."""
    taken: dict[str, str] = {}
    flags: list[str] = []
    used = 0
    for c in cands:
        if not recommendable(c):
            continue
        pairs = list(zip(c.flags[::2], c.flags[1::2], strict=True))
        keys = [conflict_key(f, v) for f, v in pairs]
        if any(k is not None and k in taken for k in keys):
            continue
        for (f, v), k in zip(pairs, keys, strict=True):
            if k is not None:
                taken[k] = c.name
            if [f, v] not in [flags[i:i + 2] for i in range(0, len(flags), 2)]:
                flags += [f, v]
        used += 1
    return flags if used >= 2 else None


# --- the trial ------------------------------------------------------------------------------------


class BaselineFailed(Exception):
    def __init__(self, message: str, stderr: str) -> None:
        super().__init__(message)
        self.stderr = stderr


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
    interrupted: bool = False
    compare_ns: int = 0
    baseline_check_runs: list[RunFigures] = field(default_factory=list)


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
    ``keys``: where a name's figures are kept, when not under its own name."""
    keys = keys or {}
    for rep in reps:
        for name, flags in names:
            key = keys.get(name, name)
            if name in st.failed or name in st.not_tried:
                continue
            if st.setup.budget_s is not None and name != "baseline" and st.setup.clock() - st.started > st.setup.budget_s:
                if not st.runs.get(key):
                    st.not_tried[name] = "over the budget"
                continue  # the repetitions done so far are kept
            _progress(st, f"{name} · repetition {rep} · run {done[0] + 1}/{total_runs}", total_runs - done[0])
            t0 = st.setup.clock()
            oc = run_once(st.setup, flags, os.path.join("trials", name, f"rep-{rep}"), f"rep-{rep}")
            st.run_s.append(st.setup.clock() - t0)
            done[0] += 1
            st.runs.setdefault(key, []).append(oc.figures)
            if not oc.figures.ok:
                if name == "baseline":
                    raise BaselineFailed(oc.figures.error or "the baseline failed", oc.stderr)
                st.failed[name] = oc.figures.error or "failed"


def over_budget(drafts: list[Draft], setup: Setup, elapsed: float, run_s: float) -> list[Draft]:
    """The candidates that do not fit in ``--budget``, the cheapest findings first out.

    After the first baseline run (``elapsed``, one run taking ``run_s``) the trial still needs the
    baseline's other repetitions and three output runs (the baseline twice, eager); each candidate
    needs its repetitions and one output run."""
    if setup.budget_s is None:
        return []
    left = setup.budget_s - elapsed - (setup.repeat - 1 + 3) * run_s
    fit = max(0, int(left // ((setup.repeat + 1) * run_s))) if run_s > 0 else len(drafts)
    order = sorted(drafts, key=lambda d: -d.cost_ns)
    return order[fit:]


def _check(st: _State, name: str, flags: list[str], rel: str) -> Outcome:
    oc = run_once(st.setup, flags, os.path.join("trials", rel), "check", fingerprint=True)
    st.checks[name] = oc
    return oc


def output_check(cand: Outcome | None, base: fpmod.Fingerprints | None, eager: fpmod.Fingerprints | None,
                 deterministic: bool | None) -> OutputCheck:
    if cand is None:
        return OutputCheck(status="not checked")
    if cand.fingerprints is None:
        return OutputCheck(status="failed", detail=cand.figures.error or "no fingerprints written")
    if base is None:
        return OutputCheck(status="could not decide", detail="the baseline's outputs were not recorded")
    vb = fpmod.compare(base, cand.fingerprints)
    ve = fpmod.compare(eager, cand.fingerprints) if eager is not None else None
    text_b = "equal" if vb.equal else vb.first_difference
    text_e = None if ve is None else ("equal" if ve.equal else ve.first_difference)
    if deterministic is False:
        return OutputCheck(status="could not decide", vs_baseline=text_b, vs_eager=text_e,
                           calls_compared=vb.calls_compared, max_deviation=vb.max_deviation,
                           detail="the baseline is not deterministic: its two runs disagree")
    if vb.calls_compared == 0 and vb.equal:
        return OutputCheck(status="could not decide", vs_baseline=text_b, vs_eager=text_e,
                           detail="no observed call returned before the first parameter update")
    return OutputCheck(status="equal" if vb.equal else "changes outputs", vs_baseline=text_b, vs_eager=text_e,
                       calls_compared=vb.calls_compared, max_deviation=vb.max_deviation)


def _candidate(st: _State, d: Draft, base_runs: list[RunFigures], check: OutputCheck) -> Candidate:
    flags = [f for f in d.spec.flags()]
    runs = st.runs.get(d.name, [])
    cmd = shell_join(run_command(flags, st.setup, os.path.join(st.setup.out, "trials", d.name)))
    base = dict(name=d.name, flags=flags, origin=d.origin, targets=d.targets, target_cost_ns=d.cost_ns,
                code_change=code_change(d.spec) if flags else "(none: the script as it is)", command=cmd,
                runs=runs, check=st.checks[d.name].figures if d.name in st.checks else None)
    if d.name in st.not_tried and not runs:
        return Candidate(**base, status="not tried", verdict="not tried", reason=st.not_tried[d.name])  # type: ignore[arg-type]
    if d.name in st.failed:
        return Candidate(**base, status="failed", verdict="failed", reason=st.failed[d.name], outputs=check)  # type: ignore[arg-type]
    ms = metrics_of(runs, base_runs[: len(runs)])
    steady = next(m.verdict for m in ms if m.name == "steady median")
    total = next(m.verdict for m in ms if m.name == "total")
    verdict: Verdict = overall(steady, total)
    if check.status == "changes outputs":
        verdict = "changes outputs"
    elif check.status == "failed":
        verdict = "failed"
    return Candidate(**base, metrics=ms, steady_verdict=steady, total_verdict=total, verdict=verdict,  # type: ignore[arg-type]
                     outputs=check, reason=check.detail if check.status == "failed" else None)


def _workload_trace(setup: Setup) -> tuple[list[int] | None, bool]:
    """(the length trace, whether the target is a workload ``FILE.py:FUNC``)."""
    from .workload import is_workload_spec

    if not is_workload_spec(setup.script):
        return None, False
    from .workload_run import parse_args, trace_lengths

    return trace_lengths(parse_args([setup.script, *setup.args])), True


def run_trials(setup: Setup, extra: list[RemedySpec], only: list[str], skip: list[str]) -> tuple[Trials, Receipt]:
    """The whole trial. Raises :class:`BaselineFailed` (nothing else run) when the script fails."""
    t_start = time.perf_counter_ns()
    st = _State(setup=setup, drafts=[], started=setup.clock())
    if setup.progress:
        setup.progress("baseline · first run (its findings choose the candidates)")
    t0 = setup.clock()
    first = run_once(setup, [], os.path.join("trials", "baseline", "rep-1"), "rep-1")
    st.run_s.append(setup.clock() - t0)
    if not first.figures.ok or first.receipt is None:
        raise BaselineFailed(first.figures.error or "the baseline failed", first.stderr)
    st.runs["baseline"] = [first.figures]
    drafts = choose(catalogue(first.receipt, *_workload_trace(setup), script=setup.script), only, skip)
    for i, spec in enumerate(extra, 1):
        drafts.append(Draft(name=f"user-{i}", spec=spec, origin="user", targets="given with --candidate"))
    drafts = _unique_names(drafts)
    st.drafts = drafts
    for d in over_budget(drafts, setup, setup.clock() - st.started, st.run_s[0]):
        st.not_tried[d.name] = "over the budget"
    baseline = Draft(name="baseline", spec=RemedySpec(), origin="baseline", targets="the script as it is")
    order: list[tuple[str, list[str]]] = [("baseline", [])] + [(d.name, d.spec.flags()) for d in drafts]
    total_runs = len(order) * setup.repeat - 1 + 3 + len(drafts)
    done = [1]
    trials_interrupted = False
    deterministic: bool | None = None
    eager: Outcome | None = None
    try:
        # repetition 1 of the baseline is the run above; the others run interleaved
        _timed(st, order[1:], [1], total_runs, done)
        if setup.repeat > 1:
            _timed(st, order, list(range(2, setup.repeat + 1)), total_runs, done)
        # outputs, outside the timed repetitions
        _progress(st, "outputs · baseline (twice) and eager", total_runs - done[0])
        b1 = _check(st, "baseline", [], "baseline/check-1")
        b2 = run_once(setup, [], os.path.join("trials", "baseline", "check-2"), "check-2", fingerprint=True)
        eager = run_once(setup, ["--stance", "force_eager"], os.path.join("trials", "eager", "check"), "check",
                         fingerprint=True)
        st.baseline_check_runs = [b2.figures, eager.figures]  # type: ignore[union-attr]
        done[0] += 3
        tc = time.perf_counter_ns()
        if b1.fingerprints is not None and b2.fingerprints is not None:
            deterministic = fpmod.compare(b1.fingerprints, b2.fingerprints).equal
        st.compare_ns += time.perf_counter_ns() - tc
        for d in drafts:
            if d.name in st.failed or d.name in st.not_tried:
                continue
            _progress(st, f"outputs · {d.name}", total_runs - done[0])
            _check(st, d.name, d.spec.flags(), f"{d.name}/check")
            done[0] += 1
    except KeyboardInterrupt:
        trials_interrupted = True
    base_fp = st.checks["baseline"].fingerprints if "baseline" in st.checks else None
    eager_fp = eager.fingerprints if eager is not None else None
    tc = time.perf_counter_ns()
    checks = {d.name: output_check(st.checks.get(d.name), base_fp, eager_fp, deterministic) for d in drafts}
    st.compare_ns += time.perf_counter_ns() - tc
    for d in drafts:
        if d.name not in st.runs and d.name not in st.not_tried and d.name not in st.failed:
            st.not_tried[d.name] = "interrupted" if trials_interrupted else "not reached"
    base_runs = st.runs["baseline"]
    cands = [_candidate(st, d, base_runs, checks[d.name]) for d in drafts]
    ranked = rank(cands)
    # a combined candidate of the best remedies that do not conflict, against its own baseline
    combo = None if trials_interrupted else combine(ranked)
    if combo is not None and setup.budget_s is not None and statistics.median(st.run_s) * (
        2 * setup.repeat + 1
    ) > setup.budget_s - (setup.clock() - st.started):
        combo = None
    if combo is not None:
        spec = spec_from_words(combo)
        cd = Draft(name="combined", spec=spec, origin="combined",
                   targets="the recommended remedies together: " + ", ".join(c.name for c in ranked if recommendable(c)))
        st.drafts.append(cd)
        try:
            pair = [("baseline", []), ("combined", spec.flags())]
            reps = list(range(setup.repeat + 1, 2 * setup.repeat + 1))
            _timed(st, pair, reps, total_runs + 2 * setup.repeat + 1, done, keys={"baseline": "baseline-2"})
            oc = _check(st, "combined", spec.flags(), "combined/check")
            tc = time.perf_counter_ns()
            chk = output_check(oc, base_fp, eager_fp, deterministic)
            st.compare_ns += time.perf_counter_ns() - tc
            ranked = rank(ranked + [_candidate(st, cd, st.runs.get("baseline-2", []), chk)])
        except KeyboardInterrupt:
            trials_interrupted = True
    base_cand = _candidate(st, baseline, base_runs, OutputCheck(
        status="equal" if deterministic else ("could not decide" if deterministic is False else "not checked"),
        vs_baseline="equal" if deterministic else (None if deterministic is None else "the two runs disagree"),
        vs_eager=_eager_text(base_fp, eager_fp),
        detail=None if deterministic is not False else "not deterministic: the baseline's two runs disagree"))
    base_cand = msgspec.structs.replace(base_cand, verdict="no measurable change", rank=0)
    chosen = next((c for c in ranked if recommendable(c)), None)
    decision, trigger = _decision(chosen, base_cand, deterministic)
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
                    tolerance=fpmod.tolerance_text(), deterministic=deterministic, baseline=base_cand,
                    candidates=ranked, chosen=chosen.name if chosen else None, decision=decision,
                    rollback_trigger=trigger, interrupted=trials_interrupted, overhead=overhead)
    return trials, first.receipt


def _eager_text(base: fpmod.Fingerprints | None, eager: fpmod.Fingerprints | None) -> str | None:
    if base is None or eager is None:
        return None
    c = fpmod.compare(eager, base)
    return "equal" if c.equal else c.first_difference


def _fmt_ratio(c: Candidate, name: str) -> str:
    for m in c.metrics:
        if m.name == name and m.ratio_median is not None:
            return f"{m.ratio_median:.3f}× (spread of the baseline {m.baseline_spread or 0:.1%})"
    return "n/a"


def _decision(chosen: Candidate | None, base: Candidate, deterministic: bool | None) -> tuple[str, str | None]:
    if chosen is None:
        why = "no candidate was faster with its outputs unchanged"
        if deterministic is False:
            why += " (the baseline is not deterministic, so outputs could not be compared)"
        return f"keep the script as it is: {why}", None
    evidence = (f"{chosen.name}: {chosen.code_change}; steady median {_fmt_ratio(chosen, 'steady median')} "
                f"({chosen.steady_verdict}), total {_fmt_ratio(chosen, 'total')} ({chosen.total_verdict}), "
                f"outputs {chosen.outputs.status}")
    if chosen.steady_verdict == "slower":
        evidence += "; " + break_even(chosen, base)
    rec = next((m for m in chosen.metrics if m.name == "recompiles"), None)
    trigger = ("roll back if the steady median per call exceeds the baseline's ("
               f"{fmt_ns(_median_of(base, 'steady median'))}), if recompiles exceed "
               f"{int(rec.max) if rec and rec.max is not None else 0} per run, or if outputs differ from eager "
               "beyond the tolerance")
    return evidence, trigger


def break_even(chosen: Candidate, base: Candidate) -> str:
    """A remedy that saves compile time but makes steady calls slower pays off only up to some
    number of steady calls: the total time saved over the steady time lost per call."""
    saved = (_median_of(base, "total") or 0) - (_median_of(chosen, "total") or 0)
    lost = (_median_of(chosen, "steady median") or 0) - (_median_of(base, "steady median") or 0)
    if saved <= 0 or lost <= 0:
        return "steady calls are slower"
    return (f"steady calls are slower by {fmt_ns(lost)} each: it pays off for runs of up to about "
            f"{int(saved / lost):,} more steady calls than this one")


def _median_of(c: Candidate, name: str) -> float | None:
    return next((m.median for m in c.metrics if m.name == name), None)
