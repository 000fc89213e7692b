"""The one mutable thing: an accumulator that capture, import and the fake source feed, and that
freezes into a :class:`~seamscope.model.ledger.Ledger`.

It owns the accounting: islands are the gaps in a call not covered by a region, a compilation or
seamscope's own overhead, so ``wall = regions + islands + compile + overhead`` holds exactly, in
integer nanoseconds. Totals are exact over every call; per-call detail is bounded (the first calls,
then a systematic sample whose stride doubles), so 100,000 calls do not grow memory.

Speed: a call's structure (its *plan*: which sites it crosses, which island follows which break)
depends only on the sequence of compile ids it ran, so it is computed once (``plan.py``) and
cached. A steady call that is not kept in detail then only adds its durations into accumulators
the plan resolved (``sum_fast``), and its crossings and region runs are counted per plan, not
per call (``Plan.fold``). With capture's C lane attached (``attach_lane``, see
``seamscope._speedups``), such a call is opened and closed in C and adds its durations per span
position into the plan's ``PlanSums``; anything else that happens during it (a compilation, a
guard failure, a fallback) makes the builder adopt the call and end it here.
"""

from __future__ import annotations

import operator
from collections import defaultdict
from collections.abc import Callable
from typing import Any, Literal

from .builder_account import account_detail, sum_fast
from .device_sums import DeviceSums
from .ledger import (
    PHASES,
    SCHEMA_VERSION,
    SITE_ID_SCHEME,
    BreakSite,
    Call,
    Compilation,
    Environment,
    Event,
    Ledger,
    OutsideRegion,
    Phase,
    PhaseTotal,
    RegionTotal,
    Retention,
    RunInfo,
    SiteTotal,
    Totals,
    compile_frame_index,
)
from .plan import Plan, RegionAcc, SiteAcc, make_plan
from .spans import (
    COMPILATION,
    COMPILE_ID,
    KEY,
    KIND,
    OVERHEAD,
    REGION,
    START,
    SUM_COMPILE,
    SUM_COMPILES,
    SUM_ISLAND,
    SUM_OVERHEAD,
    SUM_REGION,
)

DEFAULT_FIRST_CALLS = 256
DEFAULT_CALL_CAP = 1024
DEFAULT_OUTSIDE_CAP = 1024
DEFAULT_DEVICE_EVERY = 16
"""On a device, one steady call in this many not kept in detail is timed there too."""



# A span is a plain tuple (the hot path builds one per region run); its layout, and what item 3
# means by kind, is defined once in ``spans.py``.
_Span = tuple
_START = operator.itemgetter(START)
"""Spans sort by start; spans that start together keep the order they were reported in."""
_KEY = operator.itemgetter(KEY)



class _OpenCall:
    """The call in progress (a slotted class: one is made per call)."""

    __slots__ = ("index", "start", "family", "spans", "points")

    def __init__(self, index: int, start: int, family: str | None) -> None:
        self.index = index
        self.start = start
        self.family = family
        self.spans: list[_Span] = []
        self.points: list[tuple[int, str, str | None]] = []
        """Point events: (time, compile id, reason). A fallback has its reason; a guard miss None."""


class _Kept:
    """A retained call whose events are not made yet: most retained calls are dropped again
    when the stride doubles, and making a call's events costs tens of µs inside the call (more
    than everything else seamscope does there). ``build()`` makes them, once."""

    __slots__ = ("index", "phase", "outcome", "wall", "oc", "end", "plan", "error")

    def __init__(
        self, oc: _OpenCall, end: int, plan: Plan, phase: Phase, outcome: str, wall: int, error: str | None
    ) -> None:
        self.index = oc.index
        self.oc = oc
        self.end = end
        self.plan = plan
        self.phase = phase
        self.outcome = outcome
        self.wall = wall
        self.error = error


class _PhaseAcc:
    """A phase's running sums: the fields of its ``PhaseTotal``, but the phase."""

    __slots__ = ("calls", "wall_ns", "region_ns", "island_ns", "compile_ns", "overhead_ns")

    def __init__(self) -> None:
        self.calls = self.wall_ns = self.region_ns = self.island_ns = self.compile_ns = 0
        self.overhead_ns = 0

    def total(self, phase: Phase) -> PhaseTotal:
        return PhaseTotal(phase=phase, **{k: getattr(self, k) for k in self.__slots__})


