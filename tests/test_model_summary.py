"""The summary's figures and the builder's edge paths, on hand-fed events (no torch).

GIVEN a builder fed exactly like capture feeds it, WHEN the ledger is summarised, THEN every count
and distribution equals what was fed in.
"""

from __future__ import annotations

import msgspec
import pytest
from fakes import comp

from seamscope.analyze.summary import call_parts, summarize
from seamscope.model.builder import LedgerBuilder
from seamscope.model.fake import FakeClock, fake_environment, fake_site
from seamscope.model.ledger import (
    BreakEvent,
    FallbackEvent,
    GuardMissEvent,
    IslandEvent,
    RunInfo,
)
from seamscope.model.selfcheck import self_check


def builder(**kw):
    clock = FakeClock(0)
    return clock, LedgerBuilder(RunInfo(source="fake"), fake_environment(), clock=clock, **kw)


def test_summary_counts_and_lists():
    clock, b = builder()
    site = fake_site("print")
    never = fake_site("never-crossed")
    b.set_break_site(site)
    b.set_break_site(never)
    # call 0: compiles 0/0 (breaks at the site) and 1/0, runs both
    b.begin_call(clock())
    b.set_compilation(comp("0/0", site=site.site_id, ns=700, restarts=["print"]))
    b.compile_span("0/0", 0, 700)
    b.set_compilation(comp("1/0", graphs=2, ns=300))
    b.compile_span("1/0", 700, 1000)
    b.region("0/0", 0, 1000, 1010)
    b.region("1/0", 0, 1020, 1030)
    b.end_call(1100)
    # call 1: a recompile of frame 1 with its failed guard
    b.begin_call(2000)
    b.set_compilation(comp("1/1", ns=50, guards=["1/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"]))
    b.compile_span("1/1", 2000, 2050)
    b.guard_miss("1/1", 2000)
    b.region("0/0", 0, 2060, 2070)
    b.region("1/1", 0, 2080, 2090)
    b.end_call(2100)
    # calls 2-4: steady, 100, 300, 200 ns
    for t0, wall in ((3000, 100), (4000, 300), (5000, 200)):
        b.begin_call(t0)
        b.region("0/0", 0, t0 + 10, t0 + 20)
        b.region("1/1", 0, t0 + 30, t0 + 40)
        b.end_call(t0 + wall)
    # call 5: an attempt that hit the recompile limit: it compiled nothing, so the call is a
    # fallback call (not cold), and the attempt is a recompile (y > 0) as well as a fallback
    b.begin_call(6000)
    b.set_compilation(comp("1/2", status="fallback", graphs=0, ns=20, fail_type="Unsupported",
                           reason="Dynamo recompile limit exceeded\nExplanation: ..."))
    b.compile_span("1/2", 6000, 6020)
    b.fallback("1/2", "recompile limit", 6020)
    b.end_call(6100)
    # call 6: frame 1 missed its cache in run-only mode (no graph of it ran): fallback
    b.begin_call(7000)
    b.region("0/0", 0, 7010, 7020)
    b.end_call(7050)
    # call 7: an input that hits a cached variant runs its compiled graph: steady
    b.begin_call(8000)
    b.region("0/0", 0, 8010, 8020)
    b.region("1/1", 0, 8030, 8040)
    b.end_call(8050)
    led = b.build()
    self_check(led)
    s = summarize(led)
    assert (s.call_count, s.compile_count, s.recompile_count) == (8, 3, 2)
    assert s.graph_count == 4 and s.fallback_count == 1 and s.break_site_count == 2
    assert s.restart_count == 1 and s.compile_ns == 700 + 300 + 50 + 20
    assert s.calls_by_phase == {"cold": 2, "steady": 4, "fallback": 2}
    assert [c.phase for c in led.calls] == [
        "cold", "cold", "steady", "steady", "steady", "fallback", "fallback", "steady"
    ]
    assert [c.outcome for c in led.calls] == ["compile", "recompile", "hit", "hit", "hit", "fallback", "hit", "hit"]
    rc, rc_limit = s.recompiles
    assert (rc.compile_id, rc.call_index, rc.frame_name, rc.file, rc.line) == ("1/1", 1, "forward", "m.py", 3)
    assert rc.failed_guards == ["1/0: tensor 'x' size mismatch at index 0. expected 4, actual 8"]
    assert (rc.status, rc_limit.compile_id, rc_limit.status) == ("ok", "1/2", "fallback")
    assert s.empty_frame_count == 0
    (fb,) = s.fallbacks
    assert (fb.compile_id, fb.frame_name, fb.status, fb.call_index) == ("1/2", "forward", "fallback", 5)
    assert fb.reason == "Dynamo recompile limit exceeded"
    steady = next(p for p in s.phases if p.phase == "steady")
    assert (steady.calls, steady.sampled_calls, steady.wall_ns) == (4, 4, 650)
    assert (steady.min_ns, steady.median_ns, steady.p90_ns) == (50, 100, 300)
    assert steady.regions_per_call_median == 2.0
    assert steady.region_ns == 80 and steady.compile_ns == 0
    assert steady.island_ns + steady.region_ns + steady.overhead_ns == steady.wall_ns
    cold = next(p for p in s.phases if p.phase == "cold")
    assert cold.compile_ns == 1000 + 50
    fallen = next(p for p in s.phases if p.phase == "fallback")
    assert (fallen.calls, fallen.compile_ns) == (2, 20)
    by_id = {x.site_id: x for x in s.break_sites}
    crossed = by_id[site.site_id]
    assert (crossed.crossings, crossed.calls_crossing) == (7, 7)
    assert (crossed.gb_code, crossed.gb_type) == (site.gb_code, site.gb_type)
    assert crossed.island_after_ns == sum(
        e.duration_ns
        for c in led.calls
        for e in c.events
        if isinstance(e, IslandEvent) and e.after_site_id == site.site_id
    )
    idle = by_id[never.site_id]
    assert (idle.crossings, idle.calls_crossing, idle.island_after_ns) == (0, 0, 0)
    # point events land at their own times, in order
    ev = led.calls[1].events
    gm = next(e for e in ev if isinstance(e, GuardMissEvent))
    assert gm.at_ns == 0 and gm.compile_id == "1/1"
    fbe = next(e for e in led.calls[5].events if isinstance(e, FallbackEvent))
    assert fbe.at_ns == 20 and fbe.reason == "recompile limit"
    # an imported ledger has no runtime: crossings are unknown, not zero
    imported = msgspec.structs.replace(led, run=msgspec.structs.replace(led.run, has_runtime=False))
    assert all((x.crossings, x.calls_crossing, x.island_after_ns) == (None, None, None)
               for x in summarize(imported).break_sites)


