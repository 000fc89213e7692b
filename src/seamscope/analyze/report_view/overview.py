"""The whole view, and its overview parts: title, phases, per-call timeline, calls chart, variants."""

from __future__ import annotations

import os
from typing import Any

from ...model.ledger import (
    BreakEvent,
    BreakSite,
    Call,
    Compilation,
    CompileEvent,
    FallbackEvent,
    GuardMissEvent,
    IslandEvent,
    RegionEvent,
    compile_frame_index,
    shown_frame,
    shown_frame_name,
    status_note,
    status_text,
)
from ...model.receipt import Receipt
from ..fields import carry
from ..summary import call_parts
from ..units import counted, fmt_ns, noun
from ..watch_view import watch_timeline
from .base import (
    COMPILE_COLOUR,
    ISLAND_COLOUR,
    MAX_CHART_COLUMNS,
    MAX_GUARDS_SHOWN,
    MAX_RECOMPILE_ROWS,
    OPTIONAL_SECTIONS,
    OVERHEAD_COLOUR,
    PALETTE,
    Bar,
    CallsChart,
    ChartColumn,
    FallbackRow,
    Mark,
    PhaseRow,
    RecompileRow,
    ReportView,
    Segment,
    SiteRow,
    Stat,
    Timeline,
    TimelineRow,
    VariantsChart,
    bar_pct,
    guard_lines,
    make_bar,
    pick_timeline_calls,
)
from .compile_time import build_compile_time
from .device import build_device_lanes
from .findings import headline_parts, top_findings
from .ranks import build_ranks
from .sections import memory_section, optional_section
from .shapes import build_shapes

# --- building ------------------------------------------------------------------------------------


def build_view(receipt: Receipt, source_root: str | None = None) -> ReportView:
    """The whole view; ``source_root`` is where relative source paths are looked up (cwd)."""
    led = receipt.ledger
    s = receipt.summary
    root = source_root if source_root is not None else os.getcwd()
    colours = compile_colours(receipt)
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
        subject=_subject(receipt),
        source=led.run.source,
        command=" ".join(led.run.command),
        structure_sha256=receipt.structure_sha256,
        receipt_sha256=receipt.receipt_sha256,
        environment=_environment_rows(led.environment),
        has_runtime=s.has_runtime,
        absent=list(led.run.absent),
        warnings=list(led.run.warnings),
        counts=_counts(s),
        calls_by_phase=[Stat(k, v) for k, v in s.calls_by_phase.items()],
        phases=[
            carry(PhaseRow, p, regions_per_call=p.regions_per_call_median)
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
            carry(RecompileRow, r, frame=shown_frame(r)[0], where="{1}:{2}".format(*shown_frame(r)),
                  failed_guards=list(r.failed_guards[:MAX_GUARDS_SHOWN]),
                  more_guards=max(0, len(r.failed_guards) - MAX_GUARDS_SHOWN))
            for r in s.recompiles[:MAX_RECOMPILE_ROWS]
        ],
        more_recompiles=max(0, len(s.recompiles) - MAX_RECOMPILE_ROWS),
        watch=watch_timeline(receipt),
        fallbacks=[
            carry(FallbackRow, f, frame=shown_frame_name(f))
            for f in s.fallbacks
        ],
        sites=[
            carry(SiteRow, b, where=f"{b.file}:{b.line}", gb_code=b.gb_code or "–", gb_type=b.gb_type or "–")
            for b in s.break_sites
        ],
        sections=[optional_section(key, title, field(receipt)) for key, title, field in OPTIONAL_SECTIONS]
        + [memory_section(receipt)],
        does_not_establish=list(receipt.decision.does_not_establish),
        ranks=build_ranks(receipt),
        shapes=build_shapes(receipt),
        compile_time=build_compile_time(receipt),
        **run_status_parts(led.run.status),
        **hl_parts,
    )


def _environment_rows(env: Any) -> list[tuple[str, str]]:
    """Versions, platform, device and backend, then the compile options and Dynamo settings."""
    rows = [
        ("seamscope", env.seamscope_version),
        ("python", env.python_version),
        ("torch", env.torch_version or "–"),
        ("platform", env.platform or "–"),
        ("device", env.device),
        ("backend", env.backend or "–"),
    ]
    rows += [(f"option {k}", v) for k, v in sorted(env.compile_options.items())]
    rows += [(f"dynamo {k}", v) for k, v in sorted(env.dynamo_config.items())]
    return rows


def _counts(s: Any) -> list[Stat]:
    """The summary's six counts, each with its noun."""
    return [
        Stat(noun(s.call_count, "call"), s.call_count),
        Stat(noun(s.compile_count, "compile"), s.compile_count),
        Stat(noun(s.recompile_count, "recompile"), s.recompile_count),
        Stat(noun(s.graph_count, "graph"), s.graph_count),
        Stat(noun(s.break_site_count, "break site"), s.break_site_count),
        Stat(noun(s.fallback_count, "fallback"), s.fallback_count),
    ]


def run_status_parts(status: Any) -> dict[str, Any]:
    """The report's run-status line (nothing for a receipt that records no status)."""
    text = status_text(status)
    if text is None:
        return {}
    note = status_note(status)
    return {"run_status": text, "run_completed": not note, "run_status_note": note}


def _subject(receipt: Receipt) -> str:
    cmd = receipt.ledger.run.command
    return os.path.basename(cmd[0]) if cmd else receipt.ledger.run.source


def _title(receipt: Receipt) -> str:
    return f"seamscope report: {_subject(receipt)}"


