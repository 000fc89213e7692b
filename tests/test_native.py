"""The optional C hot path (``seamscope._speedups``) against the pure-Python path.

C must change what capture costs, never what it reports: the same arithmetic as
``model.builder_account.sum_fast`` (property-tested), the same counts on real torch workloads (steady
calls summed in C, calls the builder adopts because they compiled or fell back, errors), and the
same clock as ``time.perf_counter_ns``.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import time
import types

import pytest
from conftest import examples
from fakes import comp, drive, lane_builder, timers
from hypothesis import given, settings
from hypothesis import strategies as st

from seamscope import _native
from seamscope.model.builder import LedgerBuilder
from seamscope.model.builder_account import sum_fast
from seamscope.model.fake import fake_environment
from seamscope.model.ledger import RegionEvent, RunInfo
from seamscope.model.plan import RegionAcc, SiteAcc
from seamscope.model.selfcheck import self_check

speedups = _native.NATIVE
needs_c = pytest.mark.skipif(speedups is None, reason=f"no C hot path: {_native.WHY_NOT}")


def _cannot_build_c() -> str | None:
    """Why this machine cannot build the extension (no compiler, no Python headers), or None."""
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        return f"no C compiler ({cc}) on this machine"
    if not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")):
        return "no Python headers (Python.h) on this machine"
    return None


def test_the_c_path_is_built_unless_turned_off():
    """`make test` installs with setup.py, which builds it: a build that silently failed would
    leave capture 2-3x costlier while every figure still looked right. Where the machine cannot
    build C at all, capture runs in pure Python (and says so); that is not this test's failure."""
    if os.environ.get("SEAMSCOPE_PURE_PYTHON", "") not in ("", "0"):
        assert speedups is None and _native.WHY_NOT == "SEAMSCOPE_PURE_PYTHON is set"
        return
    why = _cannot_build_c() if speedups is None else None
    if why is not None:
        pytest.skip(f"the C hot path cannot be built here: {why}")
    assert speedups is not None, f"capture's C hot path is not used: {_native.WHY_NOT}"


@needs_c
def test_c_span_layout_is_the_models():
    """The span tuple's layout is defined once (model/spans.py) and mirrored by C's SPAN_*
    constants: a span C builds and one the builder reads must agree item by item."""
    from seamscope.model import spans

    assert speedups is not None
    assert speedups.SPAN_LAYOUT == spans.LAYOUT
    sums = speedups.PlanSums("r")
    span = spans.region(10, 30, "0/0", 0, None, None, 35)
    assert len(span) == spans.REGION_LEN and span[spans.BOOK_END] == 35 and span[spans.KEY] == "0/0"
    assert sums.add([span], 0, 50)
    _calls, wall, island, overhead, gaps, dsum, _lo, _hi = sums.take()
    assert (wall, island, overhead, gaps, dsum) == (50, 25, 5, [10, 15], [20])


@needs_c
def test_c_clock_is_perf_counter_ns():
    assert speedups is not None
    for _ in range(100):
        a = time.perf_counter_ns()
        b = speedups.clock_ns()
        c = time.perf_counter_ns()
        assert a <= b <= c


@pytest.fixture(params=["ticks", "clock_gettime"])
def clock_kind(request):  # type: ignore[no-untyped-def]
    """Both ways C may time a call's inside: the time stamp counter (where _native chose it)
    mapped between two clock_gettime reads, or clock_gettime throughout."""
    if speedups is None:
        pytest.skip(f"no C hot path: {_native.WHY_NOT}")
    if request.param == "ticks" and _native.TICKS is None:
        pytest.skip("the time stamp counter is not used on this machine")
    speedups.set_ticks(request.param == "ticks")
    yield request.param
    speedups.set_ticks(_native.TICKS is not None)


def sleeper_regions(lane, n: int, inside: list[tuple[int, int]], ms: float = 1.0):  # type: ignore[no-untyped-def]
    """Regions that sleep, noting perf_counter_ns just inside their start and end."""
    assert speedups is not None

    def slow(*args, **kwargs):
        raise AssertionError("slow path taken")

    def graph(x):
        a = time.perf_counter_ns()
        time.sleep(ms / 1000)
        inside.append((a, time.perf_counter_ns()))
        return x

    return [speedups.RegionTimer(graph, lane, f"{i}/0", 0, slow, None) for i in range(n)]


