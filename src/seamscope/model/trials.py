"""``trials.json``: the baseline and each candidate remedy, run side by side, with verdicts.

Written by ``seamscope try`` next to the receipts of every run it made (``trials/NAME/rep-K``).
Durations are integer nanoseconds; ratios are candidate over the interleaved baseline of the same
repetition.
"""

from __future__ import annotations

from typing import Literal

from .ledger import Struct

Verdict = Literal["faster", "slower", "no measurable change", "changes outputs", "failed", "not tried"]
MetricVerdict = Literal["faster", "slower", "no measurable change", "n/a"]
OutputStatus = Literal["equal", "changes outputs", "could not decide", "not checked", "failed"]


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
    """(max - min) / median of the baseline's figure over the repetitions."""
    verdict: MetricVerdict = "n/a"


class OutputCheck(Struct, frozen=True, kw_only=True):
    status: OutputStatus
    vs_baseline: str | None = None
    """``equal``, or the first difference."""
    vs_eager: str | None = None
    calls_compared: int = 0
    max_deviation: float | None = None
    detail: str | None = None


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
    """The baseline's two output runs agreed (None: not checked)."""
    baseline: Candidate
    candidates: list[Candidate]
    """Ranked: recommended first."""
    chosen: str | None
    decision: str
    rollback_trigger: str | None
    interrupted: bool = False
    overhead: Overhead | None = None
