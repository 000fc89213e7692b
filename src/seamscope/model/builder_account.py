"""One call's accounting: how its spans become its sums (region, island, compile and overhead
time, compilations) and, for a call kept in detail, its events.

Split from the builder (:mod:`.builder`), which owns the accumulators these functions add into and
decides which path a call takes: :func:`sum_fast` for a steady call not kept in detail (on the
accumulators its plan resolved once), :func:`account_detail` for the others. Both clamp spans the
same way, so ``wall = regions + islands + compile + overhead`` holds exactly on either path; capture's
C lane (``seamscope._speedups``) adds exactly what :func:`sum_fast` adds.
"""

from __future__ import annotations

from typing import Any

from .ledger import (
    BreakEvent,
    CompileEvent,
    Event,
    FallbackEvent,
    GuardMissEvent,
    IslandEvent,
    RegionEvent,
)
from .plan import Plan, RegionAcc, SiteAcc
from .spans import (
    BOOK_END,
    COMPILE_ID,
    END,
    GRAPH_INDEX,
    KEY,
    KIND,
    OUT_BYTES,
    OUT_TENSORS,
    OVERHEAD,
    REGION,
    START,
)

_Span = tuple


def sum_fast(
    raccs: list[RegionAcc | None],
    gaccs: list[SiteAcc | None],
    final_acc: SiteAcc | None,
    spans: list[_Span],
    cursor: int,
    end_ns: int,
) -> tuple[int, int, int, int, int]:
    """The steady-call hot path: :func:`account_detail`'s arithmetic without events, on
    accumulators the plan resolved once. Spans that overlap or pass the call's end (which
    capture never produces) are clamped exactly as there."""
    start = cursor
    island_sum = overhead_sum = 0
    for sp, racc, gacc in zip(spans, raccs, gaccs, strict=True):
        s = sp[START]
        e = sp[END]
        if s < cursor or e > end_ns or e < s:
            s = min(max(s, cursor), end_ns)
            e = min(max(e, s), end_ns)
        gap = s - cursor
        if gap > 0:
            island_sum += gap
            if gacc is not None:
                gacc.island_after += gap
        dur = e - s
        if racc is None:
            overhead_sum += dur
            cursor = e
            continue
        if dur < racc.min:
            racc.min = dur
        if dur > racc.max:
            racc.max = dur
        racc.total += dur
        cursor = sp[BOOK_END]  # the bookkeeping right after the region
        if cursor > e:
            if cursor > end_ns:
                cursor = end_ns
            overhead_sum += cursor - e
        else:
            cursor = e
    gap = end_ns - cursor
    if gap > 0:
        island_sum += gap
        if final_acc is not None:
            final_acc.island_after += gap
    # every nanosecond of the call is island, overhead or region (no compile on this path)
    return end_ns - start - island_sum - overhead_sum, island_sum, 0, overhead_sum, 0


def account_detail(
    oc: Any,
    end_ns: int,
    plan: Plan,
    site_acc: dict[str, SiteAcc],
    regions: dict[str, RegionAcc],
    final_acc: SiteAcc | None,
    detail: bool,
) -> tuple[list[Event] | None, tuple[int, int, int, int, int]]:
    """A call's sums (region, island, compile, overhead, compilations) and, if ``detail``, its
    events, from its spans (``oc``: the builder's open call) and its plan, adding region and
    island times into ``regions``, ``site_acc`` and ``final_acc`` (the builder's own
    accumulators; fresh ones for a call whose sums were added when it ended)."""
    start = oc.start
    spans = oc.spans
    region_sum = compile_sum = overhead_sum = island_sum = compile_n = 0
    events: list[Event] | None = [] if detail else None
    cursor = start
    for sp, step in zip(spans, plan.steps, strict=True):
        kind, s, e = sp[KIND], sp[START], sp[END]
        if s < cursor:
            s = cursor
        if s > end_ns:
            s = end_ns
        if e < s:
            e = s
        elif e > end_ns:
            e = end_ns
        gap = s - cursor
        if events is not None:
            for site in step[0]:
                events.append(BreakEvent(site_id=site, at_ns=cursor - start))
        if gap > 0:
            island_sum += gap
            gap_site = step[1]
            if gap_site is not None:
                site_acc[gap_site].island_after += gap
            if events is not None:
                events.append(IslandEvent(start_ns=cursor - start, duration_ns=gap, after_site_id=gap_site))
        dur = e - s
        cursor = e
        if kind == OVERHEAD:
            overhead_sum += dur
        elif kind == REGION:
            region_sum += dur
            racc = regions.setdefault(sp[KEY], RegionAcc())
            racc.min = min(racc.min, dur)
            racc.max = max(racc.max, dur)
            racc.total += dur
            if events is not None:
                events.append(
                    RegionEvent(
                        compile_id=sp[KEY],
                        graph_index=sp[GRAPH_INDEX],
                        start_ns=s - start,
                        duration_ns=dur,
                        out_tensors=sp[OUT_TENSORS],
                        out_bytes=sp[OUT_BYTES],
                    )
                )
                for site in step[2]:
                    events.append(BreakEvent(site_id=site, at_ns=e - start))
            oe = sp[BOOK_END]
            if oe > e:  # the bookkeeping right after the region
                if oe > end_ns:
                    oe = end_ns
                overhead_sum += oe - e
                cursor = oe
        else:
            compile_sum += dur
            compile_n += 1
            if events is not None:
                events.append(CompileEvent(compile_id=sp[COMPILE_ID], start_ns=s - start, duration_ns=dur))
    gap = end_ns - cursor
    if gap > 0:
        island_sum += gap
        if final_acc is not None:
            final_acc.island_after += gap
        if events is not None:
            events.append(
                IslandEvent(start_ns=cursor - start, duration_ns=gap, after_site_id=plan.final_gap_site)
            )
    if events is not None and oc.points:
        events = _with_points(events, oc.points, start)
    return events, (region_sum, island_sum, compile_sum, overhead_sum, compile_n)


def _with_points(events: list[Event], points: list[tuple[int, str, str | None]], start: int) -> list[Event]:
    """The call's events with its point events (guard misses, fallbacks: ``(time, compile id,
    reason)``) placed among them by time, in the order they were reported at equal times."""
    timed = [(_at(ev), i, ev) for i, ev in enumerate(events)]
    n = len(timed)
    for j, (at, cid, reason) in enumerate(points):
        point: Event = (
            GuardMissEvent(compile_id=cid, at_ns=at - start)
            if reason is None
            else FallbackEvent(compile_id=cid, reason=reason, at_ns=at - start)
        )
        timed.append((at - start, n + j, point))
    timed.sort(key=lambda t: (t[0], t[1]))
    return [t[2] for t in timed]


def _at(ev: Event) -> int:
    """An event's time relative to the call's start (spans by their start, points by theirs)."""
    if isinstance(ev, (RegionEvent, IslandEvent, CompileEvent)):
        return ev.start_ns
    return ev.at_ns
