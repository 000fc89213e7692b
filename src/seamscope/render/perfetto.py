"""The ledger as a Chrome Trace Event Format file, which the Perfetto UI and ``chrome://tracing`` open.

Layout: one process (the run) with one thread track each for calls, compiled regions, eager
islands, compilations, and compiled code that ran outside any call; on a device, two more: the
device lane (each region's device work) and its seam gaps (with the syncs in the island before),
drawn from the call's start (their anchor event was recorded there; the device may have been
busy with earlier work then). A call timed on the device takes the room of the longer of its
host wall time and its device span. Every slice is a complete
event (``ph: "X"``) with ``ts`` and ``dur`` in microseconds (fractions keep nanoseconds exact);
crossings, guard misses and fallbacks are instant events on the calls track. Metadata events name
the process and tracks.

The ledger stores each event relative to its call's start and not when calls started, so recorded
calls are laid end to end in call order (the trace's time axis is "time inside calls"; the gaps
between calls, and calls whose detail was not kept, are not drawn). Slice names are compile ids,
so Perfetto gives each graph one colour.
"""

from __future__ import annotations

from typing import Any

import msgspec

from ..model.ledger import (
    BreakEvent,
    CompileEvent,
    FallbackEvent,
    GuardMissEvent,
    IslandEvent,
    RegionEvent,
)
from ..model.receipt import Receipt

PID = 1
TRACKS = {
    "calls": 1,
    "regions": 2,
    "islands": 3,
    "compilations": 4,
    "outside calls": 5,
}
DEVICE_TRACKS = {"device": 6, "device seam gaps": 7}


def us(ns: int) -> float:
    """Nanoseconds to the format's microseconds, exactly representable to the nanosecond."""
    return ns / 1000.0


class _Trace:
    """The trace's events as they are made: track names, slices (``X``) and instants (``i``)."""

    def __init__(self, receipt: Receipt) -> None:
        led = receipt.ledger
        self.sites = {s.site_id: s for s in led.break_sites}
        self.comps = {c.compile_id: c for c in led.compilations}
        self.out: list[dict[str, Any]] = [
            {
                "ph": "M",
                "pid": PID,
                "tid": 0,
                "name": "process_name",
                "args": {"name": f"seamscope {led.run.source}: {' '.join(led.run.command)}"},
            },
        ]

    def name_tracks(self, tracks: dict[str, int]) -> None:
        for name, tid in tracks.items():
            self.out.append({"ph": "M", "pid": PID, "tid": tid, "name": "thread_name", "args": {"name": name}})
            self.out.append(
                {"ph": "M", "pid": PID, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}}
            )

    def slice_(self, tid: int, name: str, cat: str, start: int, dur: int, args: dict[str, Any]) -> None:
        self.out.append(
            {
                "ph": "X",
                "pid": PID,
                "tid": tid,
                "name": name,
                "cat": cat,
                "ts": us(start),
                "dur": us(dur),
                "args": args,
            }
        )

    def instant(self, name: str, cat: str, at: int, args: dict[str, Any]) -> None:
        self.out.append(
            {
                "ph": "i",
                "s": "t",
                "pid": PID,
                "tid": TRACKS["calls"],
                "name": name,
                "cat": cat,
                "ts": us(at),
                "args": args,
            }
        )

    def call(self, call: Any, t0: int) -> None:
        """The call's slice, then a slice or an instant for each of its events, from ``t0``."""
        args: dict[str, Any] = {
            "call": call.index,
            "phase": call.phase,
            "outcome": call.outcome,
            "overhead_ns": call.overhead_ns,
        }
        if call.family is not None:
            args["family"] = call.family
        if call.error is not None:
            args["error"] = call.error
        self.slice_(TRACKS["calls"], f"call {call.index}", "call", t0, call.wall_ns, args)
        for e in call.events:
            self.event(call.index, e, t0)

    def event(self, index: int, e: Any, t0: int) -> None:
        sites, comps, slice_, instant = self.sites, self.comps, self.slice_, self.instant
        if isinstance(e, RegionEvent):
            a: dict[str, Any] = {
                "call": index,
                "compile_id": e.compile_id,
                "graph_index": e.graph_index,
                "duration_ns": e.duration_ns,
            }
            c = comps.get(e.compile_id)
            if c is not None:
                a["frame"] = "{} {}:{}".format(*c.shown_frame)
            slice_(TRACKS["regions"], e.compile_id, "region", t0 + e.start_ns, e.duration_ns, a)
        elif isinstance(e, IslandEvent):
            a = {"call": index, "duration_ns": e.duration_ns}
            s = sites.get(e.after_site_id or "")
            if s is not None:
                a.update(after_site=s.site_id, where=f"{s.file}:{s.line}", reason=s.reason)
            slice_(TRACKS["islands"], "island", "island", t0 + e.start_ns, e.duration_ns, a)
        elif isinstance(e, CompileEvent):
            a = {"call": index, "compile_id": e.compile_id, "duration_ns": e.duration_ns}
            c = comps.get(e.compile_id)
            if c is not None:
                a.update(status=c.status, frame="{} {}:{}".format(*c.shown_frame), failed_guards=c.failed_guards)
            slice_(TRACKS["compilations"], f"compile {e.compile_id}", "compile", t0 + e.start_ns, e.duration_ns, a)
        elif isinstance(e, BreakEvent):
            s = sites.get(e.site_id)
            instant(
                f"break {e.site_id}",
                "break",
                t0 + e.at_ns,
                {"call": index, "reason": s.reason if s else "", "where": f"{s.file}:{s.line}" if s else ""},
            )
        elif isinstance(e, GuardMissEvent):
            c = comps.get(e.compile_id)
            instant(f"guard miss {e.compile_id}", "guard_miss", t0 + e.at_ns,
                    {"call": index, "failed_guards": c.failed_guards if c else []})
        elif isinstance(e, FallbackEvent):
            instant(f"fallback {e.compile_id}", "fallback", t0 + e.at_ns, {"call": index, "reason": e.reason})


