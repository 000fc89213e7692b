"""``trials.json``: the baseline and each candidate remedy, run side by side, with verdicts.

Written by ``seamscope try`` next to the receipts of every run it made (``trials/NAME/rep-K``).
Durations are integer nanoseconds; ratios are candidate over the interleaved baseline of the same
repetition.
"""

from __future__ import annotations

from typing import Literal

from .ledger import Struct

Verdict = Literal["faster", "slower", "no measurable change", "noisy", "no effect", "did not remove its target",
                  "changes outputs", "failed", "not tried"]
MetricVerdict = Literal["faster", "slower", "no measurable change", "noisy", "n/a"]
OutputStatus = Literal["equal", "changes outputs", "could not decide", "not checked", "failed"]


class CallTime(Struct, frozen=True, kw_only=True, array_like=True):
    """One observed call of a run: its position, phase (``cold``/``steady``/``fallback``), wall
    time and family (a workload's length label), as ``[index, phase, wall_ns, family]``."""

    index: int
    phase: str
    wall_ns: int
    family: str | None = None


class RunFigures(Struct, frozen=True, kw_only=True):
    """One run of one candidate (a fresh process)."""

    label: str
    """``rep-1``, ``rep-2``... (timed), ``check`` (outputs)."""
    ok: bool
    exit_code: int | None
    """None: killed after the timeout."""
    error: str | None = None
    process_ns: int = 0
    """Wall time of the process, start to exit."""
    script_ns: int | None = None
    """Wall time of the script inside it (without starting Python and importing torch)."""
    receipt: str | None = None
    """Path of its receipt, relative to the output folder."""
    receipt_sha256: str | None = None
    calls: int = 0
    total_ns: int | None = None
    """Wall time of every observed call, compilation included."""
    compile_ns: int | None = None
    steady_calls: int = 0
    steady_median_ns: int | None = None
    steady_p90_ns: int | None = None
    breaks: int | None = None
    recompiles: int | None = None
    fallbacks: int | None = None
    per_call: list[CallTime] = []
    """Every retained call, in order (what the paired comparison reads)."""
    frame_status: dict[str, int] = {}
    """Compilations by ``FRAME (FILE:LINE) STATUS`` (the per-frame comparison's input)."""
    problems: list[str] = []
    """Compilations that failed or fell back: ``0/2 failed: REASON at FILE:LINE``."""
    size_guards: list[str] = []
    """Distinct failed guards on a tensor's size or stride (what a mark candidate left changing)."""
    cause_guards: list[str] = []
    """The guards that explained the run's recompiles (the rule of the findings: each
    recompile's ``cause_guards``), one per distinct pattern and subject, up to twenty: what a value
    or flag candidate (``tensor-scalar``, ``tensor-attr``, ``always-pass``) left changing."""
    cause_counts: dict[str, int] = {}
    """How many recompiles each of ``cause_guards`` explained (by its text): a setting that makes a
    value symbolic leaves one recompile on it (its first value was static), churn leaves several."""
    unmatched_marks: list[str] = []
    """``--mark-dynamic`` sources that matched no source in any compilation."""
    break_sites: list[str] = []
    """The ids of the sites where capture broke (``BreakSite.site_id``: stable across runs)."""
    break_reasons: dict[str, str] = {}
    """Each site's reason, its first line, by site id: a site's id is its place, so this is what
    tells a break that is gone from another break at the same line (a ``print`` made reorderable
    whose argument still reads a tensor's value)."""
    load_avg: float | None = None
    """The machine's 1-minute load average when the run ended (``/proc/loadavg``)."""
    cpus: int | None = None
    """CPUs the trial could use."""
    cpu_ns: int | None = None
    """CPU time (user + system) of the run's process, from its own ``getrusage``."""
    preempted: int | None = None
    """Involuntary context switches of the run's process: times another task took its CPU."""


class Metric(Struct, frozen=True, kw_only=True):
    """One figure over the repetitions: median and spread, and its ratios to the baseline."""

    name: str
    median: float | None
    min: float | None
    max: float | None
    ratios: list[float] = []
    """Per repetition, candidate / baseline of the same repetition."""
    ratio_median: float | None = None
    baseline_spread: float | None = None
    """(max - min) / median of the baseline's figure over the repetitions; for the total, when
    every call is recorded, the noise instead: the median over calls (each weighted by its minimum
    time) of (max - min) / min between repetitions, and ``ratio_median`` the ratio of the sums of
    each call's minimum."""
    verdict: MetricVerdict = "n/a"
    ci_low: float | None = None
    """The ratio's confidence interval (``stats.LEVEL``, Welch's t on the logarithms of the
    per-repetition figures); None with fewer than two repetitions on a side."""
    ci_high: float | None = None