def test_call_parts_match_the_events():
    clock, b = builder()
    site = fake_site("p")
    b.set_break_site(site)
    b.begin_call(0)
    b.set_compilation(comp("0/0", site=site.site_id))
    b.compile_span("0/0", 0, 50)
    b.region("0/0", 0, 60, 80)
    b.overhead(80, 85)
    b.region("1/0", 0, 90, 95)
    call = b.end_call(100)
    assert call is not None  # compiled: made at once
    assert call_parts(call) == {"region_ns": 25, "island_ns": 20, "compile_ns": 50, "regions": 2, "breaks_crossed": 1}
    assert call.overhead_ns == 5 and call.wall_ns == 100


def test_outside_calls_and_edge_paths():
    clock, b = builder(outside_cap=1)
    # nothing outside a call turns into a call, and nothing crashes
    b.overhead(0, 10)
    b.guard_miss("0/0", 5)
    b.compile_span("0/0", 0, 10)
    b.region("0/0", 0, 10, 30)  # a region outside any call: an outside forward
    b.outside_region("0/0", "backward", 7, 3)  # past the cap: counted, not kept
    b.region_run("0/0", 0, 30, 33, 34, None, None)  # likewise
    b.fallback("0/0", "limit", 40)  # remembered; a later call that runs compiled graphs is still steady
    led = b.build()
    assert led.totals.calls == 0 and led.calls == []
    assert led.totals.outside_runs == 3 and led.totals.outside_ns == 30
    (rt,) = led.totals.regions
    assert (rt.outside_runs, rt.outside_ns, rt.runs, rt.min_ns) == (3, 30, 0, 0)
    assert [(o.kind, o.duration_ns, o.attributed_call) for o in led.outside] == [("forward", 20, None)]
    assert led.retention.outside_dropped == 2 and led.retention.outside_cap == 1
    b.begin_call(100)
    b.overhead(110, 110)  # empty: no time
    b.region("0/0", 0, 120, 130)
    b.end_call(140)
    call = b.build().calls[-1]
    assert call.index == 0 and call.phase == "steady" and call.overhead_ns == 0
    assert (led := b.build()).totals.regions[0].runs == 1 and led.totals.regions[0].min_ns == 10


