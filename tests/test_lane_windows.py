"""When capture's C lane may sum calls itself, and when every call must reach the builder (no torch).

C sums a steady call only inside a window the builder opens (``lane.budget``): never while a
compile budget watches every call, never after a fallback (a call that ran a fallen frame
eagerly looks steady to C), and never over a call due on the device. GIVEN a builder with the C
lane attached, fed as capture feeds it, WHEN such a window closes, THEN the calls a user sees
(what a budget observed, each call's phase, which calls have a device timeline) are those the
pure-Python path gives.
"""

from __future__ import annotations

import time

import pytest
from fakes import PerfClock, comp, drive, lane_builder, timers

from seamscope import _native
from seamscope.model.builder import LedgerBuilder
from seamscope.model.device import FakeDevice
from seamscope.model.fake import fake_environment
from seamscope.model.ledger import Call, RegionEvent, RunInfo
from seamscope.model.selfcheck import self_check

pytestmark = pytest.mark.skipif(_native.NATIVE is None, reason=f"no C hot path: {_native.WHY_NOT}")


def _by_phase(b: LedgerBuilder) -> dict[str, int]:
    led = b.build()
    self_check(led)
    return {p.phase: p.calls for p in led.totals.phases if p.calls}


def test_a_watching_budget_sees_every_call_in_full_and_nothing_after_it_stops():
    b, lane = lane_builder(first_calls=0, call_cap=4)
    regions = timers(lane, 3)
    drive(b, lane, regions, 20)
    seen: list[Call] = []
    b.watch_calls(seen.append)
    drive(b, lane, regions, 10)
    assert [c.index for c in seen] == list(range(20, 30))
    assert all(sum(isinstance(e, RegionEvent) for e in c.events) == 3 for c in seen)
    assert {(c.phase, c.outcome) for c in seen} == {("steady", "hit")}
    b.unwatch_calls(seen.append)
    b.unwatch_calls(seen.append)  # no longer watching: nothing to remove
    drive(b, lane, regions, 20)
    assert len(seen) == 10
    assert _by_phase(b) == {"steady": 50} and b.call_count == 50
    led = b.build()
    assert [r.runs for r in led.totals.regions] == [50] * 3
    assert led.retention.dropped == 50 - len(led.calls)


def test_after_a_fallback_every_call_reaches_the_builder_and_eager_runs_are_fallback_calls():
    """After the recompile limit, a call that skipped the fallen frame's graph ran it eagerly:
    C, which sees only the graphs that ran, must not sum it as a steady call."""
    b, lane = lane_builder(first_calls=0, call_cap=4)
    b.set_compilation(comp("0/0"))
    b.set_compilation(comp("1/0"))
    regions = timers(lane, 2)
    drive(b, lane, regions, 30)
    assert lane.enter()  # a steady call C opened falls back in frame 1
    regions[0](1)
    t = time.perf_counter_ns()
    b.fallback("1/1", "recompile limit", t)
    lane.exit(None)
    drive(b, lane, regions[:1], 20)  # frame 1 ran eagerly: no graph of it ran
    drive(b, lane, regions, 10)  # a cached variant of frame 1 ran
    assert _by_phase(b) == {"steady": 40, "fallback": 21}
    assert b.build().totals.calls == 61


def _device_run(with_lane: bool, calls: int, every: int) -> tuple[LedgerBuilder, int]:
    """``calls`` steady calls, each one the builder opens syncing in its last island; how many C opened."""
    dev = FakeDevice(PerfClock())  # nothing launched: a sync never waits
    if with_lane:
        b, lane = lane_builder(first_calls=2, call_cap=4)
    else:
        b = LedgerBuilder(RunInfo(source="fake"), fake_environment(), first_calls=2, call_cap=4)
        lane = _native.NATIVE.Lane()  # type: ignore[union-attr]  # never attached: it opens no call
    b.attach_device(dev, every=every)
    opened = drive(b, lane, timers(lane, 2), calls, last_island=dev.sync)
    b.device.finish()
    return b, opened


