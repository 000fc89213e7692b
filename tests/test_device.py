"""The device timeline, torch-free: a fake stream on the fake host clock (model/device.py).

What is pinned: the identity (regions + seam gaps = span, integer nanoseconds), seam gaps that
hold the island's idle device time, host waits and sync counts, lazy resolution in any
completion order, the event pool, sampling of calls not kept in detail, retention, incomplete
timelines, graph capture, other streams, and that CPU ledgers are unchanged.
"""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seamscope.analyze.receipt import make_receipt
from seamscope.analyze.verify import check_receipt
from seamscope.ingest.receipt import parse_receipt
from seamscope.model.builder import LedgerBuilder
from seamscope.model.canonical import canonical_bytes
from seamscope.model.device import DeviceTracker, FakeDevice
from seamscope.model.fake import (
    FakeCall,
    FakeClock,
    FakeProgram,
    FakeStep,
    fake_environment,
    fake_site,
    play,
)
from seamscope.model.ledger import Compilation, DeviceTimeline, RunInfo

# A step: ("r", compile_id, host_ns, device_ns) a region that queues device work and returns;
# ("i", host_ns, sync, device_ns) an island: host work, an optional device-to-host sync first,
# and kernels of its own.


def _builder(clock: FakeClock, first_calls: int = 4, call_cap: int = 8) -> LedgerBuilder:
    return LedgerBuilder(
        RunInfo(source="fake", command=["fake"]), fake_environment(), clock=clock,
        first_calls=first_calls, call_cap=call_cap,
    )


def _two_blocks(b: LedgerBuilder) -> str:
    """Compilations 0/0 (ends in a break) and 1/0 (resumes after it): the workload's shape."""
    site = fake_site("item")
    b.set_break_site(site)
    for cid, own, resume in (("0/0", site.site_id, None), ("1/0", None, site.site_id)):
        b.set_compilation(
            Compilation(
                compile_id=cid, frame_name="forward", file="model.py", line=1, status="ok", graph_count=1,
                own_break_site_id=own, own_break_depth=0 if own else None,
                resume_site_id=resume, resume_depth=0 if resume else None,
            )
        )
    return site.site_id


def _call(b: LedgerBuilder, clock: FakeClock, dev: FakeDevice, steps: list[tuple]) -> None:
    """Drive the builder and the tracker exactly as capture's wrappers do."""
    b.begin_call(clock())
    tracker = b.device
    for step in steps:
        if step[0] == "r":
            _, cid, host, work = step
            dc = b.device_call
            entry = tracker.enter(dc, clock()) if dc is not None else None
            t0 = clock()
            dev.launch(work)
            t1 = clock.advance(host)
            b.region_run(cid, 0, t0, t1, t1, None, None)
            if dc is not None:
                tracker.exit(dc, cid, entry, clock())
        else:
            _, host, sync, work = step
            if sync:
                dev.sync()
            if work:
                dev.launch(work)
            clock.advance(host)
    b.end_call(clock())


ITEM = [
    ("r", "0/0", 50_000, 3_300_000),
    ("i", 30_000, True, 0),
    ("r", "1/0", 50_000, 3_300_000),
    ("i", 10_000, False, 0),
]
NOSYNC = [
    ("r", "0/0", 50_000, 3_300_000),
    ("i", 30_000, False, 0),
    ("r", "1/0", 50_000, 3_300_000),
    ("i", 10_000, False, 0),
]


def _run(steps: list[tuple], calls: int = 3, latency: int = 5_000, **kw) -> tuple[LedgerBuilder, FakeDevice, FakeClock]:
    clock = FakeClock()
    dev = FakeDevice(clock, latency=latency, **kw)
    b = _builder(clock)
    b.attach_device(dev, every=2)
    _two_blocks(b)
    for _ in range(calls):
        _call(b, clock, dev, steps)
        clock.advance(1_000_000)  # the loop's own host work between calls
    return b, dev, clock


def _identity(t: DeviceTimeline) -> None:
    assert len(t.seams) == len(t.regions) + 1
    assert sum(r.duration_ns for r in t.regions) + sum(s.gap_ns for s in t.seams) == t.span_ns
    for r in t.regions:
        assert r.duration_ns >= 0 and r.start_ns >= 0
    assert all(s.gap_ns >= 0 for s in t.seams)