class CallGroup(Struct, frozen=True, kw_only=True):
    """Consecutive calls whose phases differ between the baseline and the candidate (unpaired)."""

    first: int
    last: int
    baseline_phase: str
    phase: str
    ratio: float | None = None
    """Candidate / baseline of the calls' minimum times, when neither side compiled in them."""


PHASE_WORDS = {"cold": "compiled (cold)", "steady": "steady", "fallback": "eager fallback", "absent": "not called"}


def group_text(g: CallGroup) -> str:
    """``calls 1–11: compiled (cold) in the baseline, steady here`` (``call 14: ...: 0.84×``)."""
    calls = f"call {g.first}" if g.first == g.last else f"calls {g.first}–{g.last}"
    text = (f"{calls}: {PHASE_WORDS.get(g.baseline_phase, g.baseline_phase)} in the baseline, "
            f"{PHASE_WORDS.get(g.phase, g.phase)} here")
    return text + (f": {g.ratio:.2f}×" if g.ratio is not None else "")


class Paired(Struct, frozen=True, kw_only=True):
    """Steady calls compared call by call: only calls steady in both, matched by position.

    Each side's time of a call is its minimum over the repetitions: noise (another process,
    a descheduled thread) only ever adds time, so the minimum is the estimate one outlier cannot
    move. The evidence is the per-call ratio candidate / baseline."""

    calls: int
    """Calls steady in both, in every repetition."""
    ratio_median: float | None
    ratio_low: float | None = None
    """The 25th and 75th percentiles of the per-call ratios."""
    ratio_high: float | None = None
    baseline_ns: float | None = None
    """Median over the paired calls of the baseline's per-call minimum."""
    candidate_ns: float | None = None
    rep_ratios: list[float] = []
    """Per repetition, the median over the paired calls of candidate / baseline of that repetition."""
    noise: float | None = None
    """How much the same call varied between repetitions: the median over calls of (max - min) / min,
    both sides pooled; None with one repetition."""
    worst_noise: float | None = None
    """The largest such variation of one call (max / min)."""
    verdict: MetricVerdict = "n/a"
    unpaired: list[CallGroup] = []
    ci_low: float | None = None
    """The confidence interval of the typical paired call's ratio: Welch's t on the logarithms of
    each repetition's median paired call, one figure per repetition and side."""
    ci_high: float | None = None


class OutputCheck(Struct, frozen=True, kw_only=True):
    status: OutputStatus
    vs_baseline: str | None = None
    """``equal``, or the first difference."""
    vs_eager: str | None = None
    calls_compared: int = 0
    max_deviation: float | None = None
    detail: str | None = None


ProbeOutcome = Literal["recompiled", "stale", "raised", "not applicable", "missing"]


class ProbeResult(Struct, frozen=True, kw_only=True):
    """One change a check run made on purpose, the candidate's call against the baseline's."""

    label: str
    """What changed: ``Net.scale: 1.0 → 2.0``, ``dim 0 of x: 4 → 5``, ``dtype of x: float32 → float64``."""
    outcome: ProbeOutcome
    """``recompiled``: its outputs equal the baseline's (it got the recompile it needed, or needed
    none); ``stale``: they differ (it ran a graph made for the old input); ``raised``: it raised
    where the baseline did not (PyTorch refused the recompile); ``not applicable``: the baseline
    raised too (the change is not a valid input); ``missing``: one side made no such call."""
    detail: str | None = None


GuardCheckStatus = Literal["kept every recompile", "broke a recompile", "could not check"]


class GuardCheck(Struct, frozen=True, kw_only=True):
    """An unsafe guard setting's check run against the baseline's (``trials/guard_check.py``)."""

    status: GuardCheckStatus
    probes: list[ProbeResult] = []
    broke: str | None = None
    """What it broke, in words: ``kept a stale graph when Net.scale changed 1.0 → 2.0``."""
    detail: str | None = None
    """Why it could not be checked."""


