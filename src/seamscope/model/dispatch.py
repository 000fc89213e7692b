"""The findings section's ``dispatch`` part: what each call pays before its graphs run.

On every entry into a compiled frame, Dynamo looks the frame's cache entries up, most recently
used first, and evaluates each entry's guards until one passes (the profiler's
``TorchDynamo Cache Lookup``). A frame with N cache entries checks up to N of them.

Which figures are PyTorch's measurements and which are seamscope's estimates is recorded in the
section itself (``measured``, ``estimated``): the guard counts and guard latencies are PyTorch's
(``compilation_metrics``, read live or from a ``TORCH_TRACE`` log); the entries walked follow from
the order of the calls' region runs; the time per call is an estimate, taken out of the call's
eager islands (never added to its wall time). ``seamscope verify`` recomputes every figure.

Every duration is integer nanoseconds.
"""

from __future__ import annotations

from .ledger import Frame, Struct
from .remedy import Remedy


class DispatchEntry(Struct, frozen=True):
    """One cache entry of a frame (one compilation that produced code)."""

    compile_id: str
    guard_count: int | None
    """PyTorch's ``guard_count`` (measured)."""
    guard_latency_ns: int | None
    """PyTorch's ``guard_latency_us`` (measured once, at compile time, after a cache flush)."""
    guard_checks: dict[str, int]
    """The checks of its guard tree by group (``ingest.guard_groups``), counted from the tree."""
    hits: int
    """Lookups in the retained calls that ended on this entry."""


class DispatchFrame(Struct, frozen=True):
    """A compiled frame and its cache entries, in compile order."""

    frame: int
    """Dynamo's frame id (the ``x`` of ``x/y``)."""
    frame_name: str
    file: str
    line: int
    entries: list[DispatchEntry]
    lookups: int
    """Lookups in the retained calls (entries into the frame whose graph ran)."""
    walked: int
    """Cache entries checked by those lookups (each lookup checks at least one)."""
    walked_max: int
    """Most entries one lookup checked."""
    estimate_ns: int
    """Estimated guard evaluation over those lookups, before any call's cap by its islands."""
    user_frame: Frame | None = None


class CallDispatch(Struct, frozen=True):
    """One retained call's dispatch estimate, beside its regions and islands."""

    index: int
    phase: str
    lookups: int
    walked: int
    raw_ns: int
    """The entries' guard latencies summed over the lookups."""
    estimate_ns: int
    """``raw_ns``, at most the call's island time (dispatch runs between regions)."""
    island_ns: int
    """The call's island time, dispatch included; ``island_ns - estimate_ns`` is the rest."""


class DispatchSection(Struct, frozen=True):
    sentence: str
    """The finding in one sentence, with its figures."""
    measured: list[str]
    """Fields that hold PyTorch's own measurements."""
    estimated: list[str]
    """Fields that are seamscope's estimates."""
    basis: str
    """How the estimate is made, and what it cannot see."""
    frames: list[DispatchFrame]
    calls: list[CallDispatch]
    guard_count: int
    """PyTorch's guard counts summed over every cache entry."""
    guard_checks: dict[str, int]
    """The guard trees' checks by group, summed over every cache entry."""
    steady_calls: int
    """Retained steady calls the per-call figures cover (all retained calls when none is steady)."""
    basis_phase: str
    """``steady``, or ``kept`` when no retained call was steady."""
    per_call_ns: int | None
    """Mean estimate per call over those calls."""
    wall_per_call_ns: int | None
    """Mean wall time of the same calls."""
    share: float | None
    """Their estimates over their wall time."""
    estimate_ns: int
    """The estimate over every call: each phase's retained calls scaled to the phase's calls."""
    capped_calls: int
    """Retained calls whose estimate was cut to their island time."""
    region_per_call_ns: int | None = None
    island_per_call_ns: int | None = None
    """Mean compiled-region and island time of the same calls: the estimate is part of the islands."""
    finding_id: str = "DP"
    remedies: list[Remedy] = []
    missing: list[str] = []