def test_compilation_keeps_the_call_it_happened_in():
    clock, b = builder()
    b.set_compilation(comp("0/0"))  # outside calls
    assert b.compilation("0/0").call_index is None
    b.begin_call(0)
    b.set_compilation(comp("1/0"))
    b.end_call(10)
    b.set_compilation(comp("1/0", ns=5))  # refined later, outside the call: keeps its call
    assert b.compilation("1/0").call_index == 0 and b.compilation("1/0").duration_ns == 5
    b.begin_call(20)
    b.set_compilation(msgspec.structs.replace(comp("2/0"), call_index=7))  # an explicit index wins
    b.end_call(30)
    assert b.compilation("2/0").call_index == 7
    assert [c.compile_id for c in b.build().compilations] == ["0/0", "1/0", "2/0"]


def test_break_crossed_once_per_episode_across_caller_and_helper():
    """A break in an inlined helper: the caller's graph ends there (depth 0) and so does the
    helper's (depth 1); the helper's resume (depth 1) then the caller's (depth 0) follow."""
    clock, b = builder()
    site = fake_site("helper-print")
    b.set_break_site(site)
    sid = site.site_id
    b.set_compilation(msgspec.structs.replace(comp("0/0", site=sid), own_break_depth=0))
    b.set_compilation(msgspec.structs.replace(comp("1/0", site=sid), own_break_depth=1))
    b.set_compilation(msgspec.structs.replace(comp("2/0"), resume_site_id=sid, resume_depth=1))
    b.set_compilation(msgspec.structs.replace(comp("3/0"), resume_site_id=sid, resume_depth=0))
    for t0 in (0, 1000):
        b.begin_call(t0)
        for i, cid in enumerate(("0/0", "1/0", "2/0", "3/0")):
            b.region(cid, 0, t0 + 100 * i + 10, t0 + 100 * i + 20)
        b.end_call(t0 + 500)
    led = b.build()
    for call in led.calls:
        breaks = [e for e in call.events if isinstance(e, BreakEvent)]
        assert [(e.site_id, e.at_ns) for e in breaks] == [(sid, 20)]  # where the caller's graph ended
        after = [e for e in call.events if isinstance(e, IslandEvent) and e.after_site_id == sid]
        assert len(after) == 3  # every seam of the episode is attributed to the site
    assert led.totals.sites[0].crossings == 2
    # the helper resumes at the caller's depth before the caller's own resume: still one episode,
    # closed by the shallower resume; a deeper resume alone does not close it
    clock, b = builder()
    b.set_break_site(site)
    b.set_compilation(msgspec.structs.replace(comp("0/0", site=sid), own_break_depth=1))
    b.set_compilation(msgspec.structs.replace(comp("1/0"), resume_site_id=sid, resume_depth=2))
    b.set_compilation(msgspec.structs.replace(comp("2/0", site=sid), own_break_depth=1))
    b.set_compilation(msgspec.structs.replace(comp("3/0"), resume_site_id=sid, resume_depth=1))
    b.set_compilation(msgspec.structs.replace(comp("4/0", site=sid), own_break_depth=0))
    b.begin_call(1000)
    for i, cid in enumerate(("0/0", "1/0", "2/0", "3/0", "4/0")):
        b.region(cid, 0, 1000 + 100 * i + 10, 1000 + 100 * i + 20)
    b.end_call(1600)
    (call,) = b.build().calls
    assert [(e.site_id, e.at_ns) for e in call.events if isinstance(e, BreakEvent)] == [(sid, 20), (sid, 420)]
    # a resume with no graph before it (a disabled function) is the first sign of a crossing
    clock, b = builder()
    b.set_break_site(site)
    b.set_compilation(msgspec.structs.replace(comp("4/0"), resume_site_id=sid, resume_depth=0))
    b.begin_call(100)
    b.region("4/0", 0, 150, 160)
    b.end_call(170)
    (call,) = b.build().calls
    assert [type(e).__name__ for e in call.events] == ["BreakEvent", "IslandEvent", "RegionEvent", "IslandEvent"]
    assert call.events[0].at_ns == 0
    assert call.events[1].after_site_id == sid and call.events[3].after_site_id is None


