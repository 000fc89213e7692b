"""The device timeline of a call: events on an accelerator's stream, read once they completed.

On a GPU a compiled region returns to Python as soon as its kernels are queued: host time is
launch cost, and a region's device work lands in whatever later island blocks. So a call timed
on the device gets, beside its host timeline, an *anchor* event at its start, an event at each
region's entry and exit (on the current stream), and one at its end. Once they completed, every
event becomes an offset from the anchor, rounded to integer nanoseconds once: a region's device
time is exit minus entry, a *device seam gap* is the next entry minus the previous exit (the
island's own kernels plus the time the device sat idle), and the call's device span is the end
event's offset. ``sum(regions) + sum(gaps) == span`` holds by construction.

Nothing here imports torch. What the timeline needs from a device is the :class:`DeviceSource`
interface; capture implements it with ``torch.cuda.Event`` (``capture/device.py``) and tests with
:class:`FakeDevice`, a fake stream on the fake host clock.

Rules the tracker keeps:

- it never adds a sync to the user's program: an event is read only once ``query()`` says it
  completed; pending calls are resolved in any order, whenever their last event completed; at
  session end the rest are resolved after one ``synchronize()`` (none after an interrupt);
- events come from a pool and go back to it once read;
- a call made while the current stream captures a CUDA graph records no events (querying one is
  illegal then), and is counted;
- a region whose stream differs from the call's anchor stream is counted: work on other streams
  is not attributed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from .ledger import DeviceRegion, DeviceSeam, DeviceTimeline


class DeviceSource(Protocol):
    """An accelerator's events, as the device timeline uses them."""

    name: str
    """What times the device (``cuda``, ``fake``)."""

    def new_event(self) -> Any:
        """A fresh event that can be recorded and timed (the tracker pools them)."""

    def record(self, event: Any) -> None:
        """Record ``event`` on the current stream now."""

    def done(self, event: Any) -> bool:
        """Whether the recorded event completed (never blocks)."""

    def elapsed_ms(self, start: Any, end: Any) -> float:
        """Milliseconds between two completed events (``torch.cuda.Event.elapsed_time``)."""

    def synchronize(self) -> None:
        """Wait for all queued work (session end only)."""

    def capturing(self) -> bool:
        """Whether the current stream is capturing a graph (then no event may be recorded)."""

    def stream(self) -> Any:
        """An identity of the current stream."""

    def take_syncs(self) -> tuple[int, int | None] | None:
        """Device-to-host syncs since the last call, and the host clock value of the first;
        None when syncs are not counted."""

    def open_call(self) -> None:
        """A timed call starts: count syncs from now (CUDA: the sync debug mode is set)."""

    def close_call(self) -> None:
        """The timed call ended: stop counting (CUDA: the mode is restored)."""


class SyncCount:
    """Device-to-host syncs counted since the last ``take``, and the host clock value of the first:
    what a device source's ``take_syncs`` returns (the CUDA source and the fake share it)."""

    __slots__ = ("n", "first")

    def __init__(self) -> None:
        self.n = 0
        self.first: int | None = None

    def add(self, clock: Callable[[], int]) -> None:
        """One more sync; ``clock`` is read for the first one only."""
        if self.n == 0:
            self.first = clock()
        self.n += 1

    def take(self) -> tuple[int, int | None]:
        got = (self.n, self.first)
        self.n = 0
        self.first = None
        return got


class _DevCall:
    """A call being timed: its events, in the order recorded."""

    __slots__ = ("index", "anchor", "stream", "marks", "end", "syncs", "waits", "island_start", "foreign", "ctx")

    def __init__(self, index: int, anchor: Any, stream: Any) -> None:
        self.index = index
        self.anchor = anchor
        self.stream = stream
        self.marks: list[tuple[str, Any, Any]] = []
        """Per region run: (compile id, entry event, exit event)."""
        self.end: Any = None
        self.syncs: list[int | None] = []
        """Per seam (one before each region, one after the last): syncs counted in its island."""
        self.waits: list[int | None] = []
        self.island_start = 0
        self.foreign = False
        """A region ran while another stream was current."""
        self.ctx: Any = None


def _seam_syncs(source: DeviceSource, island_end: int, island_start: int) -> tuple[int | None, int | None]:
    got = source.take_syncs()
    if got is None:
        return None, None
    n, first = got
    if n <= 0 or first is None:
        return 0, 0
    return n, max(0, island_end - max(first, island_start))


