"""Ledger → seamscope trace (JSON Lines; format and round trip in :mod:`seamscope.model.trace`)."""

from __future__ import annotations

import msgspec

from ..model.canonical import canonical_bytes
from ..model.ledger import Ledger
from ..model.receipt import Receipt
from ..model.trace import (
    DEFAULT_MAX_CALLS,
    DEFAULT_MAX_EVENTS,
    TRACE_KIND,
    TRACE_VERSION,
    BreakSiteRecord,
    CallCut,
    CallRecord,
    CompilationRecord,
    OutsideRecord,
    TraceBounds,
    TraceCounts,
    TraceCut,
    TraceHeader,
)


class TraceRenderer:
    """Bounded export: at most ``max_calls`` calls and ``max_events`` events per call; the
    header declares what was left out and keeps the exact totals."""

    extension = ".seamscope-trace.jsonl"

    def __init__(self, max_calls: int = DEFAULT_MAX_CALLS, max_events: int = DEFAULT_MAX_EVENTS) -> None:
        if max_calls < 0 or max_events < 0:
            raise ValueError("trace bounds must be >= 0")
        self.max_calls = max_calls
        self.max_events = max_events

    def render(self, receipt: Receipt) -> bytes:
        return self.render_ledger(receipt.ledger)

    def render_ledger(self, ledger: Ledger) -> bytes:
        """The trace of a ledger that has no receipt yet (a session's, at the end of a run)."""
        calls = list(ledger.calls)
        omitted: list[int] = []
        if len(calls) > self.max_calls:
            # The first calls show the cold start, the last ones the steady state.
            head = (self.max_calls + 1) // 2
            tail = self.max_calls - head
            kept = calls[:head] + (calls[len(calls) - tail :] if tail else [])
            kept_ids = {c.index for c in kept}
            omitted = [c.index for c in calls if c.index not in kept_ids]
            calls = kept
        cuts: list[CallCut] = []
        written = []
        for c in calls:
            if len(c.events) > self.max_events:
                cuts.append(CallCut(index=c.index, events_total=len(c.events), events_written=self.max_events))
                c = msgspec.structs.replace(c, events=list(c.events[: self.max_events]))
            written.append(c)
        run = ledger.run
        retention = ledger.retention
        if omitted or cuts:
            note = (
                f"seamscope trace bounds (max {self.max_calls} calls, {self.max_events} events per call): "
                f"{len(omitted)} retained call(s) omitted, {len(cuts)} call(s) with events cut; totals count everything"
            )
            run = msgspec.structs.replace(run, warnings=[*run.warnings, note])
            retention = msgspec.structs.replace(
                retention, retained=len(written), dropped=ledger.totals.calls - len(written)
            )
        header = TraceHeader(
            kind=TRACE_KIND,
            trace_version=TRACE_VERSION,
            schema_version=ledger.schema_version,
            site_id_scheme=ledger.site_id_scheme,
            bounds=TraceBounds(max_calls=self.max_calls, max_events_per_call=self.max_events),
            cut=TraceCut(
                calls_retained=len(ledger.calls),
                calls_written=len(written),
                calls_omitted=omitted,
                calls_cut=cuts,
            ),
            counts=TraceCounts(
                compilations=len(ledger.compilations),
                break_sites=len(ledger.break_sites),
                calls=len(written),
                outside=len(ledger.outside),
            ),
            run=run,
            environment=ledger.environment,
            totals=ledger.totals,
            retention=retention,
        )
        lines = [canonical_bytes(header)]
        lines += [canonical_bytes(CompilationRecord(compilation=c)) for c in ledger.compilations]
        lines += [canonical_bytes(BreakSiteRecord(break_site=s)) for s in ledger.break_sites]
        lines += [canonical_bytes(CallRecord(call=c)) for c in written]
        lines += [canonical_bytes(OutsideRecord(outside=o)) for o in ledger.outside]
        return b"\n".join(lines) + b"\n"


def write_trace(
    ledger: Ledger,
    path: str,
    *,
    max_calls: int = DEFAULT_MAX_CALLS,
    max_events: int = DEFAULT_MAX_EVENTS,
) -> str:
    """Write the bounded trace atomically (what ``seamscope run --trace-out F`` calls)."""
    from .files import write_atomic

    return write_atomic(path, TraceRenderer(max_calls, max_events).render_ledger(ledger))
