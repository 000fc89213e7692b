"""The receipt: a ledger, the figures derived from it, and a decision record, hashed.

``receipt.json`` is what every report, diff, check and verification reads. Analyses add their own
optional section here (``findings``, ``probe``, ``shapes``, ...); a receipt that lacks one still
renders.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .diff import Comparison
from .findings import FindingsSection
from .guard_table import GuardTable
from .ledger import Frame, Ledger, Struct
from .probe import ProbeResult
from .ranks import RanksSection
from .shapes import ShapeStudy

RECEIPT_KIND: Literal["seamscope.receipt"] = "seamscope.receipt"

DOES_NOT_ESTABLISH = [
    "a universal speed-up: only the calls recorded here were measured",
    "stability on inputs not seen in this run (other shapes, dtypes or values may recompile)",
    "behaviour on other backends, devices, PyTorch versions or compile options",
    "production capacity or throughput under concurrent load",
]


class DevicePhaseStats(Struct, frozen=True):
    """Per call timed on the device (means, rounded to integer ns): what the device spent."""

    calls: int
    """Calls of the phase timed on the device."""
    span_per_call_ns: int
    region_per_call_ns: int
    gap_per_call_ns: int
    """Device seam gaps: the islands' own kernels plus the time the device sat idle."""
    host_wait_per_call_ns: int
    syncs_per_call: float
    wall_per_call_ns: int
    """Host wall time of the same calls."""


class PhaseStats(Struct, frozen=True):
    """Timing distribution of one phase; totals exact, quantiles over the retained calls."""

    phase: str
    calls: int
    wall_ns: int
    region_ns: int
    island_ns: int
    compile_ns: int
    overhead_ns: int
    sampled_calls: int
    """How many calls the quantiles below were computed from (all, unless detail was bounded)."""
    min_ns: int | None = None
    median_ns: int | None = None
    p90_ns: int | None = None
    regions_per_call_median: float | None = None
    device: DevicePhaseStats | msgspec.UnsetType = msgspec.UNSET
    """Device time of the phase's calls timed on the device (absent on CPU)."""


class SiteSummary(Struct, frozen=True):
    """A break site (docs/conventions.md, "Counts"), with how often it was crossed."""

    site_id: str
    file: str
    line: int
    function: str
    gb_code: str | None
    gb_type: str | None
    reason: str
    user_stack: list[Frame]
    compile_ids: list[str]
    crossings: int | None
    """Crossings over all calls; None when the ledger has no runtime data (imported logs)."""
    calls_crossing: int | None
    island_after_ns: int | None
    scope: str = ""
    """The enclosing function's qualified name (``BreakSite.scope``)."""
    statement: str = ""
    frame_skipped: bool = False
    """Dynamo could not resume after this break and ran the whole frame eagerly."""


class RecompileSummary(Struct, frozen=True):
    """A compile id ``x/y`` with ``y > 0``: every attempt, also one that hit the recompile limit or
    failed (``status``), as ``TORCH_LOGS=recompiles`` lists them."""

    compile_id: str
    frame_name: str
    file: str
    line: int
    failed_guards: list[str]
    call_index: int | None
    status: str = "ok"
    user_frame: Frame | None = None
    """The frame reports name for it (``Compilation.user_frame``): its compiled frame is a wrapper."""


class FallbackSummary(Struct, frozen=True):
    compile_id: str
    frame_name: str
    status: str
    reason: str
    call_index: int | None
    user_frame: Frame | None = None
    """The frame reports name for it (``Compilation.user_frame``): its compiled frame is a wrapper."""


class Summary(Struct, frozen=True):
    """The counts of docs/conventions.md, each equal to one PyTorch source of truth."""

    call_count: int
    compile_count: int
    recompile_count: int
    graph_count: int
    fallback_count: int
    break_site_count: int
    break_sites: list[SiteSummary]
    recompiles: list[RecompileSummary]
    fallbacks: list[FallbackSummary]
    calls_by_phase: dict[str, int]
    phases: list[PhaseStats]
    compile_ns: int
    """Sum of observed compile durations (compile-time evidence, never runtime)."""
    restart_count: int
    has_runtime: bool
    empty_frame_count: int = 0
    """Frame compilations that produced code but no graph (``status`` ok, ``graph_count`` 0): their
    runs are not compiled regions here, though ``torch.profiler`` marks each as one."""


class Decision(Struct, frozen=True):
    """The decision record: what was chosen, when to roll back, what is not shown."""

    note: str | None = None
    intervention: str | None = None
    rollback_trigger: str | None = None
    warmup_policy: str = "cold = calls in which something compiled; steady = cache hits only"
    call_families: dict[str, int] = {}
    """Calls per input family (``Call.family``) that the figures cover."""
    tolerance: str | None = None
    """The correctness tolerance the outputs were compared with, when they were."""
    does_not_establish: list[str] = msgspec.field(default_factory=lambda: list(DOES_NOT_ESTABLISH))


class Receipt(Struct, frozen=True):
    schema_version: int
    kind: Literal["seamscope.receipt"]
    ledger: Ledger
    summary: Summary
    decision: Decision
    structure_sha256: str
    receipt_sha256: str
    probe: ProbeResult | None = None
    comparison: Comparison | None = None
    findings: FindingsSection | None = None
    ranks: RanksSection | None = None
    shapes: ShapeStudy | None = None
    guard_table: GuardTable | None = None
    """In ``receipt.json`` only: each failed-guard text once, referred to by the compilations and
    recompile summaries, whose ``failed_guards`` are then empty on disk (readers expand it back;
    see :mod:`seamscope.model.guard_table`). None in memory and in a receipt without recompiles."""