class Candidate(Struct, frozen=True, kw_only=True):
    name: str
    flags: list[str]
    """The remedy flags of ``seamscope run`` (the seed excepted)."""
    origin: str
    """``baseline``, a finding id, ``user`` (``--candidate``), ``combined``."""
    targets: str
    """What it is meant to fix."""
    target_cost_ns: int = 0
    """Cost of the finding it targets (its order under a budget)."""
    code_change: str
    command: str
    """The ``seamscope run ...`` line that reproduces one run."""
    status: Literal["tried", "not tried", "failed"] = "tried"
    runs: list[RunFigures] = []
    check: RunFigures | None = None
    metrics: list[Metric] = []
    steady_verdict: MetricVerdict = "n/a"
    total_verdict: MetricVerdict = "n/a"
    verdict: Verdict = "no measurable change"
    outputs: OutputCheck = OutputCheck(status="not checked")
    rank: int = 0
    reason: str | None = None
    """Why it failed or was not tried."""
    paired: Paired | None = None
    broke: list[str] = []
    """Compile failures or fallbacks the baseline did not have: never recommended."""
    adds: list[str] = []
    """Breaks or recompiles beyond the baseline's (flagged; recommended only when it beats every
    candidate that adds nothing)."""
    reached: list[str] = []
    """Break sites each of its runs met and no run of the baseline did (``ID: reason``): its change
    let Dynamo trace further, to a break the baseline never reached (said; not held against it)."""
    noise_note: str | None = None
    """Why the timings could not decide (``noisy``)."""
    start: str | None = None
    """How its processes started, where that is the remedy: ``warm-cache-dir`` (the cache directory
    the baseline's first run filled), ``warm-cache-artifacts`` (an empty one, loaded from the
    artifacts that run saved); None: an empty cache directory, as every other run."""
    env: dict[str, str] = {}
    """Environment its processes got beyond the trial's own (``TORCHINDUCTOR_COMPILE_THREADS``)."""
    unsafe: bool = False
    """It drops guards (a PyTorch setting named ``_unsafe``): recommended only when its check run
    kept every recompile (``guard_check``)."""
    guard_check: GuardCheck | None = None
    repetitions: int = 0
    """Timed repetitions it had (more than ``--repeat`` where it was undecided)."""
    trade: str | None = None
    """Compile time saved per process start, steady time per call (paired), and the process
    lifetime (steady calls, restarts for a cache) at which it pays off."""
    patch: str | None = None
    """Its patch file (``OUT/trials/NAME.patch``, from where ``try`` ran): what its runs applied
    (a regional candidate's with ``--calls-of``, so the model's calls are the run's calls). None:
    its runs used its flags (``folded`` says why where a patch could not be made)."""
    diff: str | None = None
    """The patch's text (a unified diff from the project root)."""
    review: str | None = None
    """Why to read the patch before applying it (a rewrite that changes more than compilation)."""
    retried: list[str] = []
    """Each run of it lost to the outside and run again once (``repetition 2 run again: the first
    ended by SIGTERM, not sent by seamscope``): such a run says nothing of the candidate."""


class Overhead(Struct, frozen=True, kw_only=True):
    """What the trials cost beyond the candidates' own scripts."""

    trial_ns: int
    """Wall time of the whole ``try``."""
    timed_process_ns: int
    timed_script_ns: int
    check_process_ns: int
    fingerprint_ns: int
    compare_ns: int
    own_share: float | None
    """(process starts + fingerprints + comparison) / summed script time of the timed runs."""


class Trials(Struct, frozen=True, kw_only=True):
    kind: Literal["seamscope.trials"] = "seamscope.trials"
    script: str
    args: list[str]
    seed: int
    repeat: int
    tolerance: str
    deterministic: bool | None
    """The baseline's two output runs agreed. None: not known, the baseline's row says why (its
    second run is made only when a candidate's outputs differ from its first, so None is the
    usual value where none does)."""
    baseline: Candidate
    candidates: list[Candidate]
    """Ranked: recommended first."""
    chosen: str | None
    decision: str
    rollback_trigger: str | None
    interrupted: bool = False
    max_repeat: int | None = None
    """The most repetitions an undecided candidate could get (``--max-repeat``)."""
    overhead: Overhead | None = None
    folded: list[str] = []
    """Catalogue entries not tried one by one: internal sources folded into a policy candidate,
    candidates over the cap; and candidates whose patch could not be made for the script
    (``no patch: NAME: why``: their runs used the flags)."""