def compile_colours(receipt: Receipt) -> dict[str, str]:
    """A colour per compile id, in compile-id order, so the same graph has the same colour
    everywhere in the report."""
    ids = {c.compile_id for c in receipt.ledger.compilations}
    for call in receipt.ledger.calls:
        ids.update(e.compile_id for e in call.events if isinstance(e, RegionEvent))
    ordered = sorted(ids, key=lambda i: (compile_frame_index(i), i))
    return {cid: PALETTE[k % len(PALETTE)] for k, cid in enumerate(ordered)}


def _region_tip(e: RegionEvent, comp: Compilation | None, sites: dict[str, BreakSite]) -> str:
    tip = f"region {e.compile_id} graph {e.graph_index}: {fmt_ns(e.duration_ns)}"
    if comp is not None:
        tip += "\n{} ({}:{})".format(*comp.shown_frame)
        if comp.failed_guards:
            tip += "\ncompiled because a guard failed: " + comp.failed_guards[0]
        own = sites.get(comp.own_break_site_id or "")
        if own is not None:
            tip += f"\nends at break {own.site_id} {own.file}:{own.line}: {own.reason}"
    return tip


def _island_tip(e: IslandEvent, sites: dict[str, BreakSite]) -> str:
    tip = f"eager island: {fmt_ns(e.duration_ns)}"
    site = sites.get(e.after_site_id or "")
    if site is not None:
        tip += f"\nafter break {site.site_id} at {site.file}:{site.line} ({site.function})"
        tip += f"\nreason: {site.reason}"
    return tip


def _compile_tip(e: CompileEvent, comp: Compilation | None) -> str:
    tip = f"compile {e.compile_id}: {fmt_ns(e.duration_ns)}"
    if comp is not None:
        tip += "\n{} ({}:{}), status ".format(*comp.shown_frame) + comp.status
        tip += guard_lines(comp.failed_guards)
    return tip


def _timeline_row(
    call: Call, sites: dict[str, BreakSite], comps: dict[str, Compilation], colours: dict[str, str]
) -> TimelineRow:
    """One call's bars (regions, islands, compilations) and marks (breaks crossed, guard misses,
    fallbacks), each with its tooltip."""
    wall = call.wall_ns
    bars: list[Bar] = []
    marks: list[Mark] = []
    last_site: str | None = None
    for e in call.events:
        if isinstance(e, RegionEvent):
            tip = _region_tip(e, comps.get(e.compile_id), sites)
            colour = colours.get(e.compile_id, PALETTE[0])
            bars.append(make_bar("region", e.start_ns, e.duration_ns, wall, colour, e.compile_id, tip))
        elif isinstance(e, IslandEvent):
            bars.append(make_bar("island", e.start_ns, e.duration_ns, wall, ISLAND_COLOUR, "", _island_tip(e, sites)))
        elif isinstance(e, CompileEvent):
            tip = _compile_tip(e, comps.get(e.compile_id))
            bars.append(make_bar("compile", e.start_ns, e.duration_ns, wall, COMPILE_COLOUR, e.compile_id, tip))
        elif isinstance(e, BreakEvent):
            site = sites.get(e.site_id)
            tip = f"break {e.site_id} crossed" + (f" at {site.file}:{site.line}: {site.reason}" if site else "")
            if e.site_id != last_site:
                marks.append(Mark("break", bar_pct(e.at_ns, wall), tip))
            last_site = e.site_id
        elif isinstance(e, GuardMissEvent):
            comp = comps.get(e.compile_id)
            tip = f"guard miss → {e.compile_id}" + guard_lines(comp.failed_guards if comp is not None else [])
            marks.append(Mark("guard_miss", bar_pct(e.at_ns, wall), tip))
        elif isinstance(e, FallbackEvent):
            marks.append(Mark("fallback", bar_pct(e.at_ns, wall), f"fallback {e.compile_id}: {e.reason}"))
    return TimelineRow(
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


def build_timeline(receipt: Receipt, colours: dict[str, str]) -> Timeline:
    led = receipt.ledger
    sites = {b.site_id: b for b in led.break_sites}
    comps = {c.compile_id: c for c in led.compilations}
    shown = pick_timeline_calls(led.calls)
    rows = [_timeline_row(call, sites, comps, colours) for call in shown]
    note = f"{len(shown)} of {len(led.calls)} recorded calls shown"
    if len(led.calls) < led.totals.calls:
        note += f" ({led.totals.calls} calls in the run)"
    if len(shown) < len(led.calls):
        note += "; every call that compiled, fell back or failed comes first, then cache hits evenly spaced"
    used = {b.compile_id for r in rows for b in r.bars if b.kind == "region"}
    legend = [(cid, col) for cid, col in colours.items() if cid in used]
    return Timeline(rows=rows, retained_calls=len(led.calls), total_calls=led.totals.calls, legend=legend, note=note)


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
            parts = call_parts(call)
            pr, pi, pc = parts["region_ns"], parts["island_ns"], parts["compile_ns"]
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
            h = bar_pct(v, top)
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
    pts.append((0.0, bar_pct(n, total)))
    for idx in placed:
        x = bar_pct(idx, max_call)
        pts.append((x, bar_pct(n, total)))
        n += 1
        pts.append((x, bar_pct(n, total)))
    pts.append((100.0, bar_pct(n, total)))
    points = " ".join(f"{x:g},{round(100.0 - y, 3):g}" for x, y in pts)
    note = f"{counted(total, 'compilation')} over {counted(total_calls, 'call')}"
    if unplaced:
        note += f"; {unplaced} happened outside any observed call (counted from the start)"
    return VariantsChart(points, total, max_call, note)

