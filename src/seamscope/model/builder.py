"""The one mutable thing: an accumulator that capture, import and the fake source feed, and that
freezes into a :class:`~seamscope.model.ledger.Ledger`.

It owns the accounting: islands are the gaps in a call not covered by a region, a compilation or
seamscope's own overhead, so ``wall = regions + islands + compile + overhead`` holds exactly, in
integer nanoseconds. Totals are exact over every call; per-call detail is bounded (the first calls,
then a systematic sample whose stride doubles), so 100,000 calls do not grow memory.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass, field

from .ledger import (
    SCHEMA_VERSION,
    BreakEvent,
    BreakSite,
    Call,
    Compilation,
    CompileEvent,
    Environment,
    Event,
    FallbackEvent,
    GuardMissEvent,
    IslandEvent,
    Ledger,
    OutsideRegion,
    Phase,
    PhaseTotal,
    RegionEvent,
    RegionTotal,
    Retention,
    RunInfo,
    SiteTotal,
    Totals,
    compile_frame_index,
)

DEFAULT_FIRST_CALLS = 256
DEFAULT_CALL_CAP = 1024
DEFAULT_OUTSIDE_CAP = 1024

PHASES: tuple[Phase, ...] = ("cold", "steady", "fallback")


# A span is a plain tuple (the hot path builds one per region run):
# ("r", start, end, compile_id, graph_index, out_tensors, out_bytes, overhead_end) a region, whose
# bookkeeping that follows it (end .. overhead_end) rides in the same tuple; ("c", start, end,
# compile_id) a compilation; ("o", start, end) seamscope's own overhead.
_Span = tuple
_BY_TIME = operator.itemgetter(1, 2)


@dataclass
class _Plan:
    steps: list[tuple[tuple[str, ...], str | None, tuple[str, ...]]]
    """Per span: sites crossed before it, the site the island before it follows, sites after."""
    final_gap_site: str | None
    crossings: list[str]


def _at(ev: Event, start: int) -> int:
    """An event's time relative to the call's start (spans by their start, points by theirs)."""
    if isinstance(ev, (RegionEvent, IslandEvent, CompileEvent)):
        return ev.start_ns
    return ev.at_ns


@dataclass
class _OpenCall:
    index: int
    start: int
    family: str | None
    spans: list[_Span] = field(default_factory=list)
    points: list[tuple[int, str, str, str]] = field(default_factory=list)
    """Point events: (time, "guard_miss" | "fallback", compile id, reason)."""
    overhead_extra: int = 0


@dataclass
class _PhaseAcc:
    calls: int = 0
    wall: int = 0
    region: int = 0
    island: int = 0
    compile: int = 0
    overhead: int = 0


@dataclass
class _RegionAcc:
    runs: int = 0
    total: int = 0
    min: int = 0
    max: int = 0
    outside_runs: int = 0
    outside: int = 0


@dataclass
class _SiteAcc:
    crossings: int = 0
    calls: int = 0
    island_after: int = 0


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
        self._calls: list[Call] = []
        self._call_count = 0
        self._open: _OpenCall | None = None
        self._compilations: dict[str, Compilation] = {}
        self._sites: dict[str, BreakSite] = {}
        self._phase: dict[Phase, _PhaseAcc] = {p: _PhaseAcc() for p in PHASES}
        self._regions: dict[str, _RegionAcc] = {}
        self._site_acc: dict[str, _SiteAcc] = {}
        self._outside: list[OutsideRegion] = []
        self._outside_dropped = 0
        self._fallback_seen = False
        self._plans: dict[tuple[str, ...], _Plan] = {}
        self.call_observers: list[Callable[[Call], None]] = []
        """Called with every finished call in full detail, retained or not (budgets use it)."""
        self.detailed = False
        """Whether the open call will be kept in full detail (capture samples seam traffic then)."""

    # --- what capture reports ---------------------------------------------------------------

    @property
    def in_call(self) -> bool:
        return self._open is not None

    @property
    def current_call_index(self) -> int | None:
        return self._open.index if self._open else None

    @property
    def call_count(self) -> int:
        return self._call_count

    @property
    def compile_count(self) -> int:
        return sum(1 for c in self._compilations.values() if c.status == "ok")

    def begin_call(self, start_ns: int, family: str | None = None) -> None:
        if self._open is not None:
            raise RuntimeError("begin_call inside an open call (nested top-level calls are one call)")
        index = self._call_count
        self._open = _OpenCall(index=index, start=start_ns, family=family)
        self.detailed = bool(self.call_observers) or index < self.first_calls or index % self._stride == 0

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
        if self._open is None:
            self.outside_region(compile_id, "forward", end_ns - start_ns, None)
            return
        self._open.spans.append(("r", start_ns, end_ns, compile_id, graph_index, out_tensors, out_bytes, end_ns))

    def region_run(
        self, compile_id: str, graph_index: int, t0: int, t1: int, t2: int,
        out_tensors: int | None, out_bytes: int | None,
    ) -> None:
        """The hot path: a region ran from t0 to t1, then seamscope's bookkeeping until t2."""
        oc = self._open
        if oc is None:
            self.outside_region(compile_id, "forward", t1 - t0, None)
            return
        oc.spans.append(("r", t0, t1, compile_id, graph_index, out_tensors, out_bytes, t2))

    def compile_span(self, compile_id: str, start_ns: int, end_ns: int) -> None:
        if self._open is None:
            return
        self._open.spans.append(("c", start_ns, end_ns, compile_id))

    def overhead(self, start_ns: int, end_ns: int) -> None:
        """seamscope's own bookkeeping between ``start_ns`` and ``end_ns``."""
        if self._open is not None and end_ns > start_ns:
            self._open.spans.append(("o", start_ns, end_ns))

    def guard_miss(self, compile_id: str, at_ns: int) -> None:
        if self._open is not None:
            self._open.points.append((at_ns, "guard_miss", compile_id, ""))

    def fallback(self, compile_id: str, reason: str, at_ns: int) -> None:
        self._fallback_seen = True
        if self._open is not None:
            self._open.points.append((at_ns, "fallback", compile_id, reason))

    def outside_region(
        self, compile_id: str, kind: str, duration_ns: int, attributed_call: int | None
    ) -> None:
        acc = self._regions.setdefault(compile_id, _RegionAcc())
        acc.outside_runs += 1
        acc.outside += duration_ns
        if len(self._outside) < self.outside_cap:
            self._outside.append(
                OutsideRegion(
                    compile_id=compile_id,
                    kind="backward" if kind == "backward" else "forward",
                    duration_ns=duration_ns,
                    attributed_call=attributed_call,
                )
            )
        else:
            self._outside_dropped += 1

    def set_compilation(self, compilation: Compilation) -> None:
        """Add or replace a compilation record (the assembler refines it as events arrive)."""
        if compilation.call_index is None and self._open is not None:
            compilation = _replace(compilation, call_index=self._open.index)
        elif compilation.compile_id in self._compilations and compilation.call_index is None:
            prev = self._compilations[compilation.compile_id].call_index
            if prev is not None:
                compilation = _replace(compilation, call_index=prev)
        self._compilations[compilation.compile_id] = compilation
        self._plans.clear()

    def compilation(self, compile_id: str) -> Compilation | None:
        return self._compilations.get(compile_id)

    def set_break_site(self, site: BreakSite) -> None:
        self._sites[site.site_id] = site
        self._plans.clear()

    def end_call(self, end_ns: int, error: str | None = None) -> Call | None:
        """Close the open call: derive islands and crossings, update totals, maybe retain.

        Returns the call's record when it is retained (kept in full detail), else None."""
        oc = self._open
        if oc is None:
            raise RuntimeError("end_call without begin_call")
        self._open = None
        self.detailed = False
        index = oc.index
        retain = index < self.first_calls or index % self._stride == 0
        events, sums = self._account(oc, end_ns, retain or bool(self.call_observers))
        has_compile = sums["compile_n"] > 0
        has_fallback = any(p[1] == "fallback" for p in oc.points)
        recompiled = has_compile and any(
            sp[0] == "c" and compile_frame_index(sp[3])[1] > 0 for sp in oc.spans
        )
        phase: Phase
        if has_compile:
            phase = "cold"
        elif has_fallback or self._fallback_seen:
            phase = "fallback"
        else:
            phase = "steady"
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
        wall = end_ns - oc.start
        acc = self._phase[phase]
        acc.calls += 1
        acc.wall += wall
        acc.region += sums["region"]
        acc.island += sums["island"]
        acc.compile += sums["compile"]
        acc.overhead += sums["overhead"]
        self._call_count += 1
        if events is None:
            return None
        call = Call(
            index=index,
            phase=phase,
            outcome=outcome,  # type: ignore[arg-type]
            wall_ns=wall,
            overhead_ns=sums["overhead"],
            events=events,
            family=oc.family,
            error=error,
        )
        for observe in self.call_observers:
            observe(call)
        if retain:
            self._retain(call)
            return call
        return None

    # --- accounting --------------------------------------------------------------------------

    def _plan(self, key: tuple[str, ...]) -> _Plan:
        """The structure of a call, from the kinds and compile ids of its spans alone: which
        sites are crossed before and after each span, and which site each island follows.

        One physical crossing of a site can show in several frames (a caller that tried to
        inline the helper that broke, the helper itself, their resume functions), and some of
        those frames run no graph. An *episode* opens at the first signal and closes when a
        frame at the outermost depth seen resumes; each episode is one crossing.
        """
        steps: list[tuple[tuple[str, ...], str | None, tuple[str, ...]]] = []
        crossings: list[str] = []
        pending: str | None = None
        open_depth: dict[str, int] = {}
        closed_recently: set[str] = set()
        for item in key:
            pre: list[str] = []
            post: list[str] = []
            is_region = item not in ("c", "o")
            comp = self._compilations.get(item) if is_region else None
            if comp is not None:
                closed_recently.intersection_update({comp.resume_site_id, comp.own_break_site_id})
                site = comp.resume_site_id
                if site is not None:
                    # Entering a resume function: the seam before it is the break it resumes
                    # after, even when the frame before produced no graph (a disabled function).
                    depth = comp.resume_depth or 0
                    if site in open_depth:
                        if depth <= open_depth[site]:
                            del open_depth[site]
                            closed_recently.add(site)
                    elif site not in closed_recently:
                        pre.append(site)  # the frames before ran no graph: this is the first sign
                        closed_recently.add(site)
                    pending = site
            gap_site = pending
            if is_region:
                pending = None
                if comp is not None and comp.own_break_site_id is not None:
                    site = comp.own_break_site_id
                    depth = comp.own_break_depth or 0
                    if site not in open_depth:
                        post.append(site)
                        open_depth[site] = depth
                    else:
                        open_depth[site] = min(open_depth[site], depth)
                    pending = site
            crossings.extend(pre)
            crossings.extend(post)
            steps.append((tuple(pre), gap_site, tuple(post)))
        return _Plan(steps=steps, final_gap_site=pending, crossings=crossings)

    def _account(
        self, oc: _OpenCall, end_ns: int, retain: bool
    ) -> tuple[list[Event] | None, dict[str, int]]:
        start = oc.start
        spans = oc.spans
        spans.sort(key=_BY_TIME)  # already in order nearly always: linear
        key = tuple([sp[3] if sp[0] == "r" else sp[0] for sp in spans])
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plan(key)
            if len(self._plans) < 4096:
                self._plans[key] = plan
        site_acc = self._site_acc
        if plan.crossings:
            for site in plan.crossings:
                site_acc.setdefault(site, _SiteAcc()).crossings += 1
            for site in set(plan.crossings):
                site_acc[site].calls += 1
        region_sum = compile_sum = overhead_sum = island_sum = compile_n = 0
        events: list[Event] | None = [] if retain else None
        cursor = start
        regions = self._regions
        for sp, step in zip(spans, plan.steps, strict=True):
            kind, s, e = sp[0], sp[1], sp[2]
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
                    site_acc.setdefault(gap_site, _SiteAcc()).island_after += gap
                if events is not None:
                    events.append(IslandEvent(start_ns=cursor - start, duration_ns=gap, after_site_id=gap_site))
            dur = e - s
            cursor = e
            if kind == "o":
                overhead_sum += dur
            elif kind == "r":
                region_sum += dur
                racc = regions.get(sp[3])
                if racc is None:
                    racc = regions[sp[3]] = _RegionAcc(min=dur)
                elif racc.runs == 0 or dur < racc.min:
                    racc.min = dur
                if dur > racc.max:
                    racc.max = dur
                racc.runs += 1
                racc.total += dur
                if events is not None:
                    events.append(
                        RegionEvent(
                            compile_id=sp[3],
                            graph_index=sp[4],
                            start_ns=s - start,
                            duration_ns=dur,
                            out_tensors=sp[5],
                            out_bytes=sp[6],
                        )
                    )
                    for site in step[2]:
                        events.append(BreakEvent(site_id=site, at_ns=e - start))
                oe = sp[7]
                if oe > e:  # the bookkeeping right after the region
                    if oe > end_ns:
                        oe = end_ns
                    overhead_sum += oe - e
                    cursor = oe
            else:
                compile_sum += dur
                compile_n += 1
                if events is not None:
                    events.append(CompileEvent(compile_id=sp[3], start_ns=s - start, duration_ns=dur))
        gap = end_ns - cursor
        if gap > 0:
            island_sum += gap
            if plan.final_gap_site is not None:
                site_acc.setdefault(plan.final_gap_site, _SiteAcc()).island_after += gap
            if events is not None:
                events.append(
                    IslandEvent(start_ns=cursor - start, duration_ns=gap, after_site_id=plan.final_gap_site)
                )
        if events is not None and oc.points:
            timed = [(_at(ev, start), i, ev) for i, ev in enumerate(events)]
            n = len(timed)
            for j, (at, kind, cid, reason) in enumerate(oc.points):
                point: Event = (
                    FallbackEvent(compile_id=cid, reason=reason, at_ns=at - start)
                    if kind == "fallback"
                    else GuardMissEvent(compile_id=cid, at_ns=at - start)
                )
                timed.append((at - start, n + j, point))
            timed.sort(key=lambda t: (t[0], t[1]))
            events = [t[2] for t in timed]
        sums = {
            "region": region_sum,
            "island": island_sum,
            "compile": compile_sum,
            "overhead": overhead_sum,
            "compile_n": compile_n,
        }
        return events, sums

    def _retain(self, call: Call) -> None:
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
        comps = sorted(self._compilations.values(), key=lambda c: (compile_frame_index(c.compile_id), c.compile_id))
        sites = sorted(self._sites.values(), key=lambda s: (s.file, s.line, s.site_id))
        phases = [
            PhaseTotal(
                phase=p,
                calls=a.calls,
                wall_ns=a.wall,
                region_ns=a.region,
                island_ns=a.island,
                compile_ns=a.compile,
                overhead_ns=a.overhead,
            )
            for p, a in self._phase.items()
        ]
        regions = [
            RegionTotal(
                compile_id=cid,
                runs=a.runs,
                total_ns=a.total,
                min_ns=a.min,
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
        retention = Retention(
            first=self.first_calls,
            cap=self.call_cap,
            stride=self._stride,
            retained=len(self._calls),
            dropped=self._call_count - len(self._calls),
            outside_cap=self.outside_cap,
            outside_dropped=self._outside_dropped,
        )
        return Ledger(
            schema_version=SCHEMA_VERSION,
            run=self.run,
            environment=self.environment,
            compilations=comps,
            break_sites=sites,
            calls=list(self._calls),
            outside=list(self._outside),
            totals=totals,
            retention=retention,
        )


def _replace(obj, **changes):  # type: ignore[no-untyped-def]
    import msgspec

    return msgspec.structs.replace(obj, **changes)