def test_spans_c_times_lie_on_the_perf_counter_timeline(clock_kind):
    """A call handed over whole: each region's span contains what the region itself read of
    perf_counter_ns, and the call contains its spans (ticks mapped onto that timeline exactly)."""
    b, lane = lane_builder(first_calls=5, call_cap=8)
    inside: list[tuple[int, int]] = []
    regions = sleeper_regions(lane, 3, inside)
    outer = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        assert lane.enter()
        start = lane.start  # the call's start, as C read it: its spans are relative to it
        for r in regions:
            r(1)
            time.sleep(0.0005)  # an island
        lane.exit(None)
        outer.append((t0, start, time.perf_counter_ns()))
    led = b.build()
    assert len(led.calls) == 5
    for call, (t0, start, t1), ins in zip(led.calls, outer, [inside[i:i + 3] for i in range(0, 15, 3)], strict=True):
        spans = [e for e in call.events if isinstance(e, RegionEvent)]
        assert len(spans) == 3
        assert t0 <= start and start + call.wall_ns <= t1
        for e, (a, z) in zip(spans, ins, strict=True):
            # ticks become nanoseconds at a calibrated rate: a span may be off by that rate's error
            # (well under 1%; under load a 1 ms span read 3.9 µs short), the nanosecond clock never
            slack = e.duration_ns // 100 if clock_kind == "ticks" else 0
            assert start + e.start_ns <= a + slack and z <= start + e.start_ns + e.duration_ns + slack
    self_check(led)


def test_steady_sums_from_ticks_match_the_calls_measured_outside(clock_kind):
    b, lane = lane_builder(first_calls=0, call_cap=2)
    inside: list[tuple[int, int]] = []
    regions = sleeper_regions(lane, 2, inside, ms=0.2)
    outer = 0
    for _ in range(40):
        t0 = time.perf_counter_ns()
        assert lane.enter()
        for r in regions:
            r(1)
        lane.exit(None)
        outer += time.perf_counter_ns() - t0
    led = b.build()
    steady = next(p for p in led.totals.phases if p.phase == "steady")
    assert steady.calls == 40
    assert sum(z - a for a, z in inside) <= sum(r.total_ns for r in led.totals.regions) <= steady.wall_ns <= outer
    self_check(led)


def test_a_region_running_when_its_call_is_adopted_is_put_on_the_builders_timeline(clock_kind):
    """A compilation inside a region (Dynamo compiling a nested frame) makes the builder adopt
    the call mid-region; that region's start was read by C before."""

    b, lane = lane_builder(first_calls=11, call_cap=16)  # the call is kept: its events can be read
    drive(b, lane, timers(lane, 1), 10)
    inside: list[tuple[int, int]] = []

    def slow(*args, **kwargs):
        raise AssertionError("slow path taken")

    def compiling_graph(x):
        a = time.perf_counter_ns()
        b.set_compilation(comp("9/0", ns=10))
        b.compile_span("9/0", a, time.perf_counter_ns())
        time.sleep(0.001)
        inside.append((a, time.perf_counter_ns()))
        return x

    r = speedups.RegionTimer(compiling_graph, lane, "0/0", 0, slow, None)  # type: ignore[union-attr]
    t0 = time.perf_counter_ns()
    assert lane.enter()
    start = lane.start
    r(1)
    assert b.in_call
    lane.exit(None)
    t1 = time.perf_counter_ns()
    (call,) = [c for c in b.build().calls if c.index == 10]
    (e,) = [e for e in call.events if isinstance(e, RegionEvent)]
    ((a, z),) = inside
    assert t0 <= start <= start + e.start_ns <= a
    assert z <= start + e.start_ns + e.duration_ns <= start + call.wall_ns <= t1


# --- PlanSums: the arithmetic ---------------------------------------------------------------

@st.composite
def call_spans(draw):  # type: ignore[no-untyped-def]
    """A call's spans: the opening overhead then regions, as capture appends them; sometimes
    disordered (overlaps, bookkeeping before its region's end, past the call's end)."""
    start = draw(st.integers(0, 10**12))
    t = start + draw(st.integers(0, 5))
    spans = [("o", start, t, "o")]
    for i in range(draw(st.integers(0, 6))):
        s = t + draw(st.integers(-3, 50))
        e = s + draw(st.integers(-2, 500))
        c = e + draw(st.integers(-2, 5))
        spans.append(("r", s, e, f"{i}/0", 0, None, None, c))
        t = max(c, e)
    end = t + draw(st.integers(-5, 100))
    return spans, start, end