def _breaks_of(comps, order, site):
    """The break crossings of one call running ``order``, with ``comps`` as (id, own depth, resume depth)."""
    clock, b = builder()
    b.set_break_site(site)
    for cid, own, resume in comps:
        c = comp(cid, site=site.site_id if own is not None else None)
        b.set_compilation(msgspec.structs.replace(
            c, own_break_depth=own, resume_site_id=site.site_id if resume is not None else None, resume_depth=resume))
    b.begin_call(1000)
    for i, cid in enumerate(order):
        b.region(cid, 0, 1000 + 100 * i + 10, 1000 + 100 * i + 20)
    b.end_call(1000 + 100 * len(order) + 50)
    (call,) = b.build().calls
    return [e.at_ns for e in call.events if isinstance(e, BreakEvent)]


def test_episodes_of_a_break_open_and_close_by_depth():
    """Which resumes close a crossing's episode, and which signals start a new one."""
    site = fake_site("print")
    # a loop that breaks at the same print twice: the resume function breaks there again, so the
    # caller's resume (depth 0) closes the first crossing and its own break opens the second
    loop = [("0/0", 0, None), ("1/0", 0, 0), ("2/0", None, 0)]
    assert _breaks_of(loop, ["0/0", "1/0", "2/0"], site) == [20, 120]
    # the helper's resume (depth 1) leaves the caller's episode (depth 0) open, even when another
    # compiled function runs between it and the caller's resume: one crossing
    other = ("9/0", None, None)
    nested = [("0/0", 0, None), ("1/0", 1, None), ("2/0", None, 1), other, ("3/0", None, 0)]
    assert _breaks_of(nested, ["0/0", "1/0", "2/0", "9/0", "3/0"], site) == [20]
    # a deeper frame's resume arriving just after the caller's closed the episode: the same crossing
    late = [("0/0", 0, None), ("1/0", None, 0), ("2/0", None, 1)]
    assert _breaks_of(late, ["0/0", "1/0", "2/0"], site) == [20]


def test_region_run_is_a_region_then_its_bookkeeping():
    """The hot path capture uses: one tuple per run, region then seamscope's own overhead."""
    clock, b = builder()
    b.region_run("0/0", 2, 10, 20, 26, 3, 48)  # outside a call: an outside forward of 10 ns
    b.begin_call(100)
    b.region_run("0/0", 2, 110, 130, 134, 3, 48)
    b.region_run("1/0", 0, 140, 150, 151, None, None)
    b.end_call(160)
    call = b.build().calls[-1]
    regions = [e for e in call.events if type(e).__name__ == "RegionEvent"]
    assert [(r.compile_id, r.graph_index, r.start_ns, r.duration_ns, r.out_tensors, r.out_bytes) for r in regions] == [
        ("0/0", 2, 10, 20, 3, 48),
        ("1/0", 0, 40, 10, None, None),
    ]
    assert call.overhead_ns == 4 + 1 and call.wall_ns == 60
    islands = [(e.start_ns, e.duration_ns) for e in call.events if isinstance(e, IslandEvent)]
    assert islands == [(0, 10), (34, 6), (51, 9)]
    led = b.build()
    assert [(o.kind, o.duration_ns) for o in led.outside] == [("forward", 10)]
    (r0, r1) = led.totals.regions
    assert (r0.runs, r0.total_ns, r0.outside_runs, r0.outside_ns) == (1, 20, 1, 10)
    assert (r1.runs, r1.min_ns, r1.max_ns) == (1, 10, 10)
    self_check(led)