def test_a_sync_at_the_seam_is_charged_the_stall_not_the_previous_regions_work():
    b, dev, clock = _run(ITEM)
    dev.synchronize()  # only so that the test can read every event now
    led = b.build()
    call = led.calls[0]  # the later calls start with the previous call's second block still queued
    t = call.device
    assert isinstance(t, DeviceTimeline)
    _identity(t)
    assert [r.duration_ns for r in t.regions] == [3_300_000, 3_300_000]
    # the device sat idle from block 1's end until the relaunch after the island's rest, plus launch latency
    assert t.seams[1].gap_ns == 30_000 + 5_000
    assert t.seams[1].syncs == 1
    # the host waited from the sync (at the island's start) until block 1 drained, then ran the island
    assert t.seams[1].host_wait_ns == 3_300_000 + 5_000 - 50_000 + 30_000
    # the host timeline still charges the island with the wait: the device lane says why
    island = [e for e in call.events if type(e).__name__ == "IslandEvent" and e.after_site_id]
    assert island and island[0].duration_ns > 3_000_000


def test_without_a_sync_the_seam_costs_the_device_nothing():
    b, dev, _ = _run(NOSYNC)
    dev.synchronize()
    call = b.build().calls[-1]
    t = call.device
    assert isinstance(t, DeviceTimeline)
    _identity(t)
    assert t.seams[1].gap_ns == 0 and t.seams[1].syncs == 0 and t.seams[1].host_wait_ns == 0
    # both blocks' device work, though the call returned to Python long before it completed
    assert t.span_ns >= 6_600_000 > 40 * call.wall_ns


def test_device_totals_sum_the_timed_calls_per_phase_site_and_region():
    b, dev, _ = _run(ITEM, calls=6)
    dev.synchronize()
    led = b.build()
    d = led.totals.device
    assert not isinstance(d, msgspec.UnsetType)
    timed = [c.device for c in led.calls if not isinstance(c.device, msgspec.UnsetType)]
    assert len(timed) == 6  # first_calls=4, stride 1: all retained, all timed
    by_phase = {p.phase: p for p in d.phases}
    total = sum(p.calls for p in d.phases)
    assert total == 6
    assert sum(p.span_ns for p in d.phases) == sum(t.span_ns for t in timed)
    assert sum(p.region_ns + p.gap_ns for p in d.phases) == sum(p.span_ns for p in d.phases)
    assert by_phase["steady"].syncs == 6  # one per call
    (site,) = d.sites
    assert site.syncs == 6 and site.calls == 6
    assert site.gap_ns == sum(t.seams[1].gap_ns for t in timed)
    assert {r.compile_id: r.runs for r in d.regions} == {"0/0": 6, "1/0": 6}


def test_events_are_read_only_once_complete_and_never_by_a_sync():
    clock = FakeClock()
    dev = FakeDevice(clock, latency=5_000)
    b = _builder(clock)
    b.attach_device(dev)
    _two_blocks(b)
    _call(b, clock, dev, NOSYNC)
    assert dev.synchronized == 0
    assert b.device.pending == 1  # the device is still working: nothing read
    b.build()
    assert dev.synchronized == 0 and b.device.pending == 1
    clock.advance(10_000_000)  # the device finished meanwhile
    led = b.build()
    assert b.device.pending == 0 and dev.synchronized == 0
    assert isinstance(led.calls[0].device, DeviceTimeline)


def test_pending_calls_resolve_in_any_completion_order():
    """A later call's events can complete first (work on other streams, a fake reordering):
    each call is resolved when its own events did."""
    clock = FakeClock()
    dev = FakeDevice(clock)
    b = _builder(clock)
    b.attach_device(dev)
    _two_blocks(b)
    _call(b, clock, dev, NOSYNC)
    first = b.device._pending[0]
    _call(b, clock, dev, [("r", "0/0", 10_000, 1_000), ("i", 10_000, False, 0)])
    second = b.device._pending[1]
    first.end.at = 1 << 60  # the first call's end event completes last
    clock.advance(20_000_000)
    b.device.poll()
    assert b.device.pending == 1 and b.device._pending[0] is first
    first.end.at = clock.now
    b.device.poll()
    led = b.build()
    assert b.device.pending == 0
    assert [c.index for c in led.calls if isinstance(c.device, DeviceTimeline)] == [0, 1]
    del second


