"""The view-model's limits, colours and plain data classes shared by every view, and the bar
geometry and timeline sampling the timeline and the device lanes share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...model.ledger import (
    Call,
)
from ..units import percent

if TYPE_CHECKING:
    from ...model.ledger import Struct
    from ...model.receipt import Receipt
    from .compile_time import CompileTimeView
    from .device import DeviceLanes
    from .findings import HeadlineView
    from .ranks import RanksView
    from .shapes import ShapesView

MAX_TIMELINE_ROWS = 200
MAX_CHART_COLUMNS = 300
MAX_TOP_FINDINGS = 10
MAX_SECTION_ROWS = 200
CONTEXT_LINES = 2  # lines of source shown above and below a site
MAX_SOURCE_BYTES = 4_000_000  # larger files are not read for context
MAX_GUARDS_SHOWN = 3  # failed guards shown per recompile or tooltip; the receipt keeps every one
MAX_RECOMPILE_ROWS = 200  # recompiles listed in the table; the receipt keeps every one
MIN_BAR_PCT = 0.15  # a bar never narrower than this, so a 1 µs region can still be hovered

#: Colours for compile ids (cycled); islands, compiles and marks have their own.
PALETTE = (
    "#4e79a7",
    "#59a14f",
    "#9c755f",
    "#76b7b2",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#8cd17d",
    "#86bcb6",
    "#a0cbe8",
    "#f1ce63",
    "#d4a6c8",
)
ISLAND_COLOUR = "#e15759"
COMPILE_COLOUR = "#f28e2b"
OVERHEAD_COLOUR = "#bab0ac"

#: Optional receipt sections other analyses add, in the order the report shows them: key, title,
#: and the receipt's field that holds the section.
OPTIONAL_SECTIONS: tuple[tuple[str, str, Callable[[Receipt], Struct | None]], ...] = (
    ("findings", "Findings", lambda r: r.findings),
    ("probe", "Compile probe: evidence, ladder, differential", lambda r: r.probe),
    ("shapes", "Shape policy study", lambda r: r.shapes),
    ("comparison", "Before/after comparison", lambda r: r.comparison),
)


@dataclass(frozen=True)
class Stat:
    label: str
    value: int


@dataclass(frozen=True)
class PhaseRow:
    phase: str
    calls: int
    sampled_calls: int
    wall_ns: int
    region_ns: int
    island_ns: int
    compile_ns: int
    overhead_ns: int
    min_ns: int | None
    median_ns: int | None
    p90_ns: int | None
    regions_per_call: float | None


@dataclass(frozen=True)
class SourceLine:
    number: int
    text: str
    is_site: bool


@dataclass(frozen=True)
class FindingRow:
    """One ranked item: a finding from the receipt's ``findings`` section, or else a break site,
    recompile or fallback ranked by what it measurably cost."""

    rank: int
    kind: str
    headline: str
    cost_ns: int | None
    where: str
    detail: str
    context: list[SourceLine] = field(default_factory=list)
    context_note: str = ""
    item_id: str = ""
    """The finding's id (``B…``, ``FR…``) or the recompile cause's (``RC…``)."""
    basis: str = ""
    """What ``cost_ns`` measures, in words."""
    beneath: list[str] = field(default_factory=list)
    """The per-frame details under a grouped item (the frames and calls a recompile cause covers)."""


@dataclass(frozen=True)
class Bar:
    kind: str  # "region" | "island" | "compile"
    x: float  # percent of the call's wall time
    w: float
    colour: str
    compile_id: str
    duration_ns: int
    tip: str


@dataclass(frozen=True)
class Mark:
    kind: str  # "break" | "guard_miss" | "fallback"
    x: float
    tip: str


@dataclass(frozen=True)
class TimelineRow:
    call_index: int
    phase: str
    outcome: str
    family: str | None
    wall_ns: int
    region_count: int
    island_count: int
    bars: list[Bar]
    marks: list[Mark]
    error: str | None = None


@dataclass(frozen=True)
class Timeline:
    rows: list[TimelineRow]
    retained_calls: int
    total_calls: int
    legend: list[tuple[str, str]]
    note: str


@dataclass(frozen=True)
class Segment:
    kind: str  # "region" | "island" | "compile" | "overhead"
    y: float  # SVG units of a 0..100 box, top down
    h: float
    colour: str


@dataclass(frozen=True)
class ChartColumn:
    """One column of the calls chart: the mean parts of the calls in it, stacked; heights in
    percent of the tallest column."""

    first_call: int
    last_call: int
    calls: int
    x: float  # percent of the chart's width
    w: float
    segments: list[Segment]
    mean_wall_ns: int
    max_wall_ns: int


@dataclass(frozen=True)
class CallsChart:
    columns: list[ChartColumn]
    max_mean_wall_ns: int
    note: str


@dataclass(frozen=True)
class VariantsChart:
    """Cumulative compilations over calls, as steps in a 0..100 SVG box (y top down)."""

    points: str  # an SVG polyline's ``points``
    max_compiles: int
    max_call: int
    note: str


@dataclass(frozen=True)
class RecompileRow:
    compile_id: str
    frame: str
    where: str
    call_index: int | None
    failed_guards: list[str]
    more_guards: int = 0
    """Failed guards of this recompile not shown (Dynamo names one per earlier cache entry)."""


@dataclass(frozen=True)
class FallbackRow:
    compile_id: str
    frame: str
    status: str
    reason: str
    call_index: int | None


@dataclass(frozen=True)
class SiteRow:
    site_id: str
    where: str
    function: str
    gb_code: str
    gb_type: str
    reason: str
    crossings: int | None
    calls_crossing: int | None
    island_after_ns: int | None


@dataclass(frozen=True)
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass(frozen=True)
class OptionalSection:
    """A receipt section another analysis adds; ``present`` False renders "not in this receipt"."""

    key: str
    title: str
    present: bool
    facts: list[tuple[str, str]] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


@dataclass(frozen=True)
class ReportView:
    title: str
    source: str
    command: str
    structure_sha256: str
    receipt_sha256: str
    environment: list[tuple[str, str]]
    has_runtime: bool
    absent: list[str]
    warnings: list[str]
    counts: list[Stat]
    calls_by_phase: list[Stat]
    phases: list[PhaseRow]
    retention_note: str
    top_findings: list[FindingRow]
    timeline: Timeline
    calls_chart: CallsChart
    variants: VariantsChart
    recompiles: list[RecompileRow]
    fallbacks: list[FallbackRow]
    sites: list[SiteRow]
    sections: list[OptionalSection]
    does_not_establish: list[str]
    ranks: RanksView
    shapes: ShapesView
    headline: HeadlineView | None = None
    axis_findings: list[FindingRow] = field(default_factory=list)
    """The per-axis findings (breaks by island time, then recompiles per frame), below the list
    ranked across axes."""
    device_lanes: DeviceLanes | None = None
    """On a device: each timed call's host lane above its device lane (None on CPU)."""
    compile_time: CompileTimeView | None = None
    """Compile time by stage, per frame and for the run, and the cache outcome per layer."""
    run_status: str | None = None
    """How the run ended (``model.ledger.status_text``); None when the receipt records none."""
    run_completed: bool = True
    run_status_note: str = ""
    """For a run that did not complete: what its figures cover."""
    subject: str = ""
    """What ran, in a word (the script's name, ``%%seamscope``): the title without its prefix."""
    more_recompiles: int = 0
    """Recompiles beyond :data:`MAX_RECOMPILE_ROWS`, not listed."""
    watch: Any = None
    """A watched run: what compiled after warm-up (``analyze.watch_view.WatchTimeline``), else None."""