@needs_c
@settings(max_examples=examples(300))
@given(st.lists(call_spans(), min_size=1, max_size=8))
def test_plan_sums_equal_sum_fast_or_refuse(calls):
    """Per call: C adds exactly what ``sum_fast`` adds, or refuses (adds nothing) when any span
    would need clamping; then ``sum_fast`` handles it."""
    assert speedups is not None
    by_shape: dict[int, object] = {}
    for spans, start, end in calls:
        n = len(spans)
        sums = by_shape.setdefault(n, speedups.PlanSums("o" + "r" * (n - 1)))
        raccs: list[RegionAcc | None] = [None] + [RegionAcc() for _ in range(n - 1)]
        gaccs: list[SiteAcc | None] = [SiteAcc() for _ in range(n)]
        final = SiteAcc()
        ref = sum_fast(raccs, gaccs, final, spans, start, end)
        ordered = all(
            (s[1] >= (spans[i - 1][7] if spans[i - 1][0] == "r" else spans[i - 1][2]) if i else s[1] >= start)
            and s[2] >= s[1] and (s[0] == "o" or s[7] >= s[2])
            for i, s in enumerate(spans)
        ) and end >= (spans[-1][7] if spans[-1][0] == "r" else spans[-1][2])
        added = sums.add(spans, start, end)  # type: ignore[attr-defined]
        assert added == ordered
        took = sums.take()  # type: ignore[attr-defined]
        if not added:
            assert took[0] == 0
            continue
        calls_n, wall, island, overhead, gaps, dsum, dmin, dmax = took
        assert calls_n == 1 and wall == end - start
        assert (wall - island - overhead, island, overhead) == (ref[0], ref[1], ref[3])
        assert gaps[:-1] == [g.island_after for g in gaccs] and gaps[-1] == final.island_after
        for i, racc in enumerate(raccs):
            if racc is not None:
                assert (dsum[i], dmin[i], dmax[i]) == (racc.total, racc.min, racc.max)


@needs_c
def test_plan_sums_refuse_what_they_cannot_add():
    assert speedups is not None
    sums = speedups.PlanSums("or")
    ok = [("o", 0, 2, "o"), ("r", 3, 10, "0/0", 0, None, None, 11)]
    assert sums.add(ok, 0, 20) is True
    assert sums.add(ok, 0, 10) is False  # the bookkeeping ends after the call
    assert sums.add(ok[:1], 0, 20) is False  # another shape
    assert sums.add([ok[0], ("r", 3, 10, "0/0", 0, None, None, 2**70)], 0, 20) is False  # not int64
    assert sums.add([ok[0], ("c", 3, 10, "c", "0/0")], 0, 20) is False  # a compilation
    assert sums.calls == 1
    assert sums.add([(0, 0, 2, "o"), ok[1]], 0, 20) is False  # a kind that is not a string
    with pytest.raises(ValueError, match="kinds"):
        speedups.PlanSums("ox")


# --- the lane protocol, without torch ---------------------------------------------------------

@needs_c
@pytest.mark.parametrize("keep_detail", [True, False])
def test_lane_sums_steady_calls_and_hands_sampled_ones_to_the_builder(keep_detail):
    b, lane = lane_builder(first_calls=3, call_cap=8)
    lane.keep_detail = keep_detail
    regions = timers(lane, 4)
    opened = drive(b, lane, regions, 200)
    led = b.build()
    if keep_detail:  # C opened every call, and handed the first and the sampled ones over whole
        assert opened == 200
    else:  # the first calls and the sampled ones were the builder's from the start
        assert 150 < opened < 200
    assert [c.index for c in led.calls[:3]] == [0, 1, 2]
    assert all(sum(isinstance(e, RegionEvent) for e in c.events) == 4 for c in led.calls)
    assert led.totals.calls == 200 == b.call_count
    steady = next(p for p in led.totals.phases if p.phase == "steady")
    assert steady.calls == 200
    assert [r.runs for r in led.totals.regions] == [200] * 4
    assert all(0 <= r.min_ns <= r.max_ns and r.total_ns >= r.min_ns * r.runs for r in led.totals.regions)
    assert len(led.calls) <= 8 and led.retention.dropped == 200 - len(led.calls)
    self_check(led)