class DeviceTracker:
    """Times calls on a :class:`DeviceSource` and hands each resolved timeline to ``sink``.

    ``sink(index, timeline, ctx, foreign)``: ``ctx`` is what ``end`` was given (the builder's
    phase and seam sites), ``foreign`` whether work on another stream was seen."""

    def __init__(self, source: DeviceSource, sink: Callable[[int, DeviceTimeline, Any, bool], None]) -> None:
        self.source = source
        self.sink = sink
        self._free: list[Any] = []
        self._pending: list[_DevCall] = []
        self.capture_skipped = 0
        """Calls not timed: the current stream was capturing a graph."""
        self.events_made = 0

    # --- the pool ----------------------------------------------------------------------------

    def _event(self) -> Any:
        free = self._free
        if free:
            ev = free.pop()
        else:
            ev = self.source.new_event()
            self.events_made += 1
        self.source.record(ev)
        return ev

    def _give_back(self, dc: _DevCall) -> None:
        free = self._free
        free.append(dc.anchor)
        for _cid, a, b in dc.marks:
            free.append(a)
            free.append(b)
        if dc.end is not None:
            free.append(dc.end)
        dc.marks = []

    # --- what capture reports ----------------------------------------------------------------

    def begin(self, index: int, host_ns: int) -> _DevCall | None:
        """The call's anchor, or None when no event may be recorded now."""
        source = self.source
        if source.capturing():
            self.capture_skipped += 1
            return None
        source.open_call()
        source.take_syncs()  # syncs before the call are not its own
        dc = _DevCall(index, None, source.stream())
        dc.anchor = self._event()
        dc.island_start = host_ns
        return dc

    def enter(self, dc: _DevCall, host_ns: int) -> Any:
        """A region starts: the island before it ends. Returns its entry event."""
        n, wait = _seam_syncs(self.source, host_ns, dc.island_start)
        dc.syncs.append(n)
        dc.waits.append(wait)
        if self.source.stream() != dc.stream:
            dc.foreign = True
        return self._event()

    def exit(self, dc: _DevCall, compile_id: str, entry: Any, host_ns: int) -> None:
        """The region returned to Python (its device work may still be queued)."""
        dc.marks.append((compile_id, entry, self._event()))
        self.source.take_syncs()  # syncs inside a region are the region's own
        dc.island_start = host_ns

    def end(self, dc: _DevCall, host_ns: int, ctx: Any = None) -> None:
        """The call returned: its end event, then wait (without blocking) for it to complete.
        A graph capture that began during the call (user code in an island) leaves its lane
        incomplete: its events are never queried, nor pooled again."""
        n, wait = _seam_syncs(self.source, host_ns, dc.island_start)
        self.source.close_call()
        if self.source.capturing():
            self.capture_skipped += 1
            dc.marks = []
            self.sink(dc.index, DeviceTimeline(span_ns=0, regions=[], seams=[], complete=False), ctx, dc.foreign)
            return
        dc.syncs.append(n)
        dc.waits.append(wait)
        dc.end = self._event()
        dc.ctx = ctx
        self._pending.append(dc)

    # --- resolution --------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _complete(self, dc: _DevCall) -> bool:
        done = self.source.done
        if not done(dc.end) or not done(dc.anchor):
            return False
        return all(done(a) and done(b) for _cid, a, b in dc.marks)

    def poll(self) -> int:
        """Resolve every pending call whose events all completed (any order); how many."""
        if not self._pending:
            return 0
        keep: list[_DevCall] = []
        resolved = 0
        for dc in self._pending:
            if self._complete(dc):
                self._resolve(dc)
                resolved += 1
            else:
                keep.append(dc)
        self._pending = keep
        return resolved

    def finish(self, synchronize: bool = True) -> int:
        """Session end: one synchronize (unless interrupted), then resolve; a call whose events
        still did not complete keeps its host timeline, its device timeline marked incomplete.
        Returns how many were incomplete."""
        if synchronize and self._pending:
            try:
                self.source.synchronize()
            except Exception:  # a device error must not lose the host ledger
                pass
        self.poll()
        left = self._pending
        self._pending = []
        for dc in left:
            self.sink(dc.index, DeviceTimeline(span_ns=0, regions=[], seams=[], complete=False), dc.ctx, dc.foreign)
        return len(left)

    def _resolve(self, dc: _DevCall) -> None:
        elapsed = self.source.elapsed_ms
        anchor = dc.anchor
        last = 0

        def offset(ev: Any) -> int:
            nonlocal last
            o = round(elapsed(anchor, ev) * 1e6)  # rounded once, to integer nanoseconds
            if o < last:  # events on one stream complete in order; never let rounding reorder
                o = last
            last = o
            return o

        regions: list[DeviceRegion] = []
        gaps: list[int] = []
        cursor = 0
        for cid, a, b in dc.marks:
            s = offset(a)
            e = offset(b)
            gaps.append(s - cursor)
            regions.append(DeviceRegion(compile_id=cid, start_ns=s, duration_ns=e - s))
            cursor = e
        span = offset(dc.end)
        gaps.append(span - cursor)
        syncs = dc.syncs if len(dc.syncs) == len(gaps) else [None] * len(gaps)
        waits = dc.waits if len(dc.waits) == len(gaps) else [None] * len(gaps)
        seams = [DeviceSeam(gap_ns=g, syncs=n, host_wait_ns=w) for g, n, w in zip(gaps, syncs, waits, strict=True)]
        timeline = DeviceTimeline(span_ns=span, regions=regions, seams=seams)
        self._give_back(dc)
        self.sink(dc.index, timeline, dc.ctx, dc.foreign)