class LedgerBuilder:
    """Feed it events in time order; ``build()`` freezes what it has so far (callable repeatedly,
    which is how an interrupted run still writes what was measured)."""

    def __init__(
        self,
        run: RunInfo,
        environment: Environment,
        *,
        clock: Callable[[], int] | None = None,
        first_calls: int = DEFAULT_FIRST_CALLS,
        call_cap: int = DEFAULT_CALL_CAP,
        outside_cap: int = DEFAULT_OUTSIDE_CAP,
    ) -> None:
        if first_calls < 0 or call_cap < first_calls or call_cap < 1:
            raise ValueError("need 0 <= first_calls <= call_cap and call_cap >= 1")
        import time

        self.clock: Callable[[], int] = clock or time.perf_counter_ns
        self.origin = self.clock()
        self.run = run
        self.environment = environment
        self.first_calls = first_calls
        self.call_cap = call_cap
        self.outside_cap = outside_cap
        self._stride = 1
        self._calls: list[Call | _Kept] = []
        self._call_count = 0
        self._open: _OpenCall | None = None
        self._compilations: dict[str, Compilation] = {}
        self._sites: dict[str, BreakSite] = {}
        self._phase: dict[Phase, _PhaseAcc] = {p: _PhaseAcc() for p in PHASES}
        self._regions: dict[str, RegionAcc] = {}
        self._site_acc: dict[str, SiteAcc] = {}
        self._outside: list[OutsideRegion] = []
        self._outside_dropped = 0
        self._fallback_seen = False
        self._fallen_frames: set[int] = set()
        """Frame ids that hit the recompile limit (or fell back for a reason not recorded)."""
        self._plans: dict[tuple[str, ...], Plan] = {}
        self.plan_cap = 4096
        """Distinct call structures kept (a program whose every call differs stays bounded)."""
        self.call_observers: list[Callable[[Call], None]] = []
        """Called with every finished call in full detail, retained or not (budgets use it)."""
        self.detailed = False
        """Whether the open call will be kept in full detail (capture samples seam traffic then)."""
        self._lane: Any = None
        """Capture's C lane (``attach_lane``), or None."""
        self._sums_type: Any = None
        self._device: Any = None
        """The device tracker (``attach_device``), or None: CPU, no device timeline."""
        self.device_every = 0
        self.device_call: Any = None
        """The open call's device handle (events recorded at region entry and exit), or None."""
        self._dev = DeviceSums()
        """The device timelines' sums, as calls resolve (``attach_device``)."""
        self.phase_sink: Callable[[Phase, int], None] | None = None
        """Called with the phase and wall time of every call ended here (watch mode's counts;
        the steady calls C sums are counted in C: ``Lane.wall_histogram``)."""
        self.open_spans: list[_Span] | None = None
        """The open call's span list, or None outside a call. Capture's region wrapper appends
        ``region_run``'s tuple here itself: one Python call fewer per region crossing."""

    # --- what capture reports ---------------------------------------------------------------

    @property
    def in_call(self) -> bool:
        self._adopt()
        return self._open is not None

    @property
    def current_call_index(self) -> int | None:
        if self._open is not None:
            return self._open.index
        lane = self._lane
        if lane is not None and lane.open:
            return self._call_count + lane.fast_calls
        return None

    @property
    def call_count(self) -> int:
        lane = self._lane
        return self._call_count + (lane.fast_calls if lane is not None else 0)

    # --- the C lane: steady calls opened and closed in C --------------------------------------

    def attach_lane(self, lane: Any, sums_type: Any) -> None:
        """Let capture's C lane (``_speedups.Lane``) open and close calls: it sums the steady
        ones not due in detail, and hands the others over whole (``_end_lane_call``), spans and
        seam traffic recorded; ``sums_type`` is ``_speedups.PlanSums``. Same figures, less time
        per call."""
        self._lane = lane
        self._sums_type = sums_type
        lane.plans = {}
        lane.slow_end = self._end_lane_call
        lane.keep_detail = True
        self._lane_budget()

    def attach_device(self, source: Any, every: int = DEFAULT_DEVICE_EVERY) -> None:
        """Time calls on a device too (``model/device.py``): every call kept in detail, and one in
        ``every`` of the others. Such calls take the Python path (C sums only the rest)."""
        from .device import DeviceTracker

        if every < 1:
            raise ValueError("every must be >= 1")
        self._device = DeviceTracker(source, self._dev.done)
        self.device_every = every
        if self._lane is not None:
            self._lane.keep_detail = False  # the call due in detail is opened here, its regions timed
        self._lane_budget()

    @property
    def device(self) -> Any:
        """The device tracker, or None."""
        return self._device

    def _device_end(self, dc: Any, plan: Plan, spans: list[_Span], phase: Phase, wall: int, end_ns: int) -> None:
        """Close the open call's device lane: which break each device seam follows (the island
        before each region, then the one after the last), then resolve what completed."""
        sites: list[str | None] | None = [
            step[1] for sp, step in zip(spans, plan.steps, strict=True) if sp[KIND] == REGION
        ]
        assert sites is not None
        sites.append(plan.final_gap_site)
        if len(sites) != len(dc.marks) + 1:
            sites = None
        index = dc.index
        retained = index < self.first_calls or index % self._stride == 0
        self._device.end(dc, end_ns, (phase, sites, wall, retained))
        self._device.poll()

    def watch_calls(self, observe: Callable[[Call], None]) -> None:
        """Have ``observe`` called with every finished call in full detail (budgets use it)."""
        self.call_observers.append(observe)
        self._lane_budget()

    def unwatch_calls(self, observe: Callable[[Call], None]) -> None:
        if observe in self.call_observers:
            self.call_observers.remove(observe)
        self._lane_budget()

    def _absorb(self) -> None:
        """Count the calls C closed."""
        lane = self._lane
        if lane is not None:
            if lane.fast_calls:
                self._call_count += lane.fast_calls
                lane.fast_calls = 0
            lane.call_base = self._call_count  # C labels a forward's autograd node with its call

    def _lane_budget(self) -> None:
        """How many calls C may sum before the next one due in detail (0: the next is due, or
        every call is: observers watch, or a fallback was seen). The stride is 1 while the first
        calls are kept (``call_cap >= first_calls``), so C sums none then."""
        lane = self._lane
        if lane is None:
            return
        self._absorb()  # (sets lane.call_base: every count of a call is followed by this)
        n = self._call_count
        if self.call_observers or self._fallback_seen:
            lane.budget = 0
        else:
            stride = self._stride
            budget = -(-n // stride) * stride - n  # up to the next retained index
            every = self.device_every
            if self._device is not None and every:
                budget = min(budget, -(-n // every) * every - n)  # ... or the next timed on the device
            lane.budget = budget

    def _adopt(self) -> None:
        """Take over the call C opened: something it cannot sum (a compilation, a guard
        failure, a fallback...) happens in it. C's exit then ends it here."""
        lane = self._lane
        if self._open is None and lane is not None and lane.open:
            spans = lane.adopt()
            if spans is not None:  # the lane's list now: region timers go on appending to it
                self._open_lane_call(spans, lane.start)

    def _end_lane_call(self, spans: list[_Span], start: int, end_ns: int, error: str | None) -> Call | None:
        """C's exit for a call it could not sum."""
        if self._open is None:
            self._open_lane_call(spans, start)
        return self.end_call(end_ns, error)

    def _open_lane_call(self, spans: list[_Span], start: int) -> None:
        """Make the call C opened the builder's open call (index: after the calls C closed)."""
        self._absorb()
        oc = self._open = _OpenCall(self._call_count, start, None)
        oc.spans = spans
        self.open_spans = spans

    @property
    def compile_count(self) -> int:
        return sum(1 for c in self._compilations.values() if c.status == "ok")

    def begin_call(self, start_ns: int, family: str | None = None) -> None:
        self._adopt()
        if self._open is not None:
            raise RuntimeError("begin_call inside an open call (nested top-level calls are one call)")
        self._absorb()
        index = self._call_count
        oc = self._open = _OpenCall(index, start_ns, family)
        self.open_spans = oc.spans
        self.detailed = bool(self.call_observers) or index < self.first_calls or index % self._stride == 0
        if self._device is not None and (self.detailed or index % self.device_every == 0):
            self.device_call = self._device.begin(index, start_ns)

    def region(
        self,
        compile_id: str,
        graph_index: int,
        start_ns: int,
        end_ns: int,
        *,
        out_tensors: int | None = None,
        out_bytes: int | None = None,
    ) -> None:
        """A compiled graph ran from ``start_ns`` to ``end_ns`` (absolute clock values)."""
        self._adopt()
        if self._open is None:
            self.outside_region(compile_id, "forward", end_ns - start_ns, None)
            return
        self._open.spans.append((REGION, start_ns, end_ns, compile_id, graph_index, out_tensors, out_bytes, end_ns))

    def region_run(
        self, compile_id: str, graph_index: int, t0: int, t1: int, t2: int,
        out_tensors: int | None, out_bytes: int | None,
    ) -> None:
        """A region ran from t0 to t1, then seamscope's bookkeeping until t2."""
        self._adopt()
        oc = self._open
        if oc is None:
            self.outside_region(compile_id, "forward", t1 - t0, None)
            return
        oc.spans.append((REGION, t0, t1, compile_id, graph_index, out_tensors, out_bytes, t2))

    def compile_span(self, compile_id: str, start_ns: int, end_ns: int) -> None:
        self._adopt()
        if self._open is None:
            return
        self._open.spans.append((COMPILATION, start_ns, end_ns, COMPILATION, compile_id))

    def overhead(self, start_ns: int, end_ns: int) -> None:
        """seamscope's own bookkeeping between ``start_ns`` and ``end_ns``."""
        self._adopt()
        if self._open is not None:
            self._open.spans.append((OVERHEAD, start_ns, end_ns, OVERHEAD))

    def guard_miss(self, compile_id: str, at_ns: int) -> None:
        self._adopt()
        if self._open is not None:
            self._open.points.append((at_ns, compile_id, None))

    def fallback(self, compile_id: str, reason: str, at_ns: int) -> None:
        self._adopt()
        self._fallback_seen = True
        known = self._compilations.get(compile_id)
        if known is None or known.status not in ("failed", "skipped"):  # not a compile that failed
            self._fallen_frames.add(compile_frame_index(compile_id)[0])
        self._lane_budget()
        if self._open is not None:
            self._open.points.append((at_ns, compile_id, reason))

    def _compiled_code(self, spans: list[_Span]) -> bool:
        """Whether a compilation in the call produced code (a recompile-limit attempt does not:
        a call whose only compilation is one is a ``fallback`` call, not a ``cold`` one)."""
        for sp in spans:
            if sp[0] == "c":
                comp = self._compilations.get(sp[4])
                if comp is None or comp.status == "ok":
                    return True
        return False

    def _ran_eagerly(self, spans: list[_Span]) -> bool:
        """Whether a frame that hit the recompile limit ran eagerly in this call. After the limit,
        Dynamo runs the frame in run-only mode: an input that hits a cached variant runs its
        compiled graphs, one that misses runs eagerly and says nothing. So: a call that ran no
        graph of such a frame (one with graphs compiled) ran it eagerly, or did not enter it."""
        fallen = self._fallen_frames | {
            compile_frame_index(c.compile_id)[0] for c in self._compilations.values() if c.status == "fallback"
        }
        if not fallen:
            return False
        with_graphs = {
            x
            for c in self._compilations.values()
            if c.status == "ok" and c.graph_count > 0 and (x := compile_frame_index(c.compile_id)[0]) in fallen
        }
        ran = {compile_frame_index(sp[3])[0] for sp in spans if sp[0] == "r"}
        return bool(with_graphs - ran)

    def outside_region(
        self, compile_id: str, kind: Literal["backward", "forward"], duration_ns: int, attributed_call: int | None
    ) -> bool:
        """Record a run outside any call; whether it was kept in the list (False once it is full)."""
        acc = self._regions.setdefault(compile_id, RegionAcc())
        acc.outside_runs += 1
        acc.outside += duration_ns
        if len(self._outside) < self.outside_cap:
            self._outside.append(
                OutsideRegion(
                    compile_id=compile_id,
                    kind=kind,
                    duration_ns=duration_ns,
                    attributed_call=attributed_call,
                )
            )
            return True
        self._outside_dropped += 1
        return False

    def count_outside(self, compile_id: str, runs: int, duration_ns: int) -> None:
        """Runs outside calls that ``outside_region`` would no longer list, counted and summed
        elsewhere (capture's C backward timer, once the list is full)."""
        acc = self._regions.setdefault(compile_id, RegionAcc())
        acc.outside_runs += runs
        acc.outside += duration_ns
        self._outside_dropped += runs

    def set_compilation(self, compilation: Compilation) -> None:
        """Add or replace a compilation record (the assembler refines it as events arrive)."""
        self._adopt()
        if compilation.call_index is None and self._open is not None:
            compilation = _replace(compilation, call_index=self._open.index)
        elif compilation.compile_id in self._compilations and compilation.call_index is None:
            prev = self._compilations[compilation.compile_id].call_index
            if prev is not None:
                compilation = _replace(compilation, call_index=prev)
        self._compilations[compilation.compile_id] = compilation
        self._forget_plans()

    def compilation(self, compile_id: str) -> Compilation | None:
        return self._compilations.get(compile_id)

    def set_break_site(self, site: BreakSite) -> None:
        self._sites[site.site_id] = site
        self._forget_plans()

    def _forget_plans(self) -> None:
        """What a call crosses depends on the compilations and sites known: recompute plans."""
        self._settle()
        self._plans.clear()
        if self._lane is not None:
            self._lane.plans = {}  # a new dict, never cleared in place: C caches the last plan it found in it

    def running_counts(self) -> tuple[dict[str, int], dict[str, int]]:
        """Calls per phase and crossings per site so far (watch mode); between calls, or in a call
        the builder holds (``_adopt``), as ``build()``."""
        self._settle()
        return {p: a.calls for p, a in self._phase.items()}, {s: a.crossings for s, a in self._site_acc.items()}

    def _settle(self) -> None:
        """Bring every plan's pending counts and sums into the totals."""
        self._absorb()
        for plan in self._plans.values():
            self._add_sums(plan)
            plan.fold()

    def _add_sums(self, plan: Plan) -> None:
        """Add the sums of the steady calls C closed on this plan to the totals (what
        ``sum_fast`` adds per call, added per span position for all of them at once). C only
        opens calls while no fallback was seen, so they are all steady."""
        if plan.sums is None or not plan.sums.calls or plan.raccs is None:
            return
        acc = self._phase["steady"]
        calls, wall, island, overhead, gaps, dur_sum, dur_min, dur_max = plan.sums.take()
        plan.uses += calls
        positions = zip(plan.raccs, plan.gaccs, gaps[:-1], dur_sum, dur_min, dur_max, strict=True)
        for racc, gacc, gap, total, low, high in positions:
            if gacc is not None:
                gacc.island_after += gap
            if racc is not None:
                racc.total += total
                if low < racc.min:
                    racc.min = low
                if high > racc.max:
                    racc.max = high
        gap = gaps[-1]
        if plan.final_acc is not None:
            plan.final_acc.island_after += gap
        acc.calls += calls
        acc.wall_ns += wall
        acc.region_ns += wall - island - overhead
        acc.island_ns += island
        acc.overhead_ns += overhead

    def end_call(self, end_ns: int, error: str | None = None) -> Call | None:
        """Close the open call: derive islands and crossings, update totals, maybe retain.

        Returns the call's record if it was made now: a retained call that compiled, failed a
        guard or fell back, or any call while an observer watches. A retained steady call is
        made in ``build()``: None then, as for a call not kept."""
        oc = self._open
        if oc is None:
            raise RuntimeError("end_call without begin_call")
        self._open = None
        self.open_spans = None
        self.detailed = False
        dc = self.device_call
        self.device_call = None
        index = oc.index
        retain = index < self.first_calls or index % self._stride == 0
        spans = oc.spans
        spans.sort(key=_START)  # in order nearly always: linear
        plan = self._use_plan(tuple(map(_KEY, spans)))
        # a retained call that compiled nothing and hit no point event: its events are made
        # in build() (only if it is still retained then)
        defer = retain and not self.call_observers and plan.raccs is not None and not oc.points
        wall = end_ns - oc.start
        if (
            defer and error is None and not self._fallback_seen and plan.sums is not None
            and plan.sums.add(spans, oc.start, end_ns)
        ):  # a steady call C handed over to be kept: C sums it too, as the ones it closes
            plan.uses -= 1  # counted when the sums are taken
            self._call_count += 1
            self._retain(_Kept(oc, end_ns, plan, "steady", "hit", wall, None))
            if dc is not None:
                self._device_end(dc, plan, spans, "steady", wall, end_ns)
            self._lane_budget()
            if self.phase_sink is not None:
                self.phase_sink("steady", wall)
            return None
        events, sums = self._account(oc, end_ns, plan, (retain or bool(self.call_observers)) and not defer)
        has_compile = sums[SUM_COMPILES] > 0
        has_fallback = bool(oc.points) and any(p[2] is not None for p in oc.points)
        phase: Phase
        if has_compile and not (has_fallback and not self._compiled_code(oc.spans)):
            phase = "cold"
        elif has_fallback or (self._fallback_seen and self._ran_eagerly(spans)):
            phase = "fallback"
        else:
            phase = "steady"
        acc = self._phase[phase]
        acc.calls += 1
        acc.wall_ns += wall
        acc.region_ns += sums[SUM_REGION]
        acc.island_ns += sums[SUM_ISLAND]
        acc.compile_ns += sums[SUM_COMPILE]
        acc.overhead_ns += sums[SUM_OVERHEAD]
        self._call_count += 1
        if dc is not None:
            self._device_end(dc, plan, spans, phase, wall, end_ns)
        if defer:
            self._retain(_Kept(oc, end_ns, plan, phase, "error" if error is not None else "hit", wall, error))
        if self._lane is not None:
            self._lane_budget()  # after retaining: the stride may have grown
        if self.phase_sink is not None:
            self.phase_sink(phase, wall)
        if events is None:  # not kept, or kept with its events made in build()
            return None
        recompiled = has_compile and any(
            sp[KIND] == COMPILATION and compile_frame_index(sp[COMPILE_ID])[1] > 0 for sp in oc.spans
        )
        if error is not None:
            outcome = "error"
        elif has_fallback:
            outcome = "fallback"
        elif recompiled:
            outcome = "recompile"
        elif has_compile:
            outcome = "compile"
        else:
            outcome = "hit"
        call = Call(
            index=index,
            phase=phase,
            outcome=outcome,  # type: ignore[arg-type]
            wall_ns=wall,
            overhead_ns=sums[SUM_OVERHEAD],
            events=events,
            family=oc.family,
            error=error,
        )
        for observe in self.call_observers:
            observe(call)
        if retain:
            self._retain(call)
            if self._lane is not None:
                self._lane_budget()  # the stride may have grown
            return call
        return None

    # --- accounting --------------------------------------------------------------------------

    def _use_plan(self, key: tuple[str, ...]) -> Plan:
        """The cached plan for ``key`` (made if new), with this call counted in its uses."""
        plan = self._plans.get(key)
        if plan is None:
            plan = make_plan(key, self._compilations, self._site_acc, self._regions)
            plan.uses = 1
            if len(self._plans) < self.plan_cap:
                self._plans[key] = plan
                if plan.raccs is not None and self._lane is not None:
                    plan.sums = self._sums_type("".join([OVERHEAD if k == OVERHEAD else REGION for k in key]))
                    self._lane.plans[key] = plan.sums
            else:  # not kept: count its crossings now
                plan.fold()
        else:
            plan.uses += 1
        return plan

    def _account(
        self, oc: _OpenCall, end_ns: int, plan: Plan, detail: bool
    ) -> tuple[list[Event] | None, tuple[int, int, int, int, int]]:
        """Sums (region, island, compile, overhead, compilations) and, if ``detail``, the events."""
        if plan.raccs is not None and not detail:
            return None, sum_fast(plan.raccs, plan.gaccs, plan.final_acc, oc.spans, oc.start, end_ns)
        return account_detail(oc, end_ns, plan, self._site_acc, self._regions, plan.final_acc, detail)

    def _made(self, kept: Call | _Kept) -> Call:
        if isinstance(kept, Call):
            return kept
        fresh: dict[str, SiteAcc] = defaultdict(SiteAcc)  # its sums were added when it ended
        events, sums = account_detail(kept.oc, kept.end, kept.plan, fresh, defaultdict(RegionAcc), SiteAcc(), True)
        return Call(
            index=kept.index,
            phase=kept.phase,
            outcome=kept.outcome,  # type: ignore[arg-type]
            wall_ns=kept.wall,
            overhead_ns=sums[SUM_OVERHEAD],
            events=events or [],
            family=kept.oc.family,
            error=kept.error,
        )

    def _retain(self, call: Call | _Kept) -> None:
        if call.index < self.first_calls:
            self._calls.append(call)
            return
        if call.index % self._stride != 0:
            return
        self._calls.append(call)
        while len(self._calls) > self.call_cap:
            self._stride *= 2
            self._calls = [
                c for c in self._calls if c.index < self.first_calls or c.index % self._stride == 0
            ]

    # --- freezing ----------------------------------------------------------------------------

    def build(self) -> Ledger:
        self._settle()
        if self._device is not None:
            self._device.poll()
        calls = [self._made(c) for c in self._calls]
        timelines = self._dev.timelines
        if timelines:
            kept = {c.index for c in calls}
            timelines = self._dev.timelines = {i: t for i, t in timelines.items() if i in kept}
            calls = [_replace(c, device=timelines[c.index]) if c.index in timelines else c for c in calls]
        self._calls = list(calls)
        comps = sorted(self._compilations.values(), key=lambda c: (compile_frame_index(c.compile_id), c.compile_id))
        sites = sorted(self._sites.values(), key=lambda s: (s.file, s.line, s.site_id))
        phases = [a.total(p) for p, a in self._phase.items()]
        regions = [
            RegionTotal(
                compile_id=cid,
                runs=a.runs,
                total_ns=a.total,
                min_ns=a.min if a.runs else 0,
                max_ns=a.max,
                outside_runs=a.outside_runs,
                outside_ns=a.outside,
            )
            for cid, a in sorted(self._regions.items(), key=lambda kv: compile_frame_index(kv[0]))
        ]
        site_totals = [
            SiteTotal(site_id=sid, crossings=a.crossings, calls_crossing=a.calls, island_after_ns=a.island_after)
            for sid, a in sorted(self._site_acc.items())
        ]
        totals = Totals(
            calls=self._call_count,
            phases=phases,
            regions=regions,
            sites=site_totals,
            outside_ns=sum(a.outside for a in self._regions.values()),
            outside_runs=sum(a.outside_runs for a in self._regions.values()),
        )
        run = self.run
        if self._device is not None:
            totals = _replace(totals, device=self._dev.totals(self._device))
            run = _replace(run, warnings=[*run.warnings, *self._dev.warnings(self._device)])
        retention = Retention(
            first=self.first_calls,
            cap=self.call_cap,
            stride=self._stride,
            retained=len(self._calls),
            dropped=self._call_count - len(self._calls),
            outside_cap=self.outside_cap,
            outside_dropped=self._outside_dropped,
        )
        if self._device is not None:
            retention = _replace(retention, device_every=self.device_every)
        return Ledger(
            schema_version=SCHEMA_VERSION if self._device is not None else 1,
            run=run,
            environment=self.environment,
            compilations=comps,
            break_sites=sites,
            calls=calls,
            outside=list(self._outside),
            totals=totals,
            retention=retention,
            site_id_scheme=SITE_ID_SCHEME,
        )


def _replace(obj, **changes):  # type: ignore[no-untyped-def]
    import msgspec

    return msgspec.structs.replace(obj, **changes)
