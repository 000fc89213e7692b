"""The receipt's ``comparison`` section: a before/after diff, kept with the candidate receipt.

A before/after comparison keeps both receipts together. ``seamscope diff BEFORE AFTER --out DIR``
writes the candidate (AFTER) receipt with this section attached, so that the comparison itself is
hashed and ``seamscope verify`` can recompute it: the candidate side from the receipt's own raw
calls, the baseline side from ``--against BEFORE``. Every side carries its sample count, total and
mean, so a mean divided by some other, hidden count is visible as an inconsistent number.
"""

from __future__ import annotations

from typing import Literal

from .ledger import Struct

Change = Literal["added", "removed", "kept"]


class PhaseSide(Struct, frozen=True):
    """One phase of one receipt, as compared."""

    calls: int
    """The sample count: calls in this phase."""
    sampled_calls: int
    """Calls whose detail was kept (the quantiles come from these)."""
    wall_ns: int
    """Total wall time over the phase's calls."""
    mean_ns: int | None
    """``wall_ns / calls``, rounded to the nearest nanosecond; None without calls."""
    median_ns: int | None
    p90_ns: int | None
    island_ns: int
    compile_ns: int


class PhaseDelta(Struct, frozen=True):
    phase: str
    before: PhaseSide
    after: PhaseSide
    median_pct: float | None
    """(after - before) / before in percent; None when a side has no median or before is 0."""
    p90_pct: float | None
    mean_pct: float | None


class SiteChange(Struct, frozen=True):
    """A break site matched by its stable id (robust to line shifts)."""

    site_id: str
    change: Change
    file: str
    line: int
    function: str
    gb_code: str | None
    reason: str
    crossings_before: int | None
    crossings_after: int | None


class RecompileChange(Struct, frozen=True):
    """Recompiles matched by frame name and guard text with numbers masked."""

    key: str
    change: Change
    frame_name: str
    failed_guards: list[str]
    count_before: int
    count_after: int


class CauseChange(Struct, frozen=True):
    """A recompile cause (the recompiles one input change set off) matched by its stable id."""

    cause_id: str
    change: Change
    family: str
    description: str
    """The change in the user's words (``input_ids dim 1: 100 → 128``), from the side that has it."""
    recompiles_before: int
    recompiles_after: int
    compile_ns_before: int
    compile_ns_after: int


class SettingChange(Struct, frozen=True):
    """One thing of the run's setting that differs between the sides (a version, the backend, a
    Dynamo setting); None where a side does not record it."""

    field: str
    """``torch``, ``python``, ``transformers``, ``backend``, ``device``, ``schema``,
    ``dynamo.NAME``, ..."""
    before: str | None
    after: str | None


class TotalRow(Struct, frozen=True):
    """One total side by side (the first run of each side where there are several)."""

    name: str
    """``calls``, ``compiles``, ``recompiles``, ``fallbacks``, ``graphs``, ``break sites``,
    ``compile time``, ``compile time: dynamo`` (one row per stage), ``steady median``."""
    unit: Literal["count", "ns"]
    before: int | None
    after: int | None


class FrameCompileChange(Struct, frozen=True):
    """Compile time of one frame (matched by file and function) on each side."""

    frame: str
    compilations_before: int
    compilations_after: int
    compile_ns_before: int
    compile_ns_after: int


class TimingVerdict(Struct, frozen=True):
    """One timing figure judged over the runs of each side by the stated test (Welch's t interval
    on the logarithms, as ``seamscope try`` judges its candidates); with one run a side there is no
    variation to judge, and ``verdict`` says so."""

    figure: str
    """``total``, ``steady median``, ``compile time``."""
    verdict: str
    """``faster``, ``slower``, ``no measurable change``, ``noisy``, ``one run each: not a verdict``,
    or ``not recorded``."""
    ratio: float | None
    """After / before of the geometric means over the runs."""
    low: float | None
    high: float | None
    runs_before: int
    runs_after: int


class Comparison(Struct, frozen=True):
    before_receipt_sha256: str
    after_receipt_sha256: str
    """The candidate receipt's hash computed without this section."""
    before_structure_sha256: str
    after_structure_sha256: str
    before_input_trace_sha256: str | None
    after_input_trace_sha256: str | None
    calls_before: int
    calls_after: int
    families_before: dict[str, int]
    families_after: dict[str, int]
    """Calls per input family (empty when no call was labelled or detail was dropped)."""
    total_before_ns: int
    """Wall time over every compared call, every phase (warmup included)."""
    total_after_ns: int
    phases: list[PhaseDelta]
    sites: list[SiteChange]
    recompiles: list[RecompileChange]
    cold_extra_ns: int | None
    """Candidate cold total minus baseline cold total (what a fresh worker pays once more)."""
    steady_saving_ns: int | None
    """Baseline steady median minus candidate steady median (what each later call saves)."""
    break_even_calls: int | None
    """Calls after which the steady saving repays the cold extra; None when it never or always
    does."""
    verdict: list[str]
    forced: bool = False
    forced_over: list[str] = []
    """The refusals that ``--force`` overrode, said plainly."""
    notes: list[str] = []
    causes: list[CauseChange] = []
    """Recompiles grouped by cause on each side: a fix that removes one cause is one removed row."""
    setting: list[SettingChange] = []
    """What differs in the setting (versions, backend, device, schema, Dynamo settings)."""
    totals: list[TotalRow] = []
    frames: list[FrameCompileChange] = []
    """Frames whose compile time or compilation count changed, largest change first."""
    runs_before: int = 1
    """Receipts (runs) on each side; timing verdicts need two or more a side."""
    runs_after: int = 1
    timing: list[TimingVerdict] = []