def test_events_come_from_a_pool():
    light = [("r", "0/0", 50_000, 100_000), ("i", 30_000, False, 0), ("r", "1/0", 50_000, 100_000)]
    b, dev, clock = _run(light, calls=50)  # the device keeps up: each call resolves by the next
    clock.advance(1_000_000_000)
    led = b.build()
    timed = sum(p.calls for p in led.totals.device.phases)
    # 6 events a call (anchor, 2 x entry/exit, end); a call's events are back once it resolved
    assert timed > 20 and dev.records == 6 * timed
    assert dev.made <= 6 * 2


def test_calls_not_kept_in_detail_are_sampled_at_the_declared_rate():
    clock = FakeClock()
    dev = FakeDevice(clock)
    b = _builder(clock, first_calls=4, call_cap=8)
    b.attach_device(dev, every=5)
    _two_blocks(b)
    detailed, timed = set(), set()
    for i in range(40):
        b.begin_call(clock())
        if b.detailed:
            detailed.add(i)
        if b.device_call is not None:
            timed.add(i)
        b.region_run("0/0", 0, clock(), clock.advance(1000), clock(), None, None)
        b.end_call(clock.advance(10))
        clock.advance(10_000_000)
    led = b.build()
    assert led.retention.device_every == 5
    d = led.totals.device
    assert not isinstance(d, msgspec.UnsetType)
    assert timed == detailed | {i for i in range(40) if i % 5 == 0}
    assert len(timed) > len(detailed)
    assert sum(p.calls for p in d.phases) == len(timed)
    retained = {c.index for c in led.calls}
    # a call kept in detail carries its timeline; the others are only summed
    assert {c.index for c in led.calls if isinstance(c.device, DeviceTimeline)} == retained
    assert retained < timed


def test_a_hung_event_leaves_the_host_timeline_and_says_the_device_one_is_incomplete():
    clock = FakeClock()
    dev = FakeDevice(clock)
    b = _builder(clock)
    b.attach_device(dev)
    _two_blocks(b)
    _call(b, clock, dev, NOSYNC)
    clock.advance(100_000_000)
    dev.hung = True
    _call(b, clock, dev, NOSYNC)
    assert b.device.finish(synchronize=True) == 1
    led = b.build()
    t0, t1 = (c.device for c in led.calls)
    assert isinstance(t0, DeviceTimeline) and t0.complete
    assert isinstance(t1, DeviceTimeline) and not t1.complete and t1.span_ns == 0
    assert led.calls[1].events  # the host timeline is kept
    assert not isinstance(led.totals.device, msgspec.UnsetType) and led.totals.device.incomplete == 1
    assert any("incomplete device timeline" in w for w in led.run.warnings)


def test_no_event_is_recorded_or_queried_during_graph_capture():
    clock = FakeClock()
    dev = FakeDevice(clock)
    b = _builder(clock)
    b.attach_device(dev)
    _two_blocks(b)
    dev.capture = True  # the fake raises on any record or query now
    _call(b, clock, dev, NOSYNC)
    dev.capture = False
    led = b.build()
    assert isinstance(led.calls[0].device, msgspec.UnsetType)
    assert b.device.capture_skipped == 1
    assert any("CUDA graph" in w for w in led.run.warnings)


def test_a_region_on_another_stream_is_not_attributed_and_said_so():
    clock = FakeClock()
    dev = FakeDevice(clock)
    b = _builder(clock)
    b.attach_device(dev)
    _two_blocks(b)
    b.begin_call(clock())
    dc = b.device_call
    dev.current = 1
    entry = b.device.enter(dc, clock())
    b.region_run("0/0", 0, clock(), clock.advance(10), clock(), None, None)
    b.device.exit(dc, "0/0", entry, clock())
    dev.current = 0
    b.end_call(clock.advance(10))
    b.device.finish()
    led = b.build()
    assert any("other streams is not attributed" in w for w in led.run.warnings)


def test_syncs_not_counted_where_the_source_cannot_count_them():
    b, dev, _ = _run(ITEM, count_syncs=False)
    dev.synchronize()
    t = b.build().calls[-1].device
    assert isinstance(t, DeviceTimeline)
    assert all(s.syncs is None and s.host_wait_ns is None for s in t.seams)


