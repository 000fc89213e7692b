"""The receipt's ``findings`` section: what each break and recompile costs, why, and what to do.

Two axes are kept apart on purpose: *fragmentation* (how many regions a call is cut
into and the eager time between them) and *churn* (how often frames compile again, and what that
costs). A program can be bad on one and fine on the other, and the fixes differ.

Every duration is integer nanoseconds; every ratio a float rounded by ``canonical.round_float``.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .compile_time import CompileTimeSection
from .dispatch import DispatchSection
from .headline import Headline, RankedItem, RecompileCause
from .ledger import Frame, Struct
from .remedy import Remedy

BreakClass = Literal[
    "data_dependent_control_flow",
    "host_side_effect",
    "unsupported_op",
    "python_state_mutation",
    "explicit_boundary",
    "other",
]
"""The four classes of break causes (data-dependent control flow, host-side effects, unsupported
operations, mutation of Python state), plus explicit boundaries and the rest."""

ChurnPattern = Literal["shape", "value", "type", "flag", "stride", "dtype_device", "recompile_limit", "other"]
"""What changed between calls to make a frame compile again, named from its failed guards."""

class Cause(Struct, frozen=True):
    """Why capture broke here: the class, from ``gb_code``/``gb_type``/reason via a table."""

    break_class: BreakClass
    label: str
    """Short, human: ``print``, ``Tensor.item()``, ``torch.compiler.disable``, or the gb_type."""
    host_read: bool
    """The break reads a tensor's value on the host (``.item()``, ``.tolist()``, ``bool(t)``):
    a device synchronisation on an accelerator."""
    gb_code: str | None
    gb_type: str | None
    explanation: str
    """The reason's ``Explanation:`` line, else its first line (normalised text, never dropped)."""
    matched_by: Literal["gb_code", "gb_type", "reason", "none"]


class Where(Struct, frozen=True):
    """The site, and who led into it when it is library code."""

    file: str
    line: int
    function: str
    package: str | None
    """``transformers``, ``torch``, ``contextlib``, ... when the site is library code (an installed
    package or the standard library: :func:`seamscope.model.normalize.package_of`); None for user code."""
    user_frame: Frame | None
    """The innermost user frame (not library code) of the stack: the user's line that led
    into library code. Equal to the site for a break in user code."""
    frame_skipped: bool = False
    """Dynamo could not resume after this break and ran the whole frame eagerly (``BreakSite``)."""


class DeviceBreakCost(Struct, frozen=True):
    """What a break costs on the device, over the basis phase's calls timed there: the device
    seam gap after it (the island's own kernels plus the time the device sat idle, which holds
    the host time no device work hides) and the device-to-host syncs in its island."""

    calls: int
    """Calls of the basis phase timed on the device that crossed the site."""
    gap_per_call_ns: int
    syncs_per_call: float
    host_wait_per_call_ns: int
    """Host time blocked on the device in the island (from its first sync): not the break's
    cost, the previous region's device work it waited for."""
    estimated_ns: int
    """The gaps scaled to every call of the basis phase: what this site is ranked by."""


class BreakCost(Struct, frozen=True):
    """Measured cost of one break site over the calls of ``basis``."""

    basis: Literal["steady", "all"]
    """``steady`` when steady calls were retained; ``all`` (every retained call) otherwise."""
    calls: int
    """Retained calls of the basis the figures below were computed from."""
    calls_crossing: int
    crossings: int
    crossings_per_call: float
    """Mean crossings per basis call."""
    crossings_min: int
    crossings_max: int
    stable: bool
    """Crossed the same number of times in every basis call."""
    island_median_ns: int | None
    island_p90_ns: int | None
    """Eager time after one crossing (until the next region), nearest-rank over crossings."""
    island_ns: int
    """Sum of the islands after this site over the retained basis calls."""
    estimated_ns: int
    """``island_ns`` scaled from retained to all calls of the basis phase (equal when nothing was
    dropped): the ranking key."""
    share: float
    """``island_ns`` over the wall time of the retained basis calls."""
    out_tensors_median: int | None = None
    out_bytes_median: int | None = None
    """Seam traffic: what the region before the crossing hands to eager code (None: not sampled)."""
    all_calls_crossings: int | None = None
    all_calls_island_ns: int | None = None
    device: DeviceBreakCost | msgspec.UnsetType = msgspec.UNSET
    """On a device: the break's device-aware cost (absent on CPU)."""
    """Exact totals over every call, cold included (``Totals.sites``)."""