@pytest.mark.parametrize("every", [1, 3, 16])
def test_the_lane_sums_every_call_but_those_due_on_the_device(every):
    """The same calls are timed on the device with C summing the others as in pure Python: one
    in ``every`` and each call kept in detail, every kept call with its device timeline, the
    sync in its last island counted. C opens every other call."""
    py, none = _device_run(False, 300, every)
    c, opened = _device_run(True, 300, every)
    want = py.build().totals.device
    got = c.build().totals.device
    assert want is not None and got is not None
    (pw,) = want.phases
    (cw,) = got.phases
    assert cw.calls == pw.calls >= -(-300 // every)
    assert cw.syncs == pw.syncs == cw.calls
    assert (none, opened) == (0, 300 - cw.calls)
    if every == 1:
        assert cw.calls == 300
    led = c.build()
    assert led.retention.device_every == every
    assert all(call.device is not None and len(call.device.regions) == 2 for call in led.calls)
    assert [call.index for call in led.calls] == [call.index for call in py.build().calls]
    self_check(led)


def test_a_region_the_python_wrapper_times_in_an_adopted_call_is_the_calls():
    """Once the builder adopts the call C opened, ``open_spans`` is that call's span list: a
    region capture's Python wrapper times there (appending ``region_run``'s tuple itself, as
    ``capture/regions.py`` does) is one of the call's regions, not a run outside any call."""
    b, lane = lane_builder(first_calls=8, call_cap=8)
    regions = timers(lane, 1)
    drive(b, lane, regions, 3)
    assert lane.enter()
    regions[0](1)
    b.set_compilation(comp("5/0", ns=10))
    t = time.perf_counter_ns()
    b.compile_span("5/0", t, t + 10)  # adopted: the builder's call now
    spans = b.open_spans
    t0 = time.perf_counter_ns()
    t1 = time.perf_counter_ns()
    if spans is None:  # what the wrapper does outside a call
        b.outside_region("5/0", "forward", t1 - t0, None)
    else:
        spans.append(("r", t0, t1, "5/0", 0, 1, 64, time.perf_counter_ns()))
    lane.exit(None)
    led = b.build()
    call = led.calls[3]
    assert [(e.compile_id, e.out_bytes) for e in call.events if isinstance(e, RegionEvent)] == [
        ("0/0", None),
        ("5/0", 64),
    ]
    assert (call.phase, led.totals.outside_runs) == ("cold", 0)
    self_check(led)


def test_the_island_after_a_break_that_ends_calls_adds_calls_summed_in_c_to_the_others():
    """Steady calls that return right after a break: the island after it is the site's, whether
    the builder or C summed the call (C's sums are added when the ledger is built)."""
    from seamscope.model.fake import fake_site

    site = fake_site("print")
    b, lane = lane_builder(first_calls=0, call_cap=2)
    b.set_break_site(site)
    b.set_compilation(comp("0/0", site=site.site_id))
    in_c = 0
    for i in range(40):
        t = 1000 * i
        spans = [("o", t, t + 2, "o"), ("r", t + 3, t + 13, "0/0", 0, None, None, t + 14)]
        if lane.budget > 0:  # what C does with a steady call not due in detail
            assert lane.plans[("o", "0/0")].add(spans, t, t + 20)
            lane.fast_calls += 1
            lane.budget -= 1
            in_c += 1
        else:
            b.begin_call(t)
            b.overhead(t, t + 2)
            b.region_run("0/0", 0, t + 3, t + 13, t + 14, None, None)
            b.end_call(t + 20)
        if i == 20:
            b.build()  # an interrupted run's build on the way: C's sums so far are taken
    assert 0 < in_c < 40
    led = b.build()
    self_check(led)
    (st_,) = led.totals.sites
    assert (st_.site_id, st_.island_after_ns) == (site.site_id, 6 * 40)
    assert next(p for p in led.totals.phases if p.phase == "steady").island_ns == (1 + 6) * 40


def test_the_call_index_c_labels_next_is_the_builders_count_of_calls():
    """C labels a steady forward's autograd node with ``call_base + fast_calls``, its call's index:
    whenever the builder has counted the calls C closed, that is the number of calls so far."""
    b, lane = lane_builder(first_calls=2, call_cap=4)
    regions = timers(lane, 2)
    total = 0
    for n in (1, 7, 30):
        total += n
        assert drive(b, lane, regions, n) >= 0
        led = b.build()  # counts the calls C closed
        assert led.totals.calls == total
        assert lane.call_base + lane.fast_calls == total