def test_call_parts_add_up_repeated_compiles_and_crossings():
    """Two compilations and two crossings in one call: the parts are sums, not the last value."""
    clock, b = builder()
    s1, s2 = fake_site("print"), fake_site("item")
    b.set_break_site(s1)
    b.set_break_site(s2)
    b.begin_call(0)
    b.set_compilation(comp("0/0", site=s1.site_id, ns=300))
    b.compile_span("0/0", 0, 300)
    b.region("0/0", 0, 300, 310)
    b.set_compilation(comp("1/0", site=s2.site_id, ns=200))
    b.compile_span("1/0", 320, 520)
    b.region("1/0", 0, 520, 530)
    b.end_call(600)
    (call,) = b.build().calls
    parts = call_parts(call)
    assert parts["compile_ns"] == 500
    assert parts["breaks_crossed"] == 2
    assert parts["regions"] == 2 and parts["region_ns"] == 20


def test_fallback_reason_falls_back_to_the_failure_type_then_the_status():
    clock, b = builder()
    b.set_compilation(comp("0/0", status="fallback", fail_type="Unsupported", ns=None))
    b.set_compilation(comp("1/0", status="failed"))
    b.set_compilation(comp("2/0", ns=400))
    s = summarize(b.build())
    assert [f.reason for f in s.fallbacks] == ["Unsupported", "failed"]
    assert s.compile_ns == 400 + 1000  # a compilation of unknown duration adds nothing


def test_summary_skips_a_phase_the_totals_lack():
    clock, b = builder()
    b.begin_call(0)
    b.region("0/0", 0, 10, 20)
    b.end_call(30)
    led = b.build()
    no_cold = msgspec.structs.replace(
        led, totals=msgspec.structs.replace(led.totals, phases=[p for p in led.totals.phases if p.phase != "cold"])
    )
    assert [p.phase for p in summarize(no_cold).phases] == ["steady", "fallback"]


def _feed_steady_and_edge_calls(b: LedgerBuilder) -> str:
    """One cold call, six steady calls, then three whose spans the accounting must clamp (a
    region overlapping the one before, bookkeeping past the call's end, a region past it) and
    one with a new shortest region that ends with a 1 ns island; then two that end right after
    the break, one with more of seamscope's own overhead."""
    site = fake_site("print")
    b.set_break_site(site)
    b.begin_call(0)
    b.overhead(0, 5)
    b.set_compilation(comp("0/0", site=site.site_id))
    b.compile_span("0/0", 5, 50)
    b.set_compilation(msgspec.structs.replace(comp("1/0"), resume_site_id=site.site_id, resume_depth=0))
    b.compile_span("1/0", 50, 60)
    b.region_run("0/0", 0, 60, 70, 72, None, None)
    b.region_run("1/0", 0, 80, 90, 91, None, None)
    b.end_call(100)
    for k in range(1, 7):
        t = 1000 * k
        b.begin_call(t)
        b.overhead(t, t + 2)
        b.region_run("0/0", 0, t + 3, t + 13, t + 14, None, None)
        b.region_run("1/0", 0, t + 20, t + 25 + k, t + 26 + k, None, None)
        b.end_call(t + 30 + k)
    for t, second in ((7000, (7010, 7020, 7021)), (8000, (8020, 8028, 8040)), (9000, (9020, 9035, 9036)),
                        (10000, (10020, 10025, 10029))):
        b.begin_call(t)
        b.overhead(t, t + 2)
        b.region_run("0/0", 0, t + 3, t + 13, t + 14, None, None)
        b.region_run("1/0", 0, *second, None, None)
        b.end_call(t + 30)
    for t in (11000, 12000):  # the call ends after the break: the last island follows the site
        b.begin_call(t)
        b.overhead(t, t + 2)
        b.region_run("0/0", 0, t + 3, t + 13, t + 14, None, None)
        if t == 11000:
            b.overhead(t + 15, t + 17)
        b.end_call(t + 20)
    return site.site_id