class ChurnEvidence(Struct, frozen=True):
    """Recompiles of one frame that share a pattern."""

    pattern: ChurnPattern
    frame_name: str
    file: str
    line: int
    compile_ids: list[str]
    recompiles: int
    variants: int
    """Compilations of this frame that produced code."""
    compile_ns: int
    """Compile time of the compilations in ``compile_ids`` (compile-time evidence)."""
    calls: list[int]
    """Calls in which these compilations happened."""
    subjects: list[str]
    """What the guards were on (``x``, ``___stack0``, ``flag``), without the values."""
    guards: list[str]
    """Up to five distinct failed guards, as PyTorch wrote them (normalised)."""
    values_seen: list[str]
    """Expected values the failing guards held (``1.64…``, ``size 4``), up to eight."""
    fallback: bool
    """The frame hit the recompile limit and runs eagerly."""
    fed_by: str | None = None
    """Site id of the break this frame resumes after (a ``.item()`` result passed on)."""
    user_frame: Frame | None = None
    """The frame reports name for it (``Compilation.user_frame``): its compiled frame is a wrapper."""


class Finding(Struct, frozen=True):
    finding_id: str
    """Breaks: the ledger's ``BreakSite.site_id`` (``B`` + 8 hex from file, function, gb code and
    the statement's text). Churn: ``FR`` + 8 hex from the frame's file and name, the pattern and
    the guarded names. Never a line number or a value, so later runs keep it."""
    axis: Literal["fragmentation", "churn"]
    rank: int
    """1 = costliest on its axis."""
    sentence: str
    """The finding in one sentence, with its figures."""
    remedies: list[Remedy]
    site_id: str | None = None
    """The ledger's ``BreakSite.site_id`` (break findings; equal to ``finding_id``)."""
    where: Where | None = None
    cause: Cause | None = None
    cost: BreakCost | None = None
    churn: ChurnEvidence | None = None
    missing: list[str] = []
    """What this finding cannot say, and why."""
    cost_ns: int | None = None
    """The figure this finding was ranked by, in nanoseconds (see ``basis``)."""
    basis: str | None = None
    """What ``cost_ns`` measures: island time over calls, or, without runtime data, the compile
    time of the compilations the break appears in."""


class FragmentationAxis(Struct, frozen=True):
    basis: Literal["steady", "all", "none"]
    calls: int
    break_sites: int
    regions_per_call_median: float | None
    regions_per_call_max: int | None
    island_per_call_median_ns: int | None
    island_share: float | None
    """Island time over wall time of the retained basis calls."""
    crossings_per_call: float | None


class ChurnAxis(Struct, frozen=True):
    frames: int
    compiles: int
    recompiles: int
    variants_max: int
    """Most variants of any one frame."""
    fallbacks: int
    compile_ns: int
    compiling_calls: int
    """Calls in which something compiled (the ``cold`` phase)."""
    compile_share: float | None
    """Compile time inside calls over the wall time of all calls."""


class FindingsSection(Struct, frozen=True):
    fragmentation: FragmentationAxis
    churn: ChurnAxis
    findings: list[Finding]
    """Break findings by measured cost, then churn findings by compile time."""
    ranked_by: str
    missing: list[str] = []
    headline: Headline | None = None
    """Where the run's time went and its costliest finding: what to read first."""
    ranked: list[RankedItem] = []
    """Break findings and recompile causes in one list, by cost in this run."""
    causes: list[RecompileCause] = []
    """Recompiles grouped by the input change that set them off (the churn findings are per frame)."""
    compile_time: CompileTimeSection | None = None
    """Compile time by stage and frame, cache outcomes, and the compile-time findings (ranked too)."""
    dispatch: DispatchSection | None = None
    """What each call pays to look up its frames' cache entries: guards per entry, entries walked,
    the estimated time per call (ranked too); None when nothing compiled."""
