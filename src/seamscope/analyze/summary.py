"""The receipt's ``summary``: the counts of docs/conventions.md and per-phase timing, from a ledger."""

from __future__ import annotations

import msgspec

from ..model.builder import PHASES
from ..model.ledger import BreakEvent, Call, CompileEvent, IslandEvent, Ledger, RegionEvent
from ..model.normalize import reason_headline
from ..model.receipt import (
    DevicePhaseStats,
    FallbackSummary,
    PhaseStats,
    RecompileSummary,
    SiteSummary,
    Summary,
)
from .fields import carry
from .stats import median_float, quantile


def call_parts(call: Call) -> dict[str, int]:
    """One call's wall time split into its parts, and its region and crossing counts (the
    per-call ledger, as ``calls.csv`` lists it)."""
    parts = {"region_ns": 0, "island_ns": 0, "compile_ns": 0, "regions": 0, "breaks_crossed": 0}
    for e in call.events:
        if isinstance(e, RegionEvent):
            parts["region_ns"] += e.duration_ns
            parts["regions"] += 1
        elif isinstance(e, IslandEvent):
            parts["island_ns"] += e.duration_ns
        elif isinstance(e, CompileEvent):
            parts["compile_ns"] += e.duration_ns
        elif isinstance(e, BreakEvent):
            parts["breaks_crossed"] += 1
    return parts


def summarize(ledger: Ledger) -> Summary:
    comps = ledger.compilations
    ok = [c for c in comps if c.status == "ok"]
    site_totals = {s.site_id: s for s in ledger.totals.sites}
    has_rt = ledger.run.has_runtime
    sites = []
    for s in ledger.break_sites:
        t = site_totals.get(s.site_id)
        sites.append(
            carry(
                SiteSummary,
                s,
                crossings=(t.crossings if t else 0) if has_rt else None,
                calls_crossing=(t.calls_crossing if t else 0) if has_rt else None,
                island_after_ns=(t.island_after_ns if t else 0) if has_rt else None,
            )
        )
    recompiles = [carry(RecompileSummary, c) for c in comps if c.is_recompile]
    fallbacks = [
        carry(FallbackSummary, c, reason=reason_headline(c.fail_reason or c.fail_type or c.status))
        for c in comps
        if c.status != "ok"
    ]
    phases = []
    by_phase = {p.phase: p for p in ledger.totals.phases}
    device = device_phase_stats(ledger)
    for name in PHASES:
        pt = by_phase.get(name)
        if pt is None:
            continue
        retained = [c for c in ledger.calls if c.phase == name]
        walls = [c.wall_ns for c in retained]
        rpc = [float(sum(1 for e in c.events if isinstance(e, RegionEvent))) for c in retained]
        phases.append(
            carry(
                PhaseStats,
                pt,
                sampled_calls=len(retained),
                min_ns=min(walls) if walls else None,
                median_ns=quantile(walls, 0.5),
                p90_ns=quantile(walls, 0.9),
                regions_per_call_median=median_float(rpc),
                device=device.get(name, msgspec.UNSET),
            )
        )
    return Summary(
        call_count=ledger.totals.calls,
        compile_count=len(ok),
        recompile_count=len(recompiles),
        graph_count=sum(c.graph_count for c in comps),
        fallback_count=sum(1 for c in comps if c.status != "ok"),
        break_site_count=len(ledger.break_sites),
        break_sites=sites,
        recompiles=recompiles,
        fallbacks=fallbacks,
        calls_by_phase={p.phase: p.calls for p in ledger.totals.phases},
        phases=phases,
        compile_ns=sum(c.duration_ns or 0 for c in comps),
        restart_count=sum(len(c.restart_reasons) for c in comps),
        has_runtime=has_rt,
        empty_frame_count=sum(1 for c in ok if c.graph_count == 0),
    )


def _mean(total: int, n: int) -> int:
    """A rounded mean of integer nanoseconds (half up)."""
    return (2 * total + n) // (2 * n)


def device_phase_stats(ledger: Ledger) -> dict[str, DevicePhaseStats]:
    """Per phase, the device time of a call timed on the device (empty on CPU)."""
    dev = ledger.totals.device
    if isinstance(dev, msgspec.UnsetType):
        return {}
    out: dict[str, DevicePhaseStats] = {}
    for p in dev.phases:
        if p.calls:
            out[p.phase] = DevicePhaseStats(
                calls=p.calls,
                span_per_call_ns=_mean(p.span_ns, p.calls),
                region_per_call_ns=_mean(p.region_ns, p.calls),
                gap_per_call_ns=_mean(p.gap_ns, p.calls),
                host_wait_per_call_ns=_mean(p.host_wait_ns, p.calls),
                syncs_per_call=round(p.syncs / p.calls, 6),
                wall_per_call_ns=_mean(p.wall_ns, p.calls),
            )
    return out