def test_steady_fast_path_equals_the_detailed_path_and_the_hand_count():
    """Calls not kept in detail take a faster path; it must give the detailed path's figures,
    which are checked here against a count done by hand."""
    _, detailed = builder()
    _, sampled = builder(first_calls=1, call_cap=1)
    site_id = _feed_steady_and_edge_calls(detailed)
    _feed_steady_and_edge_calls(sampled)
    full, small = detailed.build(), sampled.build()
    assert small.retention.dropped >= 10
    assert small.totals == full.totals
    steady = next(p for p in full.totals.phases if p.phase == "steady")
    assert (steady.calls, steady.wall_ns, steady.compile_ns) == (12, 361, 0)
    assert (steady.region_ns, steady.overhead_ns, steady.island_ns) == (200, 51, 110)
    cold = next(p for p in full.totals.phases if p.phase == "cold")
    assert (cold.wall_ns, cold.compile_ns, cold.overhead_ns, cold.region_ns, cold.island_ns) == (100, 55, 8, 20, 17)
    r0, r1 = full.totals.regions
    assert (r0.runs, r0.total_ns, r0.min_ns, r0.max_ns) == (13, 130, 10, 10)
    assert (r1.runs, r1.min_ns, r1.max_ns) == (11, 5, 11)
    assert r1.total_ns == 10 + sum(5 + k for k in range(1, 7)) + 6 + 8 + 10 + 5
    (st,) = full.totals.sites
    assert (st.site_id, st.crossings, st.calls_crossing, st.island_after_ns) == (site_id, 13, 13, 72)
    last = [e for e in full.calls[12].events if isinstance(e, IslandEvent)][-1]
    assert (last.duration_ns, last.after_site_id) == (6, site_id)
    self_check(full)
    self_check(small)
    # build() is repeatable, and crossings keep counting after it
    assert sampled.build().totals == small.totals
    for b in (detailed, sampled):
        b.begin_call(20000)
        b.overhead(20000, 20002)
        b.region_run("0/0", 0, 20003, 20013, 20014, None, None)
        b.end_call(20020)
    again = sampled.build().totals
    assert again == detailed.build().totals
    assert (again.sites[0].crossings, again.sites[0].calls_crossing) == (14, 14)
    with pytest.raises(RuntimeError, match="^begin_call inside an open call"):
        for _ in range(2):
            sampled.begin_call(30000)


def test_batched_steady_calls_out_of_order_go_call_by_call():
    """Steady calls are accounted a batch at a time on columns, which needs every call's timeline
    in order. Capture always appends spans in order; another source may not. A call whose spans
    arrive out of order is keyed, before sorting, to another structure's plan: the batch must
    notice, re-plan it and clamp it exactly as the detailed path does. So must bookkeeping that
    ends before its region does."""
    def feed(b: LedgerBuilder) -> None:
        b.set_compilation(comp("0/0"))
        b.set_compilation(comp("1/0"))
        for i, order in enumerate(("01", "01", "10", "10", "01", "01", "01", "01", "10")):
            t = 100 * i
            b.begin_call(t)
            b.overhead(t, t + 2)
            runs = {"0": ("0/0", t + 3, t + 10, t + 11), "1": ("1/0", t + 20, t + 30 + i, t + 31 + i)}
            if i == 3:  # ran 0/0 then 1/0, but reported in the other order
                runs = {"0": ("0/0", t + 20, t + 30, t + 31), "1": ("1/0", t + 3, t + 10, t + 11)}
            if i == 5:  # bookkeeping "ends" before the region does
                runs["0"] = ("0/0", t + 3, t + 10, t + 5)
            for k in order:
                cid, t0, t1, t2 = runs[k]
                b.region_run(cid, 0, t0, t1, t2, None, None)
            b.end_call(t + 50)

    _, full = builder()
    _, small = builder(first_calls=0, call_cap=1)
    feed(full)
    feed(small)
    kept = {c.index for c in small.build().calls}
    assert not kept & {3, 5}  # both went through the batched path
    totals = small.build().totals
    assert totals == full.build().totals
    r0, r1 = totals.regions
    assert (r0.runs, r1.runs) == (9, 9)
    assert r1.total_ns == sum(10 + i for i in range(9) if i != 3) + 7  # call 3's 1/0 ran 7 ns
    steady = next(p for p in totals.phases if p.phase == "steady")
    # 2 ns opening each call, 1 ns after each region, except call 5's 0/0 (none: clamped)
    assert steady.overhead_ns == 9 * 2 + 9 * 2 - 1
    assert steady.region_ns + steady.island_ns + steady.overhead_ns == steady.wall_ns == 9 * 50