@needs_c
def test_a_call_c_opened_is_adopted_when_it_compiles_and_errors_go_to_the_builder():

    b, lane = lane_builder()
    regions = timers(lane, 2)
    drive(b, lane, regions, 40)
    assert lane.budget > 0 and lane.enter()
    regions[0](1)
    b.set_compilation(comp("2/0", ns=10))  # a compilation inside the call C opened
    t = time.perf_counter_ns()
    b.compile_span("2/0", t, t + 5)
    assert b.in_call and b.current_call_index == 40  # adopted: the builder's call now
    regions[1](1)
    lane.exit(None)
    assert lane.enter()
    regions[0](1)
    lane.exit("ValueError: bad")  # an error: the builder ends it
    led = b.build()
    by = {p.phase: p.calls for p in led.totals.phases}
    assert by["cold"] == 1 and by["steady"] == 41 and led.totals.calls == 42
    assert [r.runs for r in led.totals.regions[:2]] == [42, 41]
    self_check(led)


@needs_c
def test_sums_c_took_fold_into_the_totals_exactly_as_the_python_path():
    """The same calls, summed by C between the builder's detailed ones, or by ``sum_fast``:
    identical totals (regions' sums, minima and maxima, the island after the break, phases)."""
    import msgspec

    from seamscope.model.fake import fake_site

    site = fake_site("print")

    def setup(b: LedgerBuilder) -> None:
        b.set_break_site(site)
        b.set_compilation(comp("0/0", site=site.site_id))
        b.set_compilation(msgspec.structs.replace(comp("1/0"), resume_site_id=site.site_id, resume_depth=0))

    def call(i: int) -> tuple[list[tuple], int, int]:
        t, k = 1000 * i, (7 * i) % 5
        spans = [("o", t, t + 2, "o"), ("r", t + 3, t + 13 + k, "0/0", 0, None, None, t + 14 + k),
                 ("r", t + 20 + k, t + 25 + 2 * k, "1/0", 0, None, None, t + 26 + 2 * k)]
        if i % 3 == 0:  # ends right after the break: its last island follows the site
            return spans[:2], t, t + 18 + k + i % 4
        return spans, t, t + 30 + 3 * k + i % 2

    def through_builder(b: LedgerBuilder, i: int) -> None:
        spans, start, end = call(i)
        b.begin_call(start)
        b.overhead(spans[0][1], spans[0][2])
        for sp in spans[1:]:
            b.region_run(sp[3], 0, sp[1], sp[2], sp[7], None, None)
        b.end_call(end)

    ref = LedgerBuilder(RunInfo(source="fake"), fake_environment(), first_calls=2, call_cap=2)
    setup(ref)
    b, lane = lane_builder(first_calls=2, call_cap=2)
    setup(b)
    summed_in_c = 0
    for i in range(40):
        through_builder(ref, i)
        if lane.budget > 0:  # what C does with a steady call not due in detail
            spans, start, end = call(i)
            assert lane.plans[tuple(sp[3] for sp in spans)].add(spans, start, end)
            lane.fast_calls += 1
            lane.budget -= 1
            summed_in_c += 1
        else:
            through_builder(b, i)
    assert summed_in_c > 20
    assert b.build().totals == ref.build().totals
    # C never took a call due in detail: the same calls are kept, with the same figures
    assert b.build().calls == ref.build().calls and b.build().retention == ref.build().retention
    (st,) = ref.build().totals.sites
    assert (st.crossings, st.calls_crossing) == (40, 40) and st.island_after_ns > 0
    assert [r.runs for r in ref.build().totals.regions] == [40, 40 - 14]


