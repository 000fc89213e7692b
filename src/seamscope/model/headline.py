"""What a reader needs first: where the run's time went, the one costliest finding, and the
recompiles grouped by the input change that set them off.

Three parts of the receipt's ``findings`` section:

- :class:`Headline`: the run's time split (compilation, compiled regions, eager islands,
  seamscope's overhead; in total and per phase) and the finding that costs most, whatever its axis.
- :class:`RankedItem`: one list across axes, every item's cost in nanoseconds of this run (a
  break's island time over every call, a recompile cause's compile time).
- :class:`RecompileCause`: every recompile that one changed input property set off, across all the
  frames it reached and every call in which it recurs; the per-frame churn findings stay beneath it.

Every duration is integer nanoseconds.
"""

from __future__ import annotations

from typing import Literal

from .ledger import Struct
from .remedy import Remedy

CauseFamily = Literal["size", "value", "type", "flag", "dtype_device", "other", "recompile_limit"]
"""What kind of input property changed: a size (shape, stride, or a value guard on a number that
was a size), a Python value, a flag or None-ness, a dtype/device, anything else; or the frame
gave up (recompile limit) with no guard recorded."""


class CauseOccurrence(Struct, frozen=True):
    """One call in which the cause set off recompiles."""

    call_index: int | None
    """None: the recompiles happened outside any observed call."""
    change: str
    """The change as the first (outermost) recompile of the call saw it: ``input_ids dim 1: 100 → 128``."""
    compile_ids: list[str]
    compile_ns: int


class RecompileCause(Struct, frozen=True):
    """Recompiles grouped by the input change that set them off."""

    cause_id: str
    """``RC`` + 8 hex from the family, the root frame's file and name (resume suffix removed) and
    the changed property's name and dim, never a value or a line: later runs keep it."""
    rank: int
    family: CauseFamily
    subject: str
    """The changed property as the guard names it (``input_ids``, ``global_attention_mask``)."""
    dim: int | None
    change: str
    """The first occurrence's change, in the user's words."""
    root_frame: str
    root_file: str
    root_line: int
    occurrences: list[CauseOccurrence]
    calls: list[int]
    frames: list[str]
    """The frames it recompiled, ``name (file:line)``, resume functions included."""
    compile_ids: list[str]
    recompiles: int
    """Compilations with a recompile id (``x/y``, y > 0) in this cause, every status."""
    compile_ns: int
    """Compile time of ``compile_ids``; the causes' sum is the run's recompile compile time."""
    fallbacks: int
    """Of those, compilations that gave up and run eagerly (recompile limit)."""
    new_frame_ids: list[str] = []
    """First compilations of other frames in the same calls, when this is the call's only cause
    (code the change reached for the first time)."""
    new_frame_ns: int = 0
    cost_ns: int = 0
    """``compile_ns + new_frame_ns``: the ranking key."""
    churn_finding_ids: list[str] = []
    """The per-frame churn findings beneath this cause."""
    sentence: str = ""
    remedy: Remedy | None = None
    missing: list[str] = []


class RankedItem(Struct, frozen=True):
    """One entry of the list across axes."""

    rank: int
    item_id: str
    """A break finding's id (``B…``), a recompile cause's (``RC…``), a compile-time finding's
    (``CT…``), the run's dispatch (``DP…``) or, in a merged receipt, a compile skew between ranks (``SK…``)."""
    axis: Literal["fragmentation", "recompile_cause", "compile_time", "compile_skew", "dispatch"]
    cost_ns: int | None
    basis: str
    """What ``cost_ns`` measures, in words."""
    share: float | None
    """``cost_ns`` over the wall time of every call (None without runtime data)."""
    sentence: str


class TimeSplit(Struct, frozen=True):
    """Where the wall time of some calls went; the parts add up to ``wall_ns`` exactly."""

    phase: str
    """``all``, ``cold``, ``steady`` or ``fallback``."""
    calls: int
    wall_ns: int
    compile_ns: int
    region_ns: int
    island_ns: int
    overhead_ns: int


class Headline(Struct, frozen=True):
    sentence: str
    """Where the time went and the costliest finding, in two or three sentences."""
    split: list[TimeSplit]
    """``all`` first, then each phase with calls."""
    compile_outside_ns: int
    """Compile time outside any observed call."""
    outside_region_ns: int
    """Compiled code that ran outside any call (a compiled backward)."""
    top_item_id: str | None
    top_axis: str | None
    top_cost_ns: int | None
    no_steady_calls: bool
    """Every call compiled: the figures are warm-up, no call shows the steady cost."""
    notes: list[str] = []