def test_regions_are_listed_in_compile_order_not_string_order():
    _, b = builder()
    b.begin_call(0)
    for i, cid in enumerate(("10/0", "2/0", "2/1")):
        b.region(cid, 0, 10 * i, 10 * i + 5)
    b.end_call(100)
    assert [r.compile_id for r in b.build().totals.regions] == ["2/0", "2/1", "10/0"]


def test_detail_flag_and_open_spans_follow_the_sampling():
    """Capture reads ``detailed`` (measure seam traffic) and appends to ``open_spans``: both must
    say exactly which call is open and whether it will be kept."""
    _, b = builder(first_calls=2, call_cap=2)
    seen = []
    for i in range(6):
        assert b.open_spans is None and b.detailed is False
        b.begin_call(100 * i)
        assert b.open_spans == [] and b.current_call_index == i
        seen.append(b.detailed)
        b.region("0/0", 0, 100 * i + 1, 100 * i + 2)
        b.end_call(100 * i + 5)  # a retained steady call's record is made in build()
    assert seen == [True, True, True, False, True, False]
    assert [c.index for c in b.build().calls] == [0, 1]  # 2 and 4 were kept, then thinned out
    observed = []
    b.call_observers.append(observed.append)
    b.begin_call(1000)
    assert b.detailed is True  # an observer needs every call in detail
    assert b.end_call(1005) is None and [c.index for c in observed] == [6]
    with pytest.raises(RuntimeError, match="^end_call without begin_call$"):
        b.end_call(1010)


def test_a_call_that_raised_is_an_error_outcome_with_its_message():
    _, b = builder()
    b.begin_call(0)
    b.region("0/0", 0, 1, 2)
    b.end_call(10, error="ValueError: bad input")
    call = b.build().calls[-1]
    assert (call.outcome, call.error, call.phase) == ("error", "ValueError: bad input", "steady")


def test_late_compiles_and_fallbacks_on_sampled_calls_keep_their_phase():
    """A call not kept in detail that compiles, or falls back, is not a steady call."""
    def feed(b: LedgerBuilder) -> None:
        for i in range(12):
            b.begin_call(100 * i)
            if i == 7:
                b.set_compilation(comp("0/1", ns=30))
                b.compile_span("0/1", 100 * i + 1, 100 * i + 31)
                b.guard_miss("0/1", 100 * i + 1)
            if i == 10:
                b.fallback("0/2", "recompile limit", 100 * i + 1)
            b.region("0/0", 0, 100 * i + 40, 100 * i + 50)
            b.end_call(100 * i + 60)

    _, full = builder()
    _, small = builder(first_calls=1, call_cap=1)
    feed(full)
    feed(small)
    assert small.build().retention.dropped > 0
    totals = small.build().totals
    assert totals == full.build().totals
    by_phase = {p.phase: p.calls for p in totals.phases}
    # call 11 runs the frame's compiled graph again (a cached variant in run-only mode): steady
    assert by_phase == {"cold": 1, "steady": 10, "fallback": 1}


def test_plan_cache_is_bounded_and_uncached_calls_still_count():
    site = fake_site("print")

    def feed(b: LedgerBuilder) -> None:
        b.set_break_site(site)
        b.set_compilation(comp("0/0", site=site.site_id))
        for i in range(40):
            b.begin_call(1000 * i)
            for j in range(i % 4 + 1):  # four distinct call structures
                b.region("0/0", 0, 1000 * i + 10 * j, 1000 * i + 10 * j + 5)
            b.end_call(1000 * i + 100)

    _, ref = builder()
    _, capped = builder(first_calls=0, call_cap=1)
    capped.plan_cap = 2
    feed(ref)
    feed(capped)
    assert len(capped._plans) == 2 and len(ref._plans) == 4
    assert capped.build().totals == ref.build().totals
    st = ref.build().totals.sites[0]
    assert (st.crossings, st.calls_crossing) == (40, 40)  # the site stays open: one episode a call


def test_builder_refuses_impossible_retention_and_defaults_to_the_monotonic_clock():
    import time

    for kw in ({"first_calls": -1}, {"first_calls": 5, "call_cap": 4}, {"first_calls": 0, "call_cap": 0}):
        with pytest.raises(ValueError, match=r"^need 0 <= first_calls <= call_cap and call_cap >= 1$"):
            LedgerBuilder(RunInfo(source="fake"), fake_environment(), **kw)
    b = LedgerBuilder(RunInfo(source="fake"), fake_environment(), first_calls=0, call_cap=1)
    assert b.clock is time.perf_counter_ns