@needs_c
def test_calls_due_in_detail_carry_seam_traffic_from_c():
    """The call due in detail is C's too: each region's outputs of the tensor type are counted
    with their bytes; the calls C sums carry none (as the Python path's)."""
    assert speedups is not None

    class T:  # stands for torch.Tensor
        def __init__(self, nbytes: int) -> None:
            self.nbytes = nbytes

    b, lane = lane_builder(first_calls=2, call_cap=4)
    lane.tensor_type = T

    def slow(*args, **kwargs):
        raise AssertionError("slow path taken")

    outs = [lambda: (T(8), 3, T(4)), lambda: T(16), lambda: [None, 1.5], lambda: 7]
    regions = [speedups.RegionTimer(lambda f: f(), lane, f"{i}/0", 0, slow, None) for i in range(4)]
    detailed = []
    for i in range(10):
        assert lane.enter()
        if lane.detail:
            detailed.append(i)
        for r, out in zip(regions, outs, strict=True):
            r(out)
        lane.exit(None)
    led = b.build()
    assert detailed[:2] == [0, 1] and len(detailed) < 10
    assert {c.index for c in led.calls} <= set(detailed)
    for call in led.calls:
        traffic = [(e.out_tensors, e.out_bytes) for e in call.events if isinstance(e, RegionEvent)]
        assert traffic == [(2, 12), (1, 16), (0, 0), (0, 0)]
    b, lane = lane_builder(first_calls=1, call_cap=1)  # no tensor type given: not sampled
    regions = [speedups.RegionTimer(lambda f: f(), lane, f"{i}/0", 0, slow, None) for i in range(4)]
    assert lane.enter() and lane.detail
    for r, out in zip(regions, outs, strict=True):
        r(out)
    lane.exit(None)
    (call,) = b.build().calls
    assert [(e.out_tensors, e.out_bytes) for e in call.events if isinstance(e, RegionEvent)] == [(None, None)] * 4


@needs_c
def test_steady_sums_survive_the_builder_forgetting_its_plans():
    """C keeps the last plan it found; a compilation record (outside any call) makes the
    builder forget every plan, and the next steady calls must go to the new ones."""

    b, lane = lane_builder(first_calls=0, call_cap=4)
    regions = timers(lane, 2)
    for round_ in range(3):
        drive(b, lane, regions, 50)
        b.set_compilation(comp(f"{round_}/0", ns=10))  # between calls: plans forgotten
    led = b.build()
    assert led.totals.calls == 150
    assert [r.runs for r in led.totals.regions] == [150, 150]
    steady = next(p for p in led.totals.phases if p.phase == "steady")
    assert steady.calls == 150
    self_check(led)


@needs_c
def test_stop_inside_a_call_c_opened_ends_it_once():
    b, lane = lane_builder()
    regions = timers(lane, 1)
    drive(b, lane, regions, 20)
    assert lane.enter()
    assert b.in_call  # what Session.stop() asks: the builder adopts the call
    b.end_call(time.perf_counter_ns(), error="interrupted")
    lane.spans = None
    assert lane.exit(None) is None  # the wrapper unwinding: nothing left to end
    assert b.build().totals.calls == 21


@needs_c
def test_region_timer_passes_everything_through():
    assert speedups is not None
    lane = speedups.Lane()
    seen = []

    def fn(*args, **kwargs):
        return args, kwargs

    def slow(*args, **kwargs):
        seen.append("slow")
        return fn(*args, **kwargs)

    t = speedups.RegionTimer(fn, lane, "0/0", 3, slow, seen.append)
    assert t(1, k=2) == ((1,), {"k": 2}) and seen == ["slow"]  # no call open: the Python wrapper
    lane.spans = []
    assert t(5) == ((5,), {}) and seen == ["slow"]  # no output with a grad_fn: `after` not called
    node = types.SimpleNamespace(grad_fn="node")
    same = speedups.RegionTimer(lambda *xs: xs, lane, "0/0", 3, slow, seen.append)
    same(1, node)
    assert seen == ["slow", "node"]  # an output carries an autograd node: `after` gets that node
    del lane.spans[1:]
    (span,) = lane.spans
    assert span[0] == "r" and span[3:7] == ("0/0", 3, None, None) and span[1] <= span[2] <= span[7]
    t.__name__ = "forward"  # capture names it after the graph: Dynamo asks on every run
    assert getattr(t, "__name__", None) == "forward"
    t.note = "attributes can be set, as Dynamo and functools.wraps do"
    assert t.__wrapped__ is fn and t.compile_id == "0/0" and t.note.startswith("attributes")

    def boom(x):
        raise RuntimeError("in the graph")

    bad = speedups.RegionTimer(boom, lane, "1/0", 0, slow, None)
    with pytest.raises(RuntimeError, match="in the graph"):
        bad(1)
    assert len(lane.spans) == 1  # a region that raised records nothing


