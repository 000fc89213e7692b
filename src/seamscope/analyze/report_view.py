"""The report's view-model: every figure the HTML and Markdown reports show, derived from a receipt.

Renderers only format what is here (after memray's ``Reporter.from_snapshot``): tests compare this
plain value by equality, and the templates stay free of arithmetic. Geometry (bar positions in
percent of a call's wall time, chart columns) is computed here too, so that what the browser draws
is what a test can check.

Size: the timeline shows at most :data:`MAX_TIMELINE_ROWS` calls (every call that compiled, fell
back or failed first, then evenly spaced cache hits) and the calls chart at most
:data:`MAX_CHART_COLUMNS` columns, so 10,000 calls stay a few hundred kB. Totals always come from
the ledger's exact accumulators, never from the shown sample.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from ..model.ledger import (
    BreakEvent,
    Call,
    CompileEvent,
    FallbackEvent,
    GuardMissEvent,
    IslandEvent,
    RegionEvent,
    compile_frame_index,
)
from ..model.receipt import Receipt
from .units import counted, fmt_ns, noun

MAX_TIMELINE_ROWS = 200
MAX_CHART_COLUMNS = 300
MAX_TOP_FINDINGS = 10
MAX_SECTION_ROWS = 200
CONTEXT_LINES = 2  # lines of source shown above and below a site
MAX_SOURCE_BYTES = 4_000_000  # larger files are not read for context
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

#: Optional receipt sections other analyses add, in the order the report shows them.
OPTIONAL_SECTIONS = (
    ("findings", "Findings"),
    ("probe", "Compile probe: evidence, ladder, differential"),
    ("shapes", "Shape policy study"),
    ("comparison", "Before/after comparison"),
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


# --- building ------------------------------------------------------------------------------------


def build_view(receipt: Receipt, source_root: str | None = None) -> ReportView:
    """The whole view; ``source_root`` is where relative source paths are looked up (cwd)."""
    led = receipt.ledger
    s = receipt.summary
    root = source_root if source_root is not None else os.getcwd()
    colours = compile_colours(receipt)
    env = led.environment
    env_rows = [
        ("seamscope", env.seamscope_version),
        ("python", env.python_version),
        ("torch", env.torch_version or "–"),
        ("platform", env.platform or "–"),
        ("device", env.device),
        ("backend", env.backend or "–"),
    ]
    env_rows += [(f"option {k}", v) for k, v in sorted(env.compile_options.items())]
    env_rows += [(f"dynamo {k}", v) for k, v in sorted(env.dynamo_config.items())]
    counts = [
        Stat(noun(s.call_count, "call"), s.call_count),
        Stat(noun(s.compile_count, "compile"), s.compile_count),
        Stat(noun(s.recompile_count, "recompile"), s.recompile_count),
        Stat(noun(s.graph_count, "graph"), s.graph_count),
        Stat(noun(s.break_site_count, "break site"), s.break_site_count),
        Stat(noun(s.fallback_count, "fallback"), s.fallback_count),
    ]
    ret = led.retention
    retention_note = ""
    if ret.dropped:
        retention_note = (
            f"per-call detail kept for {ret.retained} of {counted(s.call_count, 'call')} (the first "
            f"{ret.first}, then every {ret.stride}th); totals are exact"
        )
    hl_parts = headline_parts(receipt, root)
    ranked = hl_parts.pop("top_findings", None)
    return ReportView(
        title=_title(receipt),
        source=led.run.source,
        command=" ".join(led.run.command),
        structure_sha256=receipt.structure_sha256,
        receipt_sha256=receipt.receipt_sha256,
        environment=env_rows,
        has_runtime=s.has_runtime,
        absent=list(led.run.absent),
        warnings=list(led.run.warnings),
        counts=counts,
        calls_by_phase=[Stat(k, v) for k, v in s.calls_by_phase.items()],
        phases=[
            PhaseRow(
                phase=p.phase,
                calls=p.calls,
                sampled_calls=p.sampled_calls,
                wall_ns=p.wall_ns,
                region_ns=p.region_ns,
                island_ns=p.island_ns,
                compile_ns=p.compile_ns,
                overhead_ns=p.overhead_ns,
                min_ns=p.min_ns,
                median_ns=p.median_ns,
                p90_ns=p.p90_ns,
                regions_per_call=p.regions_per_call_median,
            )
            for p in s.phases
            if p.calls
        ],
        retention_note=retention_note,
        top_findings=ranked or top_findings(receipt, root),
        timeline=build_timeline(receipt, colours),
        device_lanes=build_device_lanes(receipt, colours),
        calls_chart=build_calls_chart(led.calls),
        variants=build_variants(receipt),
        recompiles=[
            RecompileRow(
                compile_id=r.compile_id,
                frame=r.frame_name,
                where=f"{r.file}:{r.line}",
                call_index=r.call_index,
                failed_guards=list(r.failed_guards),
            )
            for r in s.recompiles
        ],
        fallbacks=[
            FallbackRow(
                compile_id=f.compile_id,
                frame=f.frame_name,
                status=f.status,
                reason=f.reason,
                call_index=f.call_index,
            )
            for f in s.fallbacks
        ],
        sites=[
            SiteRow(
                site_id=b.site_id,
                where=f"{b.file}:{b.line}",
                function=b.function,
                gb_code=b.gb_code or "–",
                gb_type=b.gb_type or "–",
                reason=b.reason,
                crossings=b.crossings,
                calls_crossing=b.calls_crossing,
                island_after_ns=b.island_after_ns,
            )
            for b in s.break_sites
        ],
        sections=[optional_section(receipt, key, title) for key, title in OPTIONAL_SECTIONS]
        + [memory_section(receipt)],
        does_not_establish=list(receipt.decision.does_not_establish),
        ranks=build_ranks(receipt),
        shapes=build_shapes(receipt),
        **hl_parts,
    )


def _title(receipt: Receipt) -> str:
    cmd = receipt.ledger.run.command
    what = os.path.basename(cmd[0]) if cmd else receipt.ledger.run.source
    return f"seamscope report: {what}"


def compile_colours(receipt: Receipt) -> dict[str, str]:
    """A colour per compile id, in compile-id order, so the same graph has the same colour
    everywhere in the report."""
    ids = {c.compile_id for c in receipt.ledger.compilations}
    for call in receipt.ledger.calls:
        ids.update(e.compile_id for e in call.events if isinstance(e, RegionEvent))
    ordered = sorted(ids, key=lambda i: (compile_frame_index(i), i))
    return {cid: PALETTE[k % len(PALETTE)] for k, cid in enumerate(ordered)}


def _pct(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 3) if whole > 0 else 0.0


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


def build_timeline(receipt: Receipt, colours: dict[str, str]) -> Timeline:
    led = receipt.ledger
    sites = {b.site_id: b for b in led.break_sites}
    comps = {c.compile_id: c for c in led.compilations}
    shown = pick_timeline_calls(led.calls)
    rows = []
    for call in shown:
        wall = call.wall_ns
        bars: list[Bar] = []
        marks: list[Mark] = []
        last_site: str | None = None
        for e in call.events:
            if isinstance(e, RegionEvent):
                comp = comps.get(e.compile_id)
                tip = f"region {e.compile_id} graph {e.graph_index}: {_ns(e.duration_ns)}"
                if comp is not None:
                    tip += f"\n{comp.frame_name} ({comp.file}:{comp.line})"
                    if comp.failed_guards:
                        tip += "\ncompiled because a guard failed: " + comp.failed_guards[0]
                    own = sites.get(comp.own_break_site_id or "")
                    if own is not None:
                        tip += f"\nends at break {own.site_id} {own.file}:{own.line}: {own.reason}"
                bars.append(_bar("region", e.start_ns, e.duration_ns, wall, colours.get(e.compile_id, PALETTE[0]), e.compile_id, tip))
            elif isinstance(e, IslandEvent):
                tip = f"eager island: {_ns(e.duration_ns)}"
                site = sites.get(e.after_site_id or "")
                if site is not None:
                    tip += f"\nafter break {site.site_id} at {site.file}:{site.line} ({site.function})"
                    tip += f"\nreason: {site.reason}"
                bars.append(_bar("island", e.start_ns, e.duration_ns, wall, ISLAND_COLOUR, "", tip))
            elif isinstance(e, CompileEvent):
                comp = comps.get(e.compile_id)
                tip = f"compile {e.compile_id}: {_ns(e.duration_ns)}"
                if comp is not None:
                    tip += f"\n{comp.frame_name} ({comp.file}:{comp.line}), status {comp.status}"
                    for g in comp.failed_guards:
                        tip += f"\nfailed guard: {g}"
                bars.append(_bar("compile", e.start_ns, e.duration_ns, wall, COMPILE_COLOUR, e.compile_id, tip))
            elif isinstance(e, BreakEvent):
                site = sites.get(e.site_id)
                tip = f"break {e.site_id} crossed"
                if site is not None:
                    tip += f" at {site.file}:{site.line}: {site.reason}"
                if e.site_id != last_site:
                    marks.append(Mark("break", _pct(e.at_ns, wall), tip))
                last_site = e.site_id
            elif isinstance(e, GuardMissEvent):
                comp = comps.get(e.compile_id)
                guards = comp.failed_guards if comp is not None else []
                tip = f"guard miss → {e.compile_id}" + "".join(f"\nfailed guard: {g}" for g in guards)
                marks.append(Mark("guard_miss", _pct(e.at_ns, wall), tip))
            elif isinstance(e, FallbackEvent):
                marks.append(Mark("fallback", _pct(e.at_ns, wall), f"fallback {e.compile_id}: {e.reason}"))
        rows.append(
            TimelineRow(
                call_index=call.index,
                phase=call.phase,
                outcome=call.outcome,
                family=call.family,
                wall_ns=wall,
                region_count=sum(1 for b in bars if b.kind == "region"),
                island_count=sum(1 for b in bars if b.kind == "island"),
                bars=bars,
                marks=marks,
                error=call.error,
            )
        )
    note = f"{len(shown)} of {len(led.calls)} recorded calls shown"
    if len(led.calls) < led.totals.calls:
        note += f" ({led.totals.calls} calls in the run)"
    if len(shown) < len(led.calls):
        note += "; every call that compiled, fell back or failed comes first, then cache hits evenly spaced"
    used = {b.compile_id for r in rows for b in r.bars if b.kind == "region"}
    legend = [(cid, col) for cid, col in colours.items() if cid in used]
    return Timeline(rows=rows, retained_calls=len(led.calls), total_calls=led.totals.calls, legend=legend, note=note)


def _bar(kind: str, start: int, dur: int, wall: int, colour: str, cid: str, tip: str) -> Bar:
    x = _pct(start, wall)
    w = max(_pct(dur, wall), MIN_BAR_PCT)
    w = min(w, max(0.0, 100.0 - x)) if x < 100.0 else MIN_BAR_PCT
    return Bar(kind, min(x, 100.0 - MIN_BAR_PCT), round(w, 3), colour, cid, dur, tip)


def _ns(ns: int) -> str:
    return fmt_ns(ns)


def _parts(call: Call) -> tuple[int, int, int]:
    region = island = comp = 0
    for e in call.events:
        if isinstance(e, RegionEvent):
            region += e.duration_ns
        elif isinstance(e, IslandEvent):
            island += e.duration_ns
        elif isinstance(e, CompileEvent):
            comp += e.duration_ns
    return region, island, comp


def build_calls_chart(calls: list[Call], limit: int = MAX_CHART_COLUMNS) -> CallsChart:
    """Wall time per recorded call, split into regions, islands, compile and overhead; at most
    ``limit`` columns (consecutive calls averaged, the column's max wall kept for its tooltip)."""
    if not calls:
        return CallsChart([], 0, "no calls recorded")
    per = -(-len(calls) // limit)
    raw = []
    for k in range(0, len(calls), per):
        group = calls[k : k + per]
        n = len(group)
        r = i = c = o = 0
        for call in group:
            pr, pi, pc = _parts(call)
            r += pr
            i += pi
            c += pc
            o += call.overhead_ns
        raw.append((group[0].index, group[-1].index, n, r // n, i // n, c // n, o // n, max(x.wall_ns for x in group)))
    top = max(sum(t[3:7]) for t in raw) or 1
    width = round(100.0 / len(raw), 4)
    cols = []
    for k, (a, b, n, r, i, c, o, mx) in enumerate(raw):
        segs = []
        y = 100.0
        for kind, v, colour in (
            ("region", r, PALETTE[0]),
            ("island", i, ISLAND_COLOUR),
            ("compile", c, COMPILE_COLOUR),
            ("overhead", o, OVERHEAD_COLOUR),
        ):
            h = _pct(v, top)
            if h > 0:
                y = round(y - h, 3)
                segs.append(Segment(kind, y, h, colour))
        cols.append(ChartColumn(a, b, n, round(k * width, 4), width, segs, r + i + c + o, mx))
    note = f"{len(calls)} recorded calls"
    if per > 1:
        note += f", {per} consecutive calls averaged per column"
    return CallsChart(cols, top, note)


def build_variants(receipt: Receipt) -> VariantsChart:
    """Compiled variants over calls: how many compilations had happened by each call."""
    comps = [c for c in receipt.ledger.compilations if c.status == "ok"]
    total_calls = receipt.ledger.totals.calls
    if not comps:
        return VariantsChart("", 0, max(total_calls - 1, 0), "no compilations")
    placed = sorted(c.call_index for c in comps if c.call_index is not None)
    unplaced = len(comps) - len(placed)
    max_call = max([total_calls - 1, *placed, 1])
    pts: list[tuple[float, float]] = []
    n = unplaced
    total = len(comps)
    pts.append((0.0, _pct(n, total)))
    for idx in placed:
        x = _pct(idx, max_call)
        pts.append((x, _pct(n, total)))
        n += 1
        pts.append((x, _pct(n, total)))
    pts.append((100.0, _pct(n, total)))
    points = " ".join(f"{x:g},{round(100.0 - y, 3):g}" for x, y in pts)
    note = f"{counted(total, 'compilation')} over {counted(total_calls, 'call')}"
    if unplaced:
        note += f"; {unplaced} happened outside any observed call (counted from the start)"
    return VariantsChart(points, total, max_call, note)


# --- findings ------------------------------------------------------------------------------------


def read_context(file: str, line: int, root: str, around: int = CONTEXT_LINES) -> tuple[list[SourceLine], str]:
    """A few lines of the user's source around ``line``, when the file is readable from here."""
    if not file or line <= 0 or file.startswith("<"):
        return [], "source not available"
    candidates = [file] if os.path.isabs(file) else [os.path.join(root, file)]
    for path in candidates:
        try:
            if os.path.getsize(path) > MAX_SOURCE_BYTES:
                return [], "source file too large to show"
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except (OSError, ValueError):  # ValueError: a NUL in a recorded file name
            continue
        if line > len(lines):
            return [], "source file is shorter than the recorded line (changed since the run?)"
        lo, hi = max(1, line - around), min(len(lines), line + around)
        return [SourceLine(n, lines[n - 1], n == line) for n in range(lo, hi + 1)], ""
    return [], f"source not readable here ({file})"


def top_findings(receipt: Receipt, root: str, limit: int = MAX_TOP_FINDINGS) -> list[FindingRow]:
    """The receipt's own findings when it has them (already ranked by their analysis); otherwise
    break sites by the island time after them, recompiles and fallbacks by compile time."""
    section = getattr(receipt, "findings", None)
    if section is not None:
        items = _finding_items(section)
        rows = []
        for k, item in enumerate(items[:limit], 1):
            where = _dict(item.get("where")) or item
            churn = _dict(item.get("churn"))
            cost_d = _dict(item.get("cost"))
            file = str(where.get("file") or churn.get("file") or "")
            line_v = where.get("line") if file == where.get("file") else churn.get("line")
            line = line_v if isinstance(line_v, int) else 0
            ctx, note = read_context(file, line, root) if file else ([], "")
            cost = next(
                (d[c] for d, c in ((cost_d, "estimated_ns"), (churn, "compile_ns"), (item, "cost_ns")) if isinstance(d.get(c), int)),
                None,
            )
            headline = next((str(item[h]) for h in ("sentence", "summary", "headline", "title", "message") if item.get(h)), str(item.get("finding_id", "finding")))
            remedies = item.get("remedies") or []
            remedies = remedies if isinstance(remedies, list) else []
            detail = "; ".join(str(r.get("text", "")) for r in remedies if isinstance(r, dict) and r.get("text"))
            cause = _dict(item.get("cause"))
            kind = str(cause.get("label") or churn.get("pattern") or item.get("axis") or "finding")
            rows.append(
                FindingRow(
                    rank=k,
                    kind=kind,
                    headline=headline,
                    cost_ns=cost,
                    where=f"{file}:{line}" if file else "",
                    detail=detail,
                    context=ctx,
                    context_note=note,
                )
            )
        return rows
    comps = {c.compile_id: c for c in receipt.ledger.compilations}
    cands: list[tuple[int, int, FindingRow]] = []
    for b in receipt.summary.break_sites:
        ctx, note = read_context(b.file, b.line, root)
        cost = b.island_after_ns
        crossings = "" if b.crossings is None else f", crossed {b.crossings}× in {b.calls_crossing} calls"
        cands.append(
            (
                cost or 0,
                0,
                FindingRow(
                    rank=0,
                    kind="break",
                    headline=f"break {b.site_id} at {b.file}:{b.line} ({b.gb_type or b.gb_code or 'graph break'}){crossings}",
                    cost_ns=cost,
                    where=f"{b.file}:{b.line}",
                    detail=first_line(b.reason),
                    context=ctx,
                    context_note=note,
                ),
            )
        )
    for r in receipt.summary.recompiles:
        c = comps.get(r.compile_id)
        cost = c.duration_ns if c is not None else None
        ctx, note = read_context(r.file, r.line, root)
        cands.append(
            (
                cost or 0,
                1,
                FindingRow(
                    rank=0,
                    kind="recompile",
                    headline=f"recompile {r.compile_id} of {r.frame_name}" + ("" if r.call_index is None else f" in call {r.call_index}"),
                    cost_ns=cost,
                    where=f"{r.file}:{r.line}",
                    detail="failed guard: " + (first_line(r.failed_guards[0]) if r.failed_guards else "not recorded"),
                    context=ctx,
                    context_note=note,
                ),
            )
        )
    for f in receipt.summary.fallbacks:
        c = comps.get(f.compile_id)
        cost = c.duration_ns if c is not None else None
        cands.append(
            (
                cost or 0,
                2,
                FindingRow(
                    rank=0,
                    kind="fallback",
                    headline=f"fallback {f.compile_id} of {f.frame_name} ({f.status})",
                    cost_ns=cost,
                    where=f"{c.file}:{c.line}" if c is not None else "",
                    detail=f.reason,
                ),
            )
        )
    cands.sort(key=lambda t: (-t[0], t[1]))
    return [replace(row, rank=k) for k, (_, _, row) in enumerate(cands[:limit], 1)]


# --- the headline and the list ranked across axes ------------------------------------------------


@dataclass(frozen=True)
class SplitRow:
    phase: str
    calls: int
    wall_ns: int
    parts: list[tuple[str, int, float]]
    """(part, ns, percent of the row's wall time): compilation, compiled regions, eager islands,
    seamscope's overhead."""


@dataclass(frozen=True)
class HeadlineView:
    sentence: str
    split: list[SplitRow]
    notes: list[str]
    no_steady_calls: bool
    top_item_id: str | None


def headline_parts(receipt: Receipt, root: str) -> dict[str, Any]:
    """``headline``, ``top_findings`` (ranked across axes) and ``axis_findings`` for a receipt
    whose findings have a headline; nothing for an older receipt (its findings stay per axis)."""
    section = getattr(receipt, "findings", None)
    hl = getattr(section, "headline", None)
    if section is None or hl is None:
        return {}
    split = [
        SplitRow(
            phase=t.phase,
            calls=t.calls,
            wall_ns=t.wall_ns,
            parts=[
                (name, ns, _pct(ns, t.wall_ns))
                for name, ns in (
                    ("compilation", t.compile_ns),
                    ("compiled regions", t.region_ns),
                    ("eager islands", t.island_ns),
                    ("seamscope overhead", t.overhead_ns),
                )
            ],
        )
        for t in hl.split
    ]
    view = HeadlineView(
        sentence=hl.sentence, split=split, notes=list(hl.notes), no_steady_calls=hl.no_steady_calls,
        top_item_id=hl.top_item_id,
    )
    return {
        "headline": view,
        "top_findings": ranked_rows(receipt, root),
        "axis_findings": top_findings(receipt, root),
    }


def ranked_rows(receipt: Receipt, root: str, limit: int = MAX_TOP_FINDINGS) -> list[FindingRow]:
    """The receipt's list ranked across axes: breaks and recompile causes by time in this run."""
    section = receipt.findings
    if section is None:
        return []
    breaks = {f.finding_id: f for f in section.findings}
    causes = {c.cause_id: c for c in section.causes}
    rows: list[FindingRow] = []
    for item in section.ranked[:limit]:
        beneath: list[str] = []
        if item.axis == "recompile_cause" and item.item_id in causes:
            c = causes[item.item_id]
            kind = "recompiles"
            file, line = c.root_file, c.root_line
            detail = c.remedy.text if c.remedy is not None else ""
            beneath = [
                f"call {'–' if o.call_index is None else o.call_index}: {o.change}, "
                f"{len(o.compile_ids)} compilation{'s' if len(o.compile_ids) != 1 else ''} "
                f"({', '.join(o.compile_ids[:12])}{', …' if len(o.compile_ids) > 12 else ''}), {_ns(o.compile_ns)}"
                for o in c.occurrences
            ]
            beneath.append("frames: " + "; ".join(c.frames[:12]) + ("; …" if len(c.frames) > 12 else ""))
        else:
            f = breaks.get(item.item_id)
            kind = "break"
            file = f.where.file if f is not None and f.where is not None else ""
            line = f.where.line if f is not None and f.where is not None else 0
            detail = "; ".join(r.text for r in f.remedies) if f is not None else ""
        ctx, note = read_context(file, line, root) if file else ([], "")
        rows.append(
            FindingRow(
                rank=item.rank,
                kind=kind,
                headline=item.sentence,
                cost_ns=item.cost_ns,
                where=f"{file}:{line}" if file else "",
                detail=detail,
                context=ctx,
                context_note=note,
                item_id=item.item_id,
                basis=item.basis,
                beneath=beneath,
            )
        )
    return rows


def first_line(text: str, limit: int = 240) -> str:
    """The first non-empty line (the full text stays in the sites and recompiles tables)."""
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _finding_items(section: Any) -> list[dict[str, Any]]:
    data = to_plain(section)
    if isinstance(data, dict):
        for key in ("findings", "items", "ranked"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
    if isinstance(data, list):
        return [d for d in data if isinstance(d, dict)]
    return []


# --- optional sections, rendered from their data whatever their exact type ------------------------


def to_plain(obj: Any) -> Any:
    if isinstance(obj, (dict, list, str, int, float, bool)) or obj is None:
        return obj
    try:
        return msgspec.to_builtins(obj)
    except TypeError:
        if hasattr(obj, "__dataclass_fields__"):
            from dataclasses import asdict

            return asdict(obj)
        return str(obj)


MAX_CELL_CHARS = 300
MAX_LIST_ITEMS = 12


def _cell(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list) and len(v) > MAX_LIST_ITEMS and all(isinstance(x, (int, float)) for x in v):
        return f"{len(v)} values"
    if isinstance(v, (list, dict)):
        if isinstance(v, list) and all(not isinstance(x, (list, dict)) for x in v):
            text = ", ".join(_cell(x) for x in v)
        else:
            text = msgspec.json.encode(v, order="sorted").decode()
    else:
        text = str(v)
    return text if len(text) <= MAX_CELL_CHARS else text[: MAX_CELL_CHARS - 1] + "…"


def _flat(row: dict[str, Any], prefix: str = "", depth: int = 0) -> dict[str, Any]:
    """One level of nested records spread into columns (``baseline.median_ns``)."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        name = f"{prefix}{k}"
        if isinstance(v, dict) and depth < 1:
            out.update(_flat(v, name + ".", depth + 1))
        else:
            out[name] = v
    return out


def _tables(title: str, data: Any, facts: list[tuple[str, str]], tables: list[Table], depth: int = 0) -> None:
    """Scalars become facts, lists of records become tables, nested records recurse."""
    if isinstance(data, dict):
        for k in sorted(data):
            v = data[k]
            name = f"{title}.{k}" if title else str(k)
            if isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
                v = [_flat(x) for x in v]
                cols: list[str] = []
                for row in v:
                    cols += [c for c in row if c not in cols]
                rows = [[_cell(row.get(c)) for c in cols] for row in v[:MAX_SECTION_ROWS]]
                note = f"first {MAX_SECTION_ROWS} of {len(v)} rows" if len(v) > MAX_SECTION_ROWS else ""
                tables.append(Table(name, cols, rows, note))
            elif isinstance(v, dict) and depth < 3:
                _tables(name, v, facts, tables, depth + 1)
            else:
                facts.append((name, _cell(v)))
    elif isinstance(data, list) and data and all(isinstance(x, dict) for x in data):
        _tables("", {title or "rows": data}, facts, tables, depth)
    else:
        facts.append((title or "value", _cell(data)))


def memory_section(receipt: Receipt) -> OptionalSection:
    """Memory over time, from whichever analysis measured it (the probe's points after each new
    shape); a ledger from ``run`` or ``import`` has none."""
    title = "Memory over time"
    rows: list[list[str]] = []
    for key in ("probe", "shapes"):
        data = to_plain(getattr(receipt, key, None))
        points = data.get("memory") if isinstance(data, dict) else None
        if not isinstance(points, list):
            continue
        for p in points:
            if not isinstance(p, dict):
                continue
            rss = p.get("rss_bytes")
            peak = p.get("cuda_peak_bytes")
            rows.append(
                [
                    key,
                    _cell(p.get("configuration") or p.get("policy")),
                    _cell(p.get("phase")),
                    _cell(p.get("family") or p.get("length")),
                    _cell(p.get("signature")),
                    "–" if not isinstance(rss, int) else f"{rss / 2**20:.1f}",
                    "–" if not isinstance(peak, int) else f"{peak / 2**20:.1f}",
                    _cell(p.get("compiled_variants")),
                ]
            )
    if not rows:
        return OptionalSection("memory", title, False)
    cols = ["from", "configuration", "phase", "family", "input", "RSS MiB", "CUDA peak MiB", "compiled variants"]
    return OptionalSection("memory", title, True, [], [Table("after each first-seen input", cols, rows[:MAX_SECTION_ROWS])])


def optional_section(receipt: Receipt, key: str, title: str) -> OptionalSection:
    value = getattr(receipt, key, None)
    if value is None:
        return OptionalSection(key, title, False)
    facts: list[tuple[str, str]] = []
    tables: list[Table] = []
    _tables("", to_plain(value), facts, tables)
    return OptionalSection(key, title, True, facts, tables)


# --- two receipts: before and after ---------------------------------------------------------------


@dataclass(frozen=True)
class PhaseDelta:
    phase: str
    before_calls: int
    after_calls: int
    before_median_ns: int | None
    after_median_ns: int | None
    change_pct: float | None


@dataclass(frozen=True)
class Comparison:
    """What the Markdown summary says about a before/after pair. The verdict comes from
    ``analyze.diff`` when that module is installed; otherwise it is the median change per phase."""

    before_sha256: str
    after_sha256: str
    phases: list[PhaseDelta]
    counts: list[tuple[str, int, int]]
    verdict: list[str]
    verdict_source: str


def _change(a: int | None, b: int | None) -> float | None:
    if a is None or b is None or a == 0:
        return None
    return round(100.0 * (b - a) / a, 1)


def build_comparison(before: Receipt, after: Receipt) -> Comparison:
    bp = {p.phase: p for p in before.summary.phases}
    ap = {p.phase: p for p in after.summary.phases}
    phases = []
    for name in [*bp, *(n for n in ap if n not in bp)]:
        b, a = bp.get(name), ap.get(name)
        bm = b.median_ns if b else None
        am = a.median_ns if a else None
        if (b.calls if b else 0) or (a.calls if a else 0):
            phases.append(PhaseDelta(name, b.calls if b else 0, a.calls if a else 0, bm, am, _change(bm, am)))
    bs, as_ = before.summary, after.summary
    counts = [
        ("calls", bs.call_count, as_.call_count),
        ("compiles", bs.compile_count, as_.compile_count),
        ("recompiles", bs.recompile_count, as_.recompile_count),
        ("graphs", bs.graph_count, as_.graph_count),
        ("break sites", bs.break_site_count, as_.break_site_count),
        ("fallbacks", bs.fallback_count, as_.fallback_count),
    ]
    verdict, source = _diff_verdict(before, after)
    if not verdict:
        source = "median change per phase"
        verdict = [
            f"{d.phase} {d.change_pct:+.1f}% ({d.before_calls} → {d.after_calls} calls)"
            for d in phases
            if d.change_pct is not None
        ] or ["no phase has calls in both receipts"]
    return Comparison(before.receipt_sha256, after.receipt_sha256, phases, counts, verdict, source)


def _diff_verdict(before: Receipt, after: Receipt) -> tuple[list[str], str]:
    """The verdict lines of ``seamscope diff`` (``analyze.diff.compare``), or its refusal."""
    from .diff import compare

    try:
        result = compare(before, after)
    except Exception as e:  # a refusal (unequal samples, other inputs) is the answer to show
        return [f"diff refused: {e}"], "seamscope diff"
    return list(result.verdict), "seamscope diff"


def comparison_in_receipt(receipt: Receipt) -> Comparison | None:
    """The ``comparison`` section ``seamscope diff --out`` attaches to the candidate receipt."""
    c = getattr(receipt, "comparison", None)
    if c is None:
        return None
    phases = [
        PhaseDelta(d.phase, d.before.calls, d.after.calls, d.before.median_ns, d.after.median_ns, d.median_pct)
        for d in c.phases
        if d.before.calls or d.after.calls
    ]
    return Comparison(
        c.before_receipt_sha256, c.after_receipt_sha256, phases, [("calls", c.calls_before, c.calls_after)], list(c.verdict), "seamscope diff"
    )


# --- many ranks: the rank × call view of a merged receipt ------------------------------------------

MAX_RANK_COLUMNS = 200
MAX_RANK_LABELS = 20  # call numbers written over the grid; the rest are in the tooltips
MIN_CELL_BAR_PCT = 12.0  # the fastest shown call still has a visible bar


@dataclass(frozen=True)
class RankCell:
    """One call as one rank ran it. ``present`` False: this rank has no such call (it made fewer
    calls, or its per-call detail was bounded)."""

    call_index: int
    present: bool
    phase: str
    outcome: str
    wall_ns: int
    region_count: int
    h: float  # bar height in percent of the cell: wall time on a log scale over the shown cells
    divergence: str  # "" | "start" (a divergence of this rank first appears here) | "after"
    tip: str


@dataclass(frozen=True)
class RankRow:
    rank: int
    source: str
    calls: int
    compiles: int
    recompiles: int
    graphs: int
    fallbacks: int
    break_sites: int
    steady_median_ns: int | None
    steady_iqr_ns: int | None
    divergent: bool
    cells: list[RankCell]


@dataclass(frozen=True)
class RankColumn:
    call_index: int
    label: str  # "" for columns whose number is left to the tooltip
    divergence_starts: bool


@dataclass(frozen=True)
class DivergenceRow:
    kind: str
    ranks: list[int]
    reference_ranks: list[int]
    first_call: int | None
    detail: str


@dataclass(frozen=True)
class DdpSplitRow:
    rank: int
    compile_id: str
    frame: str
    submodules: int


@dataclass(frozen=True)
class RankSiteRow:
    rank: int
    site_id: str
    where: str
    function: str
    origin: str
    crossings: int | None


@dataclass(frozen=True)
class RanksView:
    """The ``ranks`` section of a merged receipt; ``present`` False for a one-rank receipt."""

    present: bool
    world_size: int | None = None
    ranks_present: list[int] = field(default_factory=list)
    primary_rank: int | None = None
    ledger_note: str = ""
    columns: list[RankColumn] = field(default_factory=list)
    rows: list[RankRow] = field(default_factory=list)
    divergences: list[DivergenceRow] = field(default_factory=list)
    ddp_splits: list[DdpSplitRow] = field(default_factory=list)
    sites: list[RankSiteRow] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)
    time_rule: str = ""
    note: str = ""


def pick_rank_columns(calls_by_rank: list[list[Any]], keep: set[int], limit: int = MAX_RANK_COLUMNS) -> list[int]:
    """The calls the grid shows: all of them when they fit; else every call where a divergence
    starts, then calls in which some rank compiled, fell back or failed (up to half of what is
    left), then the rest evenly spaced; in call order."""
    indices = sorted({c.index for calls in calls_by_rank for c in calls})
    if len(indices) <= limit:
        return indices
    present = set(indices)
    must = sorted(i for i in keep if i in present)[:limit]
    chosen = set(must)
    special = sorted({c.index for calls in calls_by_rank for c in calls if c.outcome != "hit"} - chosen)
    chosen.update(special[: (limit - len(chosen)) // 2])
    rest = [i for i in indices if i not in chosen]
    room = limit - len(chosen)
    if rest and room > 0:
        step = len(rest) / room
        chosen.update(rest[int(k * step)] for k in range(min(room, len(rest))))
    return sorted(chosen)


def build_ranks(receipt: Receipt) -> RanksView:
    import math

    sec = getattr(receipt, "ranks", None)
    if sec is None:
        return RanksView(False)
    divs = list(sec.divergences)
    starts: dict[tuple[int, int], list[Any]] = {}
    since: dict[int, list[Any]] = {}
    for d in divs:
        if d.first_call is None:
            continue
        for r in d.ranks:
            starts.setdefault((r, d.first_call), []).append(d)
            since.setdefault(r, []).append(d)
    entries = sorted(sec.ranks, key=lambda e: e.rank)
    shown = pick_rank_columns([e.calls for e in entries], {d.first_call for d in divs if d.first_call is not None})
    shown_set = set(shown)
    walls = [max(c.wall_ns, 1) for e in entries for c in e.calls if c.index in shown_set]
    lo, hi = (min(walls), max(walls)) if walls else (1, 1)
    span = math.log(hi) - math.log(lo)

    def height(wall: int) -> float:
        if span <= 0:
            return 100.0
        frac = (math.log(max(wall, 1)) - math.log(lo)) / span
        return round(MIN_CELL_BAR_PCT + (100.0 - MIN_CELL_BAR_PCT) * frac, 2)

    rows = []
    for e in entries:
        by_index = {c.index: c for c in e.calls}
        cells = []
        for i in shown:
            here = starts.get((e.rank, i), [])
            before = [d for d in since.get(e.rank, []) if d.first_call < i]
            c = by_index.get(i)
            if c is None:
                tip = f"rank {e.rank} · call {i}: no such call on this rank"
            else:
                tip = (
                    f"rank {e.rank} · call {i} · {c.phase} · {c.outcome}\n"
                    f"wall {_ns(c.wall_ns)} (regions {_ns(c.region_ns)}, islands {_ns(c.island_ns)}, "
                    f"compile {_ns(c.compile_ns)})\n{len(c.regions)} regions: {', '.join(c.regions) or '–'}"
                )
                if c.sites:
                    tip += f"\nsites crossed: {', '.join(c.sites)}"
            tip += "".join(f"\ndivergence starts here: {d.kind}: {d.detail}" for d in here)
            tip += "".join(f"\ndiverged since call {d.first_call}: {d.kind}" for d in before)
            mark = "start" if here else ("after" if before else "")
            if c is None:
                cells.append(RankCell(i, False, "", "", 0, 0, 0.0, mark, tip))
            else:
                cells.append(RankCell(i, True, c.phase, c.outcome, c.wall_ns, len(c.regions), height(c.wall_ns), mark, tip))
        rows.append(
            RankRow(
                rank=e.rank,
                source=e.source,
                calls=e.call_count,
                compiles=e.compile_count,
                recompiles=e.recompile_count,
                graphs=e.graph_count,
                fallbacks=e.fallback_count,
                break_sites=e.break_site_count,
                steady_median_ns=e.steady_median_ns,
                steady_iqr_ns=e.steady_iqr_ns,
                divergent=e.rank in since or any(e.rank in d.ranks for d in divs),
                cells=cells,
            )
        )
    div_starts = {d.first_call for d in divs if d.first_call is not None}
    every = max(1, -(-len(shown) // MAX_RANK_LABELS))
    columns = [
        RankColumn(i, str(i) if k % every == 0 or i in div_starts else "", i in div_starts) for k, i in enumerate(shown)
    ]
    total = len({c.index for e in entries for c in e.calls})
    note = f"{len(shown)} of {total} calls shown"
    if len(shown) < total:
        note += "; every call where a divergence starts is kept, then calls that compiled, then calls evenly spaced"
    if walls:
        note += f". Bar height: wall time, log scale from {_ns(lo)} to {_ns(hi)}; number: regions run"
    return RanksView(
        present=True,
        world_size=sec.world_size,
        ranks_present=list(sec.ranks_present),
        primary_rank=sec.primary_rank,
        ledger_note=sec.ledger_note,
        columns=columns,
        rows=rows,
        divergences=[DivergenceRow(d.kind, list(d.ranks), list(d.reference_ranks), d.first_call, d.detail) for d in divs],
        ddp_splits=[DdpSplitRow(e.rank, s.compile_id, s.frame_name, s.submodules) for e in entries for s in e.ddp_splits],
        sites=[
            RankSiteRow(e.rank, s.site_id, f"{s.file}:{s.line}", s.function, s.origin, s.crossings)
            for e in entries
            for s in e.sites
        ][:MAX_SECTION_ROWS],
        problems=[(p.kind, p.message) for p in sec.problems],
        time_rule=sec.time_rule,
        note=note,
    )


# --- the shape study: its plots as inline SVG -----------------------------------------------------

MAX_SHAPE_POINTS = 400  # per policy and chart; beyond, cold calls are kept, then calls evenly spaced
SVG_W, SVG_H = 640, 190  # a chart's viewBox; the plot box inside it:
PLOT_X0, PLOT_X1, PLOT_Y0, PLOT_Y1 = 64.0, 630.0, 10.0, 160.0
SHAPE_PHASES = (
    ("cold", "#d62728", "cold (compiled)"),
    ("steady", "#1f77b4", "warm (cache hit)"),
    ("fallback", "#ff7f0e", "eager fallback"),
)


@dataclass(frozen=True)
class Dot:
    x: float
    y: float
    phase: str
    colour: str
    tip: str


@dataclass(frozen=True)
class PolicyLine:
    policy: str
    colour: str
    points: str  # an SVG polyline's ``points``, in the chart's viewBox (steps add corners)
    n_points: int  # the figures drawn: calls, or first-seen lengths for memory
    dots: list[Dot] = field(default_factory=list)


@dataclass(frozen=True)
class LineChart:
    key: str
    title: str
    y_top: str
    y_bottom: str
    x_left: str
    x_right: str
    lines: list[PolicyLine]
    note: str = ""


@dataclass(frozen=True)
class PolicyRow:
    policy: str
    colour: str
    status: str
    compiles: int
    recompiles: int
    fallbacks: int
    compile_ns: int
    total_ns: int
    cold_ns: int
    steady_per_call_ns: int | None
    one_time_ns: int | None
    padding_pct: float
    correctness: str
    recommended: bool
    note: str


@dataclass(frozen=True)
class ShapesView:
    present: bool
    facts: list[tuple[str, str]] = field(default_factory=list)
    recommendation: str = ""
    excluded: list[str] = field(default_factory=list)
    policies: list[PolicyRow] = field(default_factory=list)
    charts: list[LineChart] = field(default_factory=list)
    phases: list[tuple[str, str]] = field(default_factory=list)  # (label, colour) of the latency dots
    warnings: list[str] = field(default_factory=list)
    frame: ChartFrame = field(default_factory=lambda: ChartFrame())


@dataclass(frozen=True)
class ChartFrame:
    """Where a shape chart's box and axis labels sit in its viewBox (shared by the three charts)."""

    width: int = SVG_W
    height: int = SVG_H
    x: float = PLOT_X0
    y: float = PLOT_Y0
    w: float = PLOT_X1 - PLOT_X0
    h: float = PLOT_Y1 - PLOT_Y0
    y_label_x: float = PLOT_X0 - 4
    top_label_y: float = PLOT_Y0 + 8
    bottom_label_y: float = PLOT_Y1
    x_label_y: float = PLOT_Y1 + 16
    right_x: float = PLOT_X1


def _thin(calls: list[Any], limit: int = MAX_SHAPE_POINTS) -> list[Any]:
    if len(calls) <= limit:
        return list(calls)
    cold = [c for c in calls if c.phase != "steady"][: limit // 2]
    keep = {c.index for c in cold}
    rest = [c for c in calls if c.index not in keep]
    room = limit - len(cold)
    step = len(rest) / room
    chosen = cold + [rest[int(k * step)] for k in range(min(room, len(rest)))]
    return sorted(chosen, key=lambda c: c.index)


def _sx(index: int, last: int) -> float:
    return round(PLOT_X0 + (PLOT_X1 - PLOT_X0) * index / max(last, 1), 2)


def _sy(frac: float) -> float:
    """``frac`` 0 at the bottom of the plot box, 1 at its top."""
    return round(PLOT_Y1 - (PLOT_Y1 - PLOT_Y0) * min(max(frac, 0.0), 1.0), 2)


def _pts(xy: list[tuple[float, float]]) -> str:
    return " ".join(f"{x:g},{y:g}" for x, y in xy)


def _steps(xy: list[tuple[float, float]]) -> str:
    """A step line (a count holds until the next call changes it), as matplotlib's
    ``where="post"``: each point's value runs flat to the next point's x, then jumps."""
    out: list[tuple[float, float]] = []
    for k, (x, y) in enumerate(xy):
        if k and xy[k - 1][1] != y:
            out.append((x, xy[k - 1][1]))
        out.append((x, y))
    return _pts(out)


def build_shapes(receipt: Receipt) -> ShapesView:
    """The shape study's plot: compiled variants and memory over calls, per-call latency coloured
    cold/warm, one line per policy; plus the recommendation and the per-policy totals."""
    import math

    study = getattr(receipt, "shapes", None)
    if study is None:
        return ShapesView(False)
    spec = study.spec
    rec = study.recommendation
    colours = {p.policy: PALETTE[k % len(PALETTE)] for k, p in enumerate(study.policies)}
    last = max([len(spec.trace) - 1, *(c.index for p in study.policies for c in p.calls), 1])
    x_left, x_right = "call 0", f"call {last}"
    thinned = {p.policy: _thin(list(p.calls)) for p in study.policies}
    n_shown = sum(len(v) for v in thinned.values())
    n_all = sum(len(p.calls) for p in study.policies)
    thin_note = "" if n_shown == n_all else f"; {n_shown} of {n_all} calls drawn (cold calls kept, then evenly spaced)"

    # compiled variants after each call (PyTorch's counters in the policy's process)
    top_v = max([1, *(c.compiled_variants for p in study.policies for c in p.calls)])
    variants = [
        PolicyLine(
            p.policy,
            colours[p.policy],
            _steps([(_sx(c.index, last), _sy(c.compiled_variants / top_v)) for c in thinned[p.policy]]),
            len(thinned[p.policy]),
        )
        for p in study.policies
        if p.calls
    ]

    # process memory after each first-seen length
    mib = [m.rss_bytes / 2**20 for p in study.policies for m in p.memory if m.rss_bytes is not None]
    lo_m, hi_m = (min(mib), max(mib)) if mib else (0.0, 1.0)
    if hi_m - lo_m < 1.0:
        lo_m, hi_m = lo_m - 0.5, hi_m + 0.5
    memory = []
    for p in study.policies:
        steps = [m for m in p.memory if m.rss_bytes is not None]
        if steps:
            xy = [(_sx(m.call_index, last), _sy(((m.rss_bytes or 0) / 2**20 - lo_m) / (hi_m - lo_m))) for m in steps]
            dots = [
                Dot(x, y, "memory", colours[p.policy],
                    f"{p.policy} · after call {m.call_index} (first of length {m.length}): "
                    f"RSS {(m.rss_bytes or 0) / 2**20:.1f} MiB, {m.compiled_variants} compiled variants")
                for m, (x, y) in zip(steps, xy, strict=True)
            ]
            memory.append(PolicyLine(p.policy, colours[p.policy], _steps(xy), len(steps), dots))

    # per-call latency, log scale, dots coloured by phase
    lat = [max(c.latency_ns, 1) for p in study.policies for c in p.calls]
    lo_l, hi_l = (min(lat), max(lat)) if lat else (1, 1)
    span = math.log(hi_l) - math.log(lo_l)
    phase_colour = {k: col for k, col, _ in SHAPE_PHASES}
    latency = []
    for p in study.policies:
        shown = thinned[p.policy]
        if not shown:
            continue
        xy = [
            (_sx(c.index, last), _sy((math.log(max(c.latency_ns, 1)) - math.log(lo_l)) / span if span > 0 else 0.5))
            for c in shown
        ]
        dots = [
            Dot(
                x,
                y,
                c.phase,
                phase_colour.get(c.phase, OVERHEAD_COLOUR),
                f"{p.policy} · call {c.index} · length {c.length}"
                + (f" (padded to {c.padded_length})" if c.padded_length != c.length else "")
                + f" · {c.phase} · {_ns(c.latency_ns)}"
                + (f" (compile {_ns(c.compile_ns)})" if c.compile_ns else ""),
            )
            for c, (x, y) in zip(shown, xy, strict=True)
        ]
        latency.append(PolicyLine(p.policy, colours[p.policy], _pts(xy), len(shown), dots))

    charts = [
        LineChart("variants", "Compiled variants after each call", str(top_v), "0", x_left, x_right, variants,
                  "frame compilations that produced code so far (counters frames ok)" + thin_note),
        LineChart("memory", "Process memory after each first-seen length", f"{hi_m:.1f} MiB", f"{lo_m:.1f} MiB",
                  x_left, x_right, memory, "RSS" if memory else "no memory measured"),
        LineChart("latency", "Per-call latency (log scale)", _ns(hi_l), _ns(lo_l), x_left, x_right, latency,
                  "line colour: policy; dot colour: cold or warm" + thin_note),
    ]
    recommended = rec.policy if rec is not None else None
    policies = [
        PolicyRow(
            policy=p.policy,
            colour=colours[p.policy],
            status=p.status,
            compiles=p.compile_count,
            recompiles=p.recompile_count,
            fallbacks=p.fallback_count,
            compile_ns=p.compile_ns,
            total_ns=p.total_ns,
            cold_ns=p.cold_ns,
            steady_per_call_ns=p.steady_per_call_ns,
            one_time_ns=p.one_time_ns,
            padding_pct=round(100.0 * p.padding_fraction, 1),
            correctness=p.correctness.replace("_", " "),
            recommended=p.policy == recommended,
            note=p.error or (f"length {p.worst.length}, {p.worst.path}: {p.worst.reason}" if p.worst else ""),
        )
        for p in study.policies
    ]
    facts = [
        ("workload", spec.workload),
        ("backend", spec.backend),
        ("device", spec.device),
        ("varying dim", str(spec.dim)),
        ("trace", f"{len(spec.trace)} calls, {len(set(spec.trace))} distinct lengths, repeat {spec.repeat}"),
        ("isolation", spec.isolation),
        ("study wall time", _ns(study.wall_ns)),
    ]
    return ShapesView(
        present=True,
        facts=facts,
        recommendation=rec.text if rec is not None else "no recommendation recorded",
        excluded=list(rec.excluded) if rec is not None else [],
        policies=policies,
        charts=charts,
        phases=[(label, col) for _, col, label in SHAPE_PHASES],
        warnings=list(study.warnings) + ([study.error] if study.error else []),
    )


# --- host and device lanes (calls timed on a device) --------------------------------------------


@dataclass(frozen=True)
class DeviceLaneRow:
    call_index: int
    phase: str
    wall_ns: int
    span_ns: int
    """The call's device span (0 when incomplete)."""
    complete: bool
    syncs: int
    host: list[Bar]
    device: list[Bar]
    """Regions' device work, and seam gaps (kind ``gap``, or ``sync`` when the island before synced)."""


@dataclass(frozen=True)
class DeviceLanes:
    rows: list[DeviceLaneRow]
    note: str


def build_device_lanes(receipt: Receipt, colours: dict[str, str], limit: int = MAX_TIMELINE_ROWS) -> DeviceLanes | None:
    """Each call timed on the device: its host lane (regions and islands, as launched) above its
    device lane (the regions' device work and the seam gaps), both on the scale of the longer of
    its wall time and its device span. None when no call was timed on a device."""
    import msgspec

    timed = [c for c in receipt.ledger.calls if not isinstance(c.device, msgspec.UnsetType)]
    if not timed:
        return None
    rows = []
    for call in pick_timeline_calls(timed, limit):
        d = call.device
        assert not isinstance(d, msgspec.UnsetType)
        scale = max(call.wall_ns, d.span_ns, 1)
        host: list[Bar] = []
        for e in call.events:
            if isinstance(e, RegionEvent):
                tip = f"region {e.compile_id} on the host (launch): {_ns(e.duration_ns)}"
                host.append(_bar("region", e.start_ns, e.duration_ns, scale, colours.get(e.compile_id, PALETTE[0]), e.compile_id, tip))
            elif isinstance(e, IslandEvent):
                host.append(_bar("island", e.start_ns, e.duration_ns, scale, ISLAND_COLOUR, "", f"eager island: {_ns(e.duration_ns)}"))
        device: list[Bar] = []
        cursor = 0
        for i, seam in enumerate(d.seams):
            if seam.gap_ns:
                kind = "sync" if seam.syncs else "gap"
                tip = f"device seam gap: {_ns(seam.gap_ns)} (the island's kernels, or the device idle)"
                if seam.syncs:
                    tip += f"\n{seam.syncs} device-to-host sync(s) in the island; the host waited {_ns(seam.host_wait_ns or 0)}"
                device.append(_bar(kind, cursor, seam.gap_ns, scale, SYNC_COLOUR if seam.syncs else GAP_COLOUR, "", tip))
            cursor += seam.gap_ns
            if i < len(d.regions):
                r = d.regions[i]
                tip = f"region {r.compile_id} on the device: {_ns(r.duration_ns)}"
                device.append(_bar("region", r.start_ns, r.duration_ns, scale, colours.get(r.compile_id, PALETTE[0]), r.compile_id, tip))
                cursor = r.start_ns + r.duration_ns
        rows.append(
            DeviceLaneRow(
                call_index=call.index, phase=call.phase, wall_ns=call.wall_ns, span_ns=d.span_ns, complete=d.complete,
                syncs=sum(s.syncs or 0 for s in d.seams), host=host, device=device,
            )
        )
    note = (
        f"{len(rows)} of {len(timed)} calls timed on the device shown; each pair of lanes is scaled to the "
        "longer of the call's host wall time and its device span (a region returns to Python when its "
        "kernels are queued: the device lane shows when they ran)"
    )
    return DeviceLanes(rows=rows, note=note)


SYNC_COLOUR = "#d62728"
GAP_COLOUR = "#bbbbbb"