def test_islands_after_the_last_region_of_compiling_calls_add_up_at_their_break():
    """Two calls that compile and return right after a break: each one's last island follows the
    site, and the site's island time is their sum (as the island events say)."""
    clock, b = builder()
    site = fake_site("print")
    b.set_break_site(site)
    for i, (cid, tail) in enumerate((("0/0", 30), ("0/1", 40))):
        t = 1000 * i
        b.begin_call(t)
        b.set_compilation(comp(cid, site=site.site_id, ns=100))
        b.compile_span(cid, t, t + 100)
        if i:
            b.guard_miss(cid, t)
        b.region(cid, 0, t + 100, t + 110)
        b.end_call(t + 110 + tail)
    led = b.build()
    self_check(led)
    (st_,) = led.totals.sites
    assert (st_.crossings, st_.calls_crossing, st_.island_after_ns) == (2, 2, 70)
    assert [e.duration_ns for c in led.calls for e in c.events
            if isinstance(e, IslandEvent) and e.after_site_id == site.site_id] == [30, 40]


def test_a_region_reported_after_its_call_ended_is_clamped_to_the_end():
    """A region whose start the clock put after the call's end (never from capture; a skewed
    clock or an imported log can): it takes no time, at the end, and the call's time still adds up."""
    clock, b = builder()
    b.begin_call(0)
    b.set_compilation(comp("0/0", ns=40))
    b.compile_span("0/0", 0, 40)
    b.region("0/0", 0, 150, 160)
    b.end_call(100)
    led = b.build()
    self_check(led)
    (call,) = led.calls
    (region,) = [e for e in call.events if type(e).__name__ == "RegionEvent"]
    assert (region.start_ns, region.duration_ns) == (100, 0)
    cold = next(p for p in led.totals.phases if p.phase == "cold")
    assert (cold.wall_ns, cold.compile_ns, cold.region_ns, cold.island_ns) == (100, 40, 0, 60)


def test_point_events_at_one_instant_keep_the_order_they_were_reported_in():
    clock, b = builder()
    b.begin_call(0)
    b.set_compilation(comp("0/0", ns=10))
    b.compile_span("0/0", 0, 10)
    b.region("0/0", 0, 10, 20)
    b.guard_miss("0/1", 20)
    b.fallback("0/1", "recompile limit", 20)
    b.guard_miss("0/2", 20)
    b.end_call(30)
    (call,) = b.build().calls
    points = [(type(e).__name__, e.compile_id) for e in call.events if isinstance(e, (GuardMissEvent, FallbackEvent))]
    assert points == [("GuardMissEvent", "0/1"), ("FallbackEvent", "0/1"), ("GuardMissEvent", "0/2")]
    assert all(e.at_ns == 20 for e in call.events if isinstance(e, (GuardMissEvent, FallbackEvent)))


def test_runs_outside_calls_past_the_list_are_counted_summed_and_said_dropped():
    """The receipt lists the first ``outside_cap`` runs outside calls; the rest (C's backward timer
    counts them once the list is full) are still in the region's and the run's totals."""
    b = LedgerBuilder(RunInfo(source="fake"), fake_environment(), outside_cap=2)
    kept = [b.outside_region("0/0", "backward", 10, i) for i in range(3)]
    assert kept == [True, True, False]
    b.count_outside("0/0", 5, 500)
    b.count_outside("1/0", 1, 7)
    led = b.build()
    assert [o.attributed_call for o in led.outside] == [0, 1]
    assert (led.retention.outside_cap, led.retention.outside_dropped) == (2, 1 + 5 + 1)
    by_id = {r.compile_id: r for r in led.totals.regions}
    assert (by_id["0/0"].outside_runs, by_id["0/0"].outside_ns) == (3 + 5, 30 + 500)
    assert (by_id["1/0"].outside_runs, by_id["1/0"].outside_ns) == (1, 7)
    assert (led.totals.outside_runs, led.totals.outside_ns) == (9, 537)