def tracker_lane(first_calls: int = 0):  # type: ignore[no-untyped-def]
    """A lane ready for CallTrackers, as an active session sets it up."""
    b, lane = lane_builder(first_calls=first_calls, call_cap=4)
    lane.ready = True
    lane.owner = "session"
    lane.callbacks = []
    lane.error_text = lambda e: f"{type(e).__name__}: {e}"
    return b, lane


@needs_c
def test_call_tracker_opens_calls_runs_callbacks_and_hands_the_rest_to_slow():
    assert speedups is not None
    b, lane = tracker_lane(first_calls=2)
    regions = timers(lane, 2)
    slow_calls: list[tuple[object, ...]] = []

    def inner(x, *, k=0):
        for r in regions:
            r(x)
        return x + k

    def slow(x, *, k=0):  # the Python wrapper's place (it would open the call in the builder)
        slow_calls.append((x,))
        return x + k

    t = speedups.CallTracker(inner, lane, slow)
    seen: list[object] = []
    lane.callbacks.append(seen.append)
    assert [t(i, k=1) for i in range(30)] == list(range(1, 31))
    assert slow_calls == [] and seen == ["session"] * 30  # C opened all 30, then ran the callbacks
    assert t.__wrapped__ is inner
    led = b.build()
    assert led.totals.calls == 30 == b.call_count
    assert [r.runs for r in led.totals.regions] == [30, 30]
    assert [c.index for c in led.calls[:2]] == [0, 1]  # the first calls, handed over whole
    lane.ready = False  # a family label, a stopped or interrupted session: the Python wrapper
    assert t(5) == 5 and slow_calls == [(5,)] and len(seen) == 30
    lane.ready = True
    lane.spans = []  # a call the builder opened is in progress: slow decides (nested: inner only)
    assert t(6) == 6 and slow_calls == [(5,), (6,)]
    lane.spans = None
    self_check(b.build())


@needs_c
def test_the_python_path_claims_the_lane_in_one_step():
    b, lane = tracker_lane()
    assert lane.claim() and not lane.claim()  # taken: a second thread would find it busy
    assert not lane.enter()  # nor can C open a call meanwhile
    lane.release()
    assert lane.enter() and not lane.claim()
    lane.exit(None)
    assert lane.claim()
    lane.release()


@needs_c
def test_call_tracker_nested_calls_are_part_of_the_outer_one():
    assert speedups is not None
    b, lane = tracker_lane()
    regions = timers(lane, 3)

    def slow(*args, **kwargs):
        raise AssertionError("slow path taken")

    leaf = speedups.CallTracker(lambda x: regions[1](x), lane, slow)
    outer = speedups.CallTracker(lambda x: regions[2](leaf(regions[0](x))), lane, slow)
    for _ in range(10):
        assert outer(1) == 1
    led = b.build()
    assert led.totals.calls == 10 and [r.runs for r in led.totals.regions] == [10, 10, 10]


@needs_c
def test_call_tracker_records_the_error_and_keeps_the_users_exception():
    assert speedups is not None
    b, lane = tracker_lane()

    def slow(*args, **kwargs):
        raise AssertionError("slow path taken")

    def boom(x):
        raise ValueError(f"bad {x}")

    t = speedups.CallTracker(boom, lane, slow)
    with pytest.raises(ValueError, match="bad 1"):
        t(1)

    def broken_text(e):
        raise RuntimeError("seamscope's own bug")

    lane.error_text = broken_text  # describing it fails: the user still gets their exception
    with pytest.raises(ValueError, match="bad 2"):
        t(2)
    assert not lane.open
    led = b.build()
    assert [c.error for c in led.calls] == ["ValueError: bad 1", "ValueError"]
    self_check(led)


# --- real torch: the same counts both ways ----------------------------------------------------

def counts(led):  # type: ignore[no-untyped-def]
    t = led.totals
    return (
        t.calls,
        {p.phase: p.calls for p in t.phases},
        {r.compile_id: r.runs for r in t.regions},
        {s.site_id: (s.crossings, s.calls_crossing) for s in t.sites},
        sorted(c.compile_id for c in led.compilations),
    )