def guard_lines(guards: list[str], prefix: str = "\nfailed guard: ") -> str:
    """A tooltip's failed guards: the first :data:`MAX_GUARDS_SHOWN`, then how many more."""
    text = "".join(prefix + g for g in guards[:MAX_GUARDS_SHOWN])
    if len(guards) > MAX_GUARDS_SHOWN:
        text += f"\n… {len(guards) - MAX_GUARDS_SHOWN} more failed guards (the receipt keeps every one)"
    return text


def bar_pct(part: int, whole: int) -> float:
    """Where ``part`` falls on a bar of ``whole``, in percent of its width (0 when there is no whole)."""
    return round(percent(part, whole) or 0.0, 3)


def pick_timeline_calls(calls: list[Call], limit: int = MAX_TIMELINE_ROWS) -> list[Call]:
    """Every call that was not a plain cache hit first (they explain the run), then cache hits
    evenly spaced over the run; in call order."""
    if len(calls) <= limit:
        return list(calls)
    special = [c for c in calls if c.outcome != "hit"][: limit // 2]
    rest = [c for c in calls if c.outcome == "hit"]
    room = limit - len(special)
    if rest and room > 0:
        step = len(rest) / room
        chosen = [rest[int(k * step)] for k in range(min(room, len(rest)))]
    else:
        chosen = []
    return sorted(special + chosen, key=lambda c: c.index)


def make_bar(kind: str, start: int, dur: int, wall: int, colour: str, cid: str, tip: str) -> Bar:
    x = bar_pct(start, wall)
    w = max(bar_pct(dur, wall), MIN_BAR_PCT)
    w = min(w, max(0.0, 100.0 - x)) if x < 100.0 else MIN_BAR_PCT
    return Bar(kind, min(x, 100.0 - MIN_BAR_PCT), round(w, 3), colour, cid, dur, tip)