@settings(max_examples=60, deadline=None)
@given(
    works=st.lists(st.integers(0, 5_000_000), min_size=1, max_size=6),
    hosts=st.lists(st.integers(1, 200_000), min_size=6, max_size=6),
    syncs=st.lists(st.booleans(), min_size=6, max_size=6),
    jitter=st.sampled_from([0.0, 1e-7, 3.3e-7, -2e-7]),
    latency=st.integers(0, 20_000),
)
def test_the_identity_holds_in_integer_nanoseconds(works, hosts, syncs, jitter, latency):
    """Whatever the device times (floats in ms, jittered), offsets are rounded once: region
    device time + seam gaps == span, exactly, and receipts verify."""
    clock = FakeClock()
    dev = FakeDevice(clock, latency=latency, ms_jitter=jitter)
    b = _builder(clock)
    b.attach_device(dev)
    steps: list[tuple] = []
    for i, w in enumerate(works):
        steps.append(("r", f"{i}/0", hosts[i], w))
        steps.append(("i", hosts[-1 - i], syncs[i], w // 3))
    _call(b, clock, dev, steps)
    b.device.finish()
    led = b.build()
    t = led.calls[0].device
    assert isinstance(t, DeviceTimeline)
    _identity(t)
    v = check_receipt(msgspec.json.decode(canonical_bytes(make_receipt(led))))
    assert v.ok, v.lines()


def test_verify_recomputes_the_device_identity():
    b, dev, _ = _run(ITEM)
    b.device.finish()
    receipt = make_receipt(b.build())
    raw = msgspec.json.decode(canonical_bytes(receipt))
    assert raw["schema_version"] == 2
    assert check_receipt(raw).ok
    raw["ledger"]["calls"][0]["device"]["seams"][1]["gap_ns"] += 1
    v = check_receipt(raw)
    assert not v.ok and "DEVICE_IDENTITY_BROKEN" in v.codes


def test_a_device_receipt_reads_back_and_a_cpu_receipt_is_unchanged():
    b, dev, _ = _run(ITEM)
    b.device.finish()
    receipt = make_receipt(b.build())
    again = parse_receipt(canonical_bytes(receipt))
    assert again.ledger == receipt.ledger
    program = FakeProgram(calls=[FakeCall([FakeStep("region", 1000), FakeStep("island", 10)])] * 3)
    cpu = make_receipt(play(program).build())
    raw = msgspec.json.decode(canonical_bytes(cpu))
    assert raw["schema_version"] == 1 and raw["ledger"]["schema_version"] == 1
    assert "device" not in raw["ledger"]["totals"] and "device_every" not in raw["ledger"]["retention"]
    assert all("device" not in c for c in raw["ledger"]["calls"])


def test_device_tracker_rejects_nothing_it_cannot_read():
    """A tracker with nothing pending does nothing at finish (no synchronize)."""
    clock = FakeClock()
    dev = FakeDevice(clock)
    tr = DeviceTracker(dev, lambda *a: None)
    assert tr.finish() == 0 and dev.synchronized == 0


@pytest.mark.parametrize("every", [0, -1])
def test_attach_device_needs_a_positive_rate(every):
    clock = FakeClock()
    with pytest.raises(ValueError) as e:
        _builder(clock).attach_device(FakeDevice(clock), every=every)
    assert str(e.value) == "every must be >= 1"  # what an API user reads


def test_findings_rank_a_syncing_break_by_its_device_seam_gap_not_its_island():
    b, dev, _ = _run(ITEM, calls=6)
    b.device.finish()
    led = b.build()
    receipt = make_receipt(led)
    (f,) = [f for f in receipt.findings.findings if f.axis == "fragmentation"]
    cost = f.cost
    assert cost is not None and not isinstance(cost.device, msgspec.UnsetType)
    # the host island after the break holds the wait for block 1 (milliseconds); the device lost
    # only the stall at the seam
    assert cost.island_median_ns is not None and cost.island_median_ns > 3_000_000
    assert cost.device.gap_per_call_ns == 35_000
    assert cost.device.syncs_per_call == 1.0
    steady = next(p.calls for p in led.totals.phases if p.phase == "steady")
    assert cost.device.estimated_ns == 35_000 * steady
    assert "device-to-host sync" in f.sentence and "on the device" in receipt.findings.ranked_by


def test_a_break_without_a_sync_costs_nothing_on_the_device_and_says_no_sync():
    b, dev, _ = _run(NOSYNC, calls=6)
    b.device.finish()
    (f,) = [f for f in make_receipt(b.build()).findings.findings if f.axis == "fragmentation"]
    assert f.cost is not None and not isinstance(f.cost.device, msgspec.UnsetType)
    assert f.cost.device.estimated_ns == 0 and f.cost.device.syncs_per_call == 0
    assert "sync" not in f.sentence


def test_summary_and_terminal_show_device_time_per_phase():
    import io

    from rich.console import Console

    from seamscope.render.terminal import TerminalRenderer

    b, dev, _ = _run(ITEM, calls=6)
    b.device.finish()
    receipt = make_receipt(b.build())
    (steady,) = [p for p in receipt.summary.phases if p.phase == "steady"]
    d = steady.device
    assert not isinstance(d, msgspec.UnsetType)
    assert d.region_per_call_ns + d.gap_per_call_ns in (
        d.span_per_call_ns - 1,
        d.span_per_call_ns,
        d.span_per_call_ns + 1,
    )
    assert d.syncs_per_call == 1.0
    out = io.StringIO()
    TerminalRenderer(Console(file=out, width=200)).print(receipt)
    assert "device time per call" in out.getvalue()
    cpu = make_receipt(play(FakeProgram(calls=[FakeCall([FakeStep("region", 1000)])] * 2)).build())
    out = io.StringIO()
    TerminalRenderer(Console(file=out, width=200)).print(cpu)
    assert "device" not in out.getvalue()


def test_perfetto_draws_a_device_lane_with_seam_gaps_and_none_on_cpu():
    from seamscope.render.perfetto import DEVICE_TRACKS, PerfettoRenderer

    b, dev, _ = _run(ITEM, calls=2)
    b.device.finish()
    receipt = make_receipt(b.build())
    events = PerfettoRenderer().events(receipt)
    device = [e for e in events if e.get("tid") == DEVICE_TRACKS["device"] and e["ph"] == "X"]
    gaps = [e for e in events if e.get("tid") == DEVICE_TRACKS["device seam gaps"] and e["ph"] == "X"]
    t = receipt.ledger.calls[0].device
    assert isinstance(t, DeviceTimeline)
    assert [e["dur"] for e in device[:2]] == [r.duration_ns / 1000 for r in t.regions]
    sync = [e for e in gaps if e["name"] == "sync gap"]
    assert len(sync) == 2 and sync[0]["dur"] == t.seams[1].gap_ns / 1000 and sync[0]["args"]["syncs"] == 1
    # the second call starts after the first one's device span, which outlasts its host wall
    calls = [e for e in events if e.get("name", "").startswith("call ") and e["ph"] == "X"]
    assert calls[1]["ts"] == max(receipt.ledger.calls[0].wall_ns, t.span_ns) / 1000
    cpu = make_receipt(play(FakeProgram(calls=[FakeCall([FakeStep("region", 1000)])] * 2)).build())
    assert not any(e.get("tid") in DEVICE_TRACKS.values() for e in PerfettoRenderer().events(cpu))


def test_html_report_shows_host_and_device_lanes_only_on_a_device():
    from seamscope.analyze.report_view import build_device_lanes, build_view, compile_colours
    from seamscope.render.html import HtmlRenderer

    b, dev, _ = _run(ITEM, calls=2)
    b.device.finish()
    receipt = make_receipt(b.build())
    lanes = build_device_lanes(receipt, compile_colours(receipt))
    assert lanes is not None and len(lanes.rows) == 2
    row = lanes.rows[0]
    assert [x.kind for x in row.device] == ["region", "sync", "region"] and row.syncs == 1
    html = HtmlRenderer().render(receipt)
    assert 'id="device-lanes"' in html and "device-to-host sync" in html
    cpu = make_receipt(play(FakeProgram(calls=[FakeCall([FakeStep("region", 1000)])] * 2)).build())
    assert build_view(cpu).device_lanes is None
    assert 'id="device-lanes"' not in HtmlRenderer().render(cpu)


def test_a_graph_capture_begun_inside_a_call_leaves_its_lane_incomplete_and_nothing_is_queried():
    clock = FakeClock()
    dev = FakeDevice(clock)
    b = _builder(clock)
    b.attach_device(dev)
    _two_blocks(b)
    b.begin_call(clock())
    dc = b.device_call
    entry = b.device.enter(dc, clock())
    b.region_run("0/0", 0, clock(), clock.advance(10), clock(), None, None)
    b.device.exit(dc, "0/0", entry, clock())
    dev.capture = True  # the user's code in the island starts capturing
    real_done = dev.done
    dev.done = lambda ev: pytest.fail("queried an event during capture")  # type: ignore[method-assign]
    b.end_call(clock.advance(10))
    dev.done = real_done  # type: ignore[method-assign]
    dev.capture = False
    led = b.build()
    t = led.calls[0].device
    assert isinstance(t, DeviceTimeline) and not t.complete
    assert b.device.capture_skipped == 1 and b.device.pending == 0


def test_verify_recomputes_the_summarys_device_time_per_call():
    b, dev, _ = _run(ITEM, calls=5)
    b.device.finish()
    raw = msgspec.json.decode(canonical_bytes(make_receipt(b.build())))
    assert check_receipt(raw).ok
    steady = next(p for p in raw["summary"]["phases"] if p["phase"] == "steady")
    steady["device"]["gap_per_call_ns"] += 1
    v = check_receipt(raw)
    assert "DEVICE_SUMMARY_MISMATCH" in v.codes


def test_ctrl_c_during_the_final_synchronize_leaves_the_rest_incomplete():
    clock = FakeClock()
    dev = FakeDevice(clock)
    b = _builder(clock)
    b.attach_device(dev)
    _two_blocks(b)
    _call(b, clock, dev, NOSYNC)

    def interrupted() -> None:
        raise KeyboardInterrupt

    dev.synchronize = interrupted  # type: ignore[method-assign]
    with pytest.raises(KeyboardInterrupt):
        b.device.finish(synchronize=True)
    assert b.device.pending == 1  # nothing lost: what the session does next
    assert b.device.finish(synchronize=False) == 1
    t = b.build().calls[0].device
    assert isinstance(t, DeviceTimeline) and not t.complete


def test_device_figures_per_call_are_rounded_half_up_and_syncs_to_six_places():
    """Per-call device figures are integer nanoseconds rounded half up; syncs per call keep six
    decimals (one sync in three calls is 0.333333, not 0 and not 0.3333333)."""
    from seamscope.analyze.summary import device_phase_stats

    b, _, _ = _run(ITEM, calls=3)
    b.device.finish()
    led = b.build()
    dev = led.totals.device
    assert not isinstance(dev, msgspec.UnsetType)
    phase = msgspec.structs.replace(dev.phases[0], calls=3, span_ns=10, region_ns=11, gap_ns=4, host_wait_ns=2,
                                    syncs=1, wall_ns=3)
    led = msgspec.structs.replace(led, totals=msgspec.structs.replace(
        led.totals, device=msgspec.structs.replace(dev, phases=[phase])))
    (st,) = device_phase_stats(led).values()
    assert (st.calls, st.span_per_call_ns, st.region_per_call_ns, st.gap_per_call_ns) == (3, 3, 4, 1)
    assert (st.host_wait_per_call_ns, st.wall_per_call_ns) == (1, 1)  # 2/3 and 3/3: half up
    assert st.syncs_per_call == 0.333333


def test_the_seam_after_the_last_region_is_charged_to_the_break_it_follows():
    """A call that returns right after the break (its last block ends there): the device seam
    after that block, a sync in it, is the break's; so is a sync before the first region the
    first seam's (its island starts when the call does)."""
    clock = FakeClock()
    dev = FakeDevice(clock, latency=5_000)
    b = _builder(clock)
    b.attach_device(dev, every=1)
    site = _two_blocks(b)
    steps = [("i", 10_000, True, 0), ("r", "0/0", 50_000, 3_300_000), ("i", 30_000, True, 0)]
    _call(b, clock, dev, steps)
    dev.synchronize()
    led = b.build()
    t = led.calls[0].device
    assert isinstance(t, DeviceTimeline)
    _identity(t)
    assert [s.syncs for s in t.seams] == [1, 1]
    assert t.seams[0].host_wait_ns == 5_000 + 10_000  # the call's anchor reaching the device, then the island
    assert t.seams[1].host_wait_ns == 3_300_000 + 5_000 - 50_000 + 30_000
    dt = led.totals.device
    assert dt is not None
    (st_,) = dt.sites
    assert (st_.phase, st_.site_id, st_.syncs, st_.calls) == ("steady", site, 1, 1)
    assert (st_.gap_ns, st_.host_wait_ns) == (t.seams[1].gap_ns, t.seams[1].host_wait_ns)


def test_a_call_captured_as_a_graph_has_no_device_lane_among_timed_ones():
    clock = FakeClock()
    dev = FakeDevice(clock)
    b = _builder(clock)
    b.attach_device(dev, every=1)
    _two_blocks(b)
    for capture in (False, True, False):
        dev.capture = capture
        _call(b, clock, dev, NOSYNC)
        dev.capture = False
        clock.advance(10_000_000)
    led = b.build()
    assert [isinstance(c.device, DeviceTimeline) for c in led.calls] == [True, False, True]
    assert isinstance(led.calls[1].device, msgspec.UnsetType)