@needs_c
@pytest.mark.torch
@pytest.mark.usefixtures("dynamo_reset")
def test_capture_counts_the_same_with_and_without_c():
    """A workload with every kind of break, a shape change (a recompile inside a call C would
    sum: adopted) and a model error, captured with C and in pure Python."""
    torch = pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "workloads"))
    import contextlib

    import breaks

    from seamscope.capture.session import Session

    def run(native: object) -> object:
        torch._dynamo.reset()
        s = Session(first_calls=2, call_cap=8)
        s.native = native
        with contextlib.redirect_stdout(open(os.devnull, "w")):  # noqa: SIM115
            s.start()
            try:
                g = torch.compile(breaks.f, backend="eager")
                for size in (8, 16):
                    for _ in range(30):
                        g(torch.ones(size))
                with pytest.raises(TypeError):
                    g(torch.ones(16, dtype=torch.complex64))  # complex > float: the user's code raises
                for _ in range(10):
                    g(torch.ones(16))
            finally:
                s.stop()
        assert s.ledger is not None
        self_check(s.ledger)
        return s.ledger

    with_c = run(speedups)
    pure = run(None)
    assert counts(with_c) == counts(pure)

    def kept(led):  # type: ignore[no-untyped-def]
        """The calls kept in detail: which, their outcome, and each region's seam traffic."""
        return [
            (c.index, c.outcome, [(e.compile_id, e.out_tensors, e.out_bytes) for e in c.events
                                  if isinstance(e, RegionEvent)])
            for c in led.calls
        ]

    assert kept(with_c) == kept(pure)
    assert any(e.out_bytes for c in with_c.calls  # type: ignore[attr-defined]
               for e in c.events if isinstance(e, RegionEvent))
    steady = next(p for p in with_c.totals.phases if p.phase == "steady")  # type: ignore[attr-defined]
    assert steady.calls > 50
    # the disabled function's 2 ms island is measured in every steady call, C or not
    sites = with_c.totals.sites  # type: ignore[attr-defined]
    slow_site = [s for s in sites if s.island_after_ns >= 2_000_000 * s.calls_crossing]
    assert slow_site


def test_pure_python_is_chosen_when_asked_in_a_subprocess():
    import subprocess

    env = dict(os.environ, SEAMSCOPE_PURE_PYTHON="1")
    out = subprocess.run(
        [sys.executable, "-c", "from seamscope import _native; print(_native.NATIVE, _native.WHY_NOT)"],
        env=env, capture_output=True, text=True, check=True,
    ).stdout
    assert out.strip() == "None SEAMSCOPE_PURE_PYTHON is set"



@needs_c
@pytest.mark.torch
@pytest.mark.usefixtures("dynamo_reset")
def test_training_backward_is_attributed_the_same_with_and_without_c():
    """aot_eager: C calls the backward finder after each region, and a backward run later is
    attributed to the call C opened."""
    torch = pytest.importorskip("torch")
    from seamscope.capture.session import Session

    def run(native: object) -> tuple[object, list[int | None]]:
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        s = Session(first_calls=2, call_cap=4)
        s.native = native
        s.start()
        try:
            m = torch.compile(model, backend="aot_eager")
            for _ in range(40):
                m(torch.randn(4, 8)).sum().backward()
        finally:
            s.stop()
        assert s.ledger is not None
        self_check(s.ledger)
        return s.ledger, [o.attributed_call for o in s.ledger.outside]

    (with_c, attributed_c), (pure, attributed_pure) = run(speedups), run(None)
    assert counts(with_c) == counts(pure)
    assert with_c.totals.outside_runs == pure.totals.outside_runs == 40  # type: ignore[attr-defined]
    assert attributed_c == attributed_pure == list(range(40))


@pytest.mark.torch
def test_capture_without_c_says_so(monkeypatch):
    pytest.importorskip("torch")
    from seamscope.capture.session import Session

    monkeypatch.setattr(_native, "WHY_NOT", "seamscope._speedups was not built (test)")
    s = Session()
    s.native = None
    s.start()
    s.stop()
    assert s.ledger is not None
    assert any(w.startswith("captured without the C hot path (seamscope._speedups was not built")
               for w in s.ledger.run.warnings)