# --- a fake device for tests: one stream on the fake host clock -----------------------------------


class _FakeEvent:
    __slots__ = ("at", "recorded", "serial")

    def __init__(self, serial: int) -> None:
        self.at: int | None = None
        self.recorded = 0
        self.serial = serial


class FakeDevice:
    """One in-order stream driven by the fake host clock (``clock.now``).

    ``launch(ns)`` queues device work of ``ns`` nanoseconds: it starts when the stream is free
    and the launch has reached the device (``latency`` after the host call); an event recorded
    now completes when all work queued before it did. ``sync()`` is a device-to-host sync: the
    host clock jumps to when the stream drains, and it is counted."""

    name = "fake"

    def __init__(self, clock: Any, latency: int = 0, count_syncs: bool = True, ms_jitter: float = 0.0) -> None:
        self.clock = clock
        self.latency = latency
        self.free_at = 0
        self.count_syncs = count_syncs
        self.ms_jitter = ms_jitter
        """Added to every elapsed time, in ms (the float a real device returns is not exact)."""
        self.hung = False
        self.capture = False
        self.current = 0
        self.counting = False
        self._syncs = SyncCount()
        self.made = 0
        self.records = 0
        self.synchronized = 0
        self.launches: list[tuple[int, int, int]] = []
        """(start, end, stream) of every launch: what a profiler's kernel trace would show."""

    # work the fake program does
    def launch(self, ns: int) -> None:
        start = max(self.free_at, self.clock.now + self.latency)
        self.free_at = start + ns
        self.launches.append((start, self.free_at, self.current))

    def sync(self) -> None:
        if self.counting:
            self._syncs.add(lambda: self.clock.now)
        if not self.hung and self.free_at > self.clock.now:
            self.clock.now = self.free_at

    # the DeviceSource interface
    def new_event(self) -> _FakeEvent:
        self.made += 1
        return _FakeEvent(self.made)

    def record(self, event: _FakeEvent) -> None:
        self.records += 1
        if self.capture:  # captured as a graph node: it never completes on its own
            event.recorded += 1
            event.at = None
            return
        event.recorded += 1
        if self.hung:
            event.at = None
        else:  # a marker in the stream: it reaches the device after the launch latency too
            event.at = self.free_at = max(self.free_at, self.clock.now + self.latency)

    def done(self, event: _FakeEvent) -> bool:
        if self.capture:
            raise RuntimeError("queried an event during graph capture")
        return event.at is not None and event.at <= self.clock.now

    def elapsed_ms(self, start: _FakeEvent, end: _FakeEvent) -> float:
        if start.at is None or end.at is None or not (self.done(start) and self.done(end)):
            raise RuntimeError("elapsed time of an event that has not completed")
        return (end.at - start.at) / 1e6 + self.ms_jitter

    def synchronize(self) -> None:
        self.synchronized += 1
        if not self.hung and self.free_at > self.clock.now:
            self.clock.now = self.free_at

    def capturing(self) -> bool:
        return self.capture

    def stream(self) -> int:
        return self.current

    def open_call(self) -> None:
        self.counting = True

    def close_call(self) -> None:
        self.counting = False

    def take_syncs(self) -> tuple[int, int | None] | None:
        return self._syncs.take() if self.count_syncs else None
