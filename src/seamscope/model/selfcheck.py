"""The ledger's self-check (after pyinstrument's ``Frame.self_check``).

For every call, wall = regions + islands + compile + overhead, exactly (integer nanoseconds);
totals agree with the retained calls when nothing was dropped; every id referenced exists.
Tests call it on every ledger they build; ``seamscope verify`` has its own, independent oracle.
"""

from __future__ import annotations

from collections import Counter

from .ledger import BreakEvent, CompileEvent, IslandEvent, Ledger, RegionEvent


class SelfCheckError(AssertionError):
    pass


def self_check(ledger: Ledger) -> None:
    """Raise :class:`SelfCheckError` listing every inconsistency found."""
    problems = check(ledger)
    if problems:
        raise SelfCheckError("; ".join(problems))


def check(ledger: Ledger) -> list[str]:
    p: list[str] = []
    comp_ids = {c.compile_id for c in ledger.compilations}
    site_ids = {s.site_id for s in ledger.break_sites}
    for c in ledger.calls:
        parts = c.overhead_ns
        last = -1
        for e in c.events:
            if isinstance(e, (RegionEvent, IslandEvent, CompileEvent)):
                if e.duration_ns < 0:
                    p.append(f"call {c.index}: negative duration")
                parts += e.duration_ns
                if e.start_ns < last:
                    p.append(f"call {c.index}: events out of order")
                last = e.start_ns + e.duration_ns
            if isinstance(e, CompileEvent) and ledger.run.has_runtime and e.compile_id not in comp_ids:
                p.append(f"call {c.index}: compile event for unknown compile id {e.compile_id}")
            if isinstance(e, BreakEvent) and e.site_id not in site_ids:
                p.append(f"call {c.index}: crossing of unknown site {e.site_id}")
        if parts != c.wall_ns:
            p.append(
                f"call {c.index}: wall {c.wall_ns} ns != regions + islands + compile + overhead {parts} ns"
            )
    t = ledger.totals
    if sum(ph.calls for ph in t.phases) != t.calls:
        p.append("phase call counts do not add up to the call count")
    for ph in t.phases:
        if ph.wall_ns != ph.region_ns + ph.island_ns + ph.compile_ns + ph.overhead_ns:
            p.append(f"phase {ph.phase}: wall != regions + islands + compile + overhead")
    r = ledger.retention
    if r.retained != len(ledger.calls):
        p.append("retention.retained differs from the number of calls kept")
    if r.retained + r.dropped != t.calls:
        p.append("retained + dropped calls != call count")
    if r.dropped == 0:
        for ph in t.phases:
            calls = [c for c in ledger.calls if c.phase == ph.phase]
            if len(calls) != ph.calls or sum(c.wall_ns for c in calls) != ph.wall_ns:
                p.append(f"phase {ph.phase}: totals differ from its calls")
        runs = Counter(e.compile_id for c in ledger.calls for e in c.events if isinstance(e, RegionEvent))
        for rt in t.regions:
            if runs.get(rt.compile_id, 0) != rt.runs:
                p.append(f"region {rt.compile_id}: {rt.runs} runs in totals, {runs.get(rt.compile_id, 0)} in calls")
        crossings = Counter(e.site_id for c in ledger.calls for e in c.events if isinstance(e, BreakEvent))
        for st in t.sites:
            if crossings.get(st.site_id, 0) != st.crossings:
                p.append(f"site {st.site_id}: crossings differ from the calls")
    return p