class PerfettoRenderer:
    extension = ".json"

    def events(self, receipt: Receipt) -> list[dict[str, Any]]:
        led = receipt.ledger
        trace = _Trace(receipt)
        trace.name_tracks(TRACKS)
        if any(not isinstance(c.device, msgspec.UnsetType) for c in led.calls):
            trace.name_tracks(DEVICE_TRACKS)
        t0 = 0
        for call in led.calls:
            trace.call(call, t0)
            t0 += _device_lane(call, t0, trace.slice_)
        for o in led.outside:
            trace.slice_(
                TRACKS["outside calls"],
                o.compile_id,
                o.kind,
                t0,
                o.duration_ns,
                {"compile_id": o.compile_id, "kind": o.kind, "attributed_call": o.attributed_call},
            )
            t0 += o.duration_ns
        return trace.out

    def render(self, receipt: Receipt) -> bytes:
        led = receipt.ledger
        doc = {
            "traceEvents": self.events(receipt),
            "displayTimeUnit": "ns",
            "otherData": {
                "generator": "seamscope",
                "receipt_sha256": receipt.receipt_sha256,
                "calls_in_run": led.totals.calls,
                "calls_drawn": len(led.calls),
                "time_axis": "recorded calls laid end to end; gaps between calls not drawn",
            },
        }
        return msgspec.json.encode(doc, order="sorted")


def _device_lane(call: Any, t0: int, slice_: Any) -> int:
    """Draw a call's device lane from ``t0``; returns the room the call takes (its wall time, or
    its device span where longer)."""
    d = call.device
    if isinstance(d, msgspec.UnsetType):
        return int(call.wall_ns)
    if not d.complete:
        slice_(
            DEVICE_TRACKS["device"],
            "incomplete",
            "device",
            t0,
            0,
            {"call": call.index, "note": "an event never completed"},
        )
        return int(call.wall_ns)
    cursor = 0
    for i, seam in enumerate(d.seams):
        a: dict[str, Any] = {"call": call.index, "gap_ns": seam.gap_ns}
        if seam.syncs is not None:
            a.update(syncs=seam.syncs, host_wait_ns=seam.host_wait_ns)
        if seam.gap_ns or seam.syncs:
            slice_(
                DEVICE_TRACKS["device seam gaps"],
                "sync gap" if seam.syncs else "seam gap",
                "device_seam",
                t0 + cursor,
                seam.gap_ns,
                a,
            )
        cursor += seam.gap_ns
        if i < len(d.regions):
            r = d.regions[i]
            slice_(DEVICE_TRACKS["device"], r.compile_id, "device_region", t0 + r.start_ns, r.duration_ns,
                   {"call": call.index, "compile_id": r.compile_id, "duration_ns": r.duration_ns})
            cursor = r.start_ns + r.duration_ns
    return int(max(call.wall_ns, d.span_ns))
