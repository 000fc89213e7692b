"""The one mutable thing: an accumulator that capture, import and the fake source feed, and that
freezes into a :class:`~seamscope.model.ledger.Ledger`.

It owns the accounting: islands are the gaps in a call not covered by a region, a compilation or
seamscope's own overhead, so ``wall = regions + islands + compile + overhead`` holds exactly, in
integer nanoseconds. Totals are exact over every call; per-call detail is bounded (the first calls,
then a systematic sample whose stride doubles), so 100,000 calls do not grow memory.
"""

from __future__ import annotations

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


@dataclass
class _Span:
    kind: str  # "region" | "compile" | "overhead"
    start: int
    end: int
    compile_id: str = ""
    graph_index: int = 0
    out_tensors: int | None = None
    out_bytes: int | None = None


@dataclass
class _OpenCall:
    index: int
    start: int
    family: str | None
    spans: list[_Span] = field(default_factory=list)
    points: list[tuple[int, Event]] = field(default_factory=list)
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
        self._phase: dict[str, _PhaseAcc] = {p: _PhaseAcc() for p in PHASES}
        self._regions: dict[str, _RegionAcc] = {}
        self._site_acc: dict[str, _SiteAcc] = {}
        self._outside: list[OutsideRegion] = []
        self._outside_dropped = 0
        self._fallback_seen = False

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
        self._open = _OpenCall(index=self._call_count, start=start_ns, family=family)

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
        self._open.spans.append(
            _Span("region", start_ns, end_ns, compile_id, graph_index, out_tensors, out_bytes)
        )

    def compile_span(self, compile_id: str, start_ns: int, end_ns: int) -> None:
        if self._open is None:
            return
        self._open.spans.append(_Span("compile", start_ns, end_ns, compile_id))

    def overhead(self, start_ns: int, end_ns: int) -> None:
        """seamscope's own bookkeeping between ``start_ns`` and ``end_ns``."""
        if self._open is not None and end_ns > start_ns:
            self._open.spans.append(_Span("overhead", start_ns, end_ns))

    def guard_miss(self, compile_id: str, at_ns: int) -> None:
        if self._open is not None:
            self._open.points.append((at_ns, GuardMissEvent(compile_id=compile_id, at_ns=0)))

    def fallback(self, compile_id: str, reason: str, at_ns: int) -> None:
        self._fallback_seen = True
        if self._open is not None:
            self._open.points.append(
                (at_ns, FallbackEvent(compile_id=compile_id, reason=reason, at_ns=0))
            )

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

    def compilation(self, compile_id: str) -> Compilation | None:
        return self._compilations.get(compile_id)

    def set_break_site(self, site: BreakSite) -> None:
        self._sites[site.site_id] = site

    def end_call(self, end_ns: int, error: str | None = None) -> Call:
        """Close the open call: derive islands and crossings, update totals, maybe retain."""
        oc = self._open
        if oc is None:
            raise RuntimeError("end_call without begin_call")
        self._open = None
        events, sums = self._account(oc, end_ns)
        has_compile = sums["compile_n"] > 0
        has_fallback = any(isinstance(e, FallbackEvent) for e in events)
        recompiled = any(
            isinstance(e, CompileEvent) and compile_frame_index(e.compile_id)[1] > 0 for e in events
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
        call = Call(
            index=oc.index,
            phase=phase,
            outcome=outcome,  # type: ignore[arg-type]
            wall_ns=wall,
            overhead_ns=sums["overhead"],
            events=events,
            family=oc.family,
            error=error,
        )
        acc = self._phase[phase]
        acc.calls += 1
        acc.wall += wall
        acc.region += sums["region"]
        acc.island += sums["island"]
        acc.compile += sums["compile"]
        acc.overhead += sums["overhead"]
        self._call_count += 1
        self._retain(call)
        return call

    # --- accounting --------------------------------------------------------------------------

    def _account(self, oc: _OpenCall, end_ns: int) -> tuple[list[Event], dict[str, int]]:
        start = oc.start
        spans = sorted(oc.spans, key=lambda s: (s.start, s.end))
        timeline: list[tuple[int, int, Event]] = []  # (abs time, order, event)
        sums = {"region": 0, "island": 0, "compile": 0, "overhead": 0, "compile_n": 0}
        cursor = start
        pending_site: str | None = None  # the island that follows is attributed to it
        crossed_sites: set[str] = set()
        order = 0

        def island(a: int, b: int) -> None:
            nonlocal order, pending_site
            if b <= a:
                return
            sums["island"] += b - a
            timeline.append(
                (a, order, IslandEvent(start_ns=a - start, duration_ns=b - a, after_site_id=pending_site))
            )
            if pending_site is not None:
                self._site_acc.setdefault(pending_site, _SiteAcc()).island_after += b - a
            order += 1

        def cross(site: str) -> None:
            nonlocal order
            timeline.append((cursor, order, BreakEvent(site_id=site, at_ns=cursor - start)))
            order += 1
            sacc = self._site_acc.setdefault(site, _SiteAcc())
            sacc.crossings += 1
            if site not in crossed_sites:
                sacc.calls += 1
                crossed_sites.add(site)

        # One physical crossing of a site can show in several frames (a caller that tried to
        # inline the helper that broke, the helper itself, their resume functions), and some of
        # those frames run no graph. An *episode* opens at the first signal and closes when a
        # frame at the outermost depth seen resumes; each episode is one crossing.
        open_depth: dict[str, int] = {}
        closed_recently: set[str] = set()

        def own_signal(site: str, depth: int) -> None:
            if site not in open_depth:
                cross(site)
                open_depth[site] = depth
            else:
                open_depth[site] = min(open_depth[site], depth)

        def resume_signal(site: str, depth: int) -> None:
            if site in open_depth:
                if depth <= open_depth[site]:
                    del open_depth[site]
                    closed_recently.add(site)
            elif site not in closed_recently:
                cross(site)  # the frames before produced no graph: this is the first sign
                closed_recently.add(site)

        for sp in spans:
            s = max(sp.start, cursor, start)
            e = min(max(sp.end, s), end_ns)
            if e < s:
                e = s
            comp = self._compilations.get(sp.compile_id) if sp.kind == "region" else None
            if comp is not None:
                related = {comp.resume_site_id, comp.own_break_site_id}
                closed_recently.intersection_update(related)
            if comp is not None and comp.resume_site_id is not None:
                # Entering a resume function: the seam before it is the break it resumes after,
                # even when the frame before produced no graph (e.g. a disabled function).
                resume_signal(comp.resume_site_id, comp.resume_depth or 0)
                pending_site = comp.resume_site_id
            island(cursor, s)
            dur = e - s
            cursor = max(cursor, e)
            if sp.kind == "overhead":
                sums["overhead"] += dur
                continue
            if sp.kind == "compile":
                sums["compile"] += dur
                sums["compile_n"] += 1
                timeline.append(
                    (s, order, CompileEvent(compile_id=sp.compile_id, start_ns=s - start, duration_ns=dur))
                )
                order += 1
                continue
            pending_site = None
            sums["region"] += dur
            timeline.append(
                (
                    s,
                    order,
                    RegionEvent(
                        compile_id=sp.compile_id,
                        graph_index=sp.graph_index,
                        start_ns=s - start,
                        duration_ns=dur,
                        out_tensors=sp.out_tensors,
                        out_bytes=sp.out_bytes,
                    ),
                )
            )
            order += 1
            racc = self._regions.setdefault(sp.compile_id, _RegionAcc())
            if racc.runs == 0 or dur < racc.min:
                racc.min = dur
            racc.max = max(racc.max, dur)
            racc.runs += 1
            racc.total += dur
            if comp is not None and comp.own_break_site_id is not None:
                own_signal(comp.own_break_site_id, comp.own_break_depth or 0)
                pending_site = comp.own_break_site_id
        island(cursor, end_ns)
        for at, ev in oc.points:
            rel = at - start
            ev = _replace(ev, at_ns=rel)
            timeline.append((at, order, ev))
            order += 1
        timeline.sort(key=lambda t: (t[0], t[1]))
        return [t[2] for t in timeline], sums

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
