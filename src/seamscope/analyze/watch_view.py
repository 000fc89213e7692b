"""What compiled after warm-up in a watched run (``seamscope run --watch``), from its receipt: the
timeline ``summary`` and ``report`` show. The same kinds as the live events (``capture/watch.py``),
read back from the ledger's compilations and break sites and the warm-up its decision records;
the request tags are in the events file only."""

from __future__ import annotations

from dataclasses import dataclass

from ..model.ledger import Compilation, compile_frame_index
from ..model.receipt import Receipt
from ..model.watch import parse_warmup_policy
from .causes import describe, parse_change
from .findings_common import compilation_label

#: The timeline's time column: when the compilation began, since the run began. An event's
#: ``since_start_s`` is when it was reported, once its compilation ended: later by ``compile_ns``.
BEGAN = "began"


@dataclass(frozen=True)
class TimelineRow:
    at_ns: int | None
    """When the compilation began, since the run began (:data:`BEGAN`)."""
    call_index: int | None
    kind: str
    compile_id: str
    frame: str
    cause: str
    compile_ns: int | None


@dataclass(frozen=True)
class WatchTimeline:
    warmup: str
    """``the first 100 calls`` / ``the first 30 s``."""
    rows: list[TimelineRow]


def watch_timeline(receipt: Receipt) -> WatchTimeline | None:
    """None for a run that was not watched."""
    got = parse_warmup_policy(receipt.decision.warmup_policy)
    if got is None:
        return None
    calls, seconds = got

    def after(c: Compilation) -> bool:
        if calls is not None:
            return c.call_index is not None and c.call_index >= calls
        return c.start_ns is not None and seconds is not None and c.start_ns >= seconds * 1e9

    led = receipt.ledger
    order = sorted(led.compilations, key=lambda c: (c.start_ns if c.start_ns is not None else -1,
                                                    compile_frame_index(c.compile_id)))
    by_id = {c.compile_id: c for c in order}
    rows: list[TimelineRow] = []
    frames_seen: set[int] = set()
    for c in order:
        frame_id = compile_frame_index(c.compile_id)[0]
        first = frame_id not in frames_seen
        frames_seen.add(frame_id)
        if not after(c):
            continue
        change = parse_change(c.failed_guards, c.status)
        if c.status != "ok":
            kind, cause = "fallback", (c.fail_reason or c.fail_type or describe(change)).splitlines()[0]
        elif c.is_recompile:
            kind, cause = "recompile", describe(change)
        elif first and c.graph_count > 0:
            kind, cause = "graph", "first compilation of this frame"
        else:
            continue
        rows.append(
            TimelineRow(c.start_ns, c.call_index, kind, c.compile_id, compilation_label(c), cause, c.duration_ns)
        )
    for site in led.break_sites:
        comps = [by_id[cid] for cid in site.compile_ids if cid in by_id]
        first_c = min(comps, key=lambda c: compile_frame_index(c.compile_id), default=None)
        if first_c is not None and after(first_c):
            rows.append(TimelineRow(first_c.start_ns, first_c.call_index, "break", first_c.compile_id,
                                    f"{site.function} ({site.file}:{site.line})",
                                    site.gb_type or (site.reason.splitlines() or [""])[0], None))
    rows.sort(key=lambda r: (r.at_ns if r.at_ns is not None else -1, r.kind == "break"))
    warmup = f"the first {calls} calls" if calls is not None else f"the first {seconds:g} s"
    return WatchTimeline(warmup, rows)
