"""seamscope's own trace: a bounded, shareable export of a ledger (``*.seamscope-trace.jsonl``).

Why JSON Lines: one record per line gives every problem a line number, lets a reader stream a
trace of any size, and lets a cut file keep every complete line. Line 1 is a :class:`TraceHeader`
(format version, bounds, what was cut, the ledger's run, environment, exact totals and
retention); then one line per compilation, break site, retained call and outside region, each
``{"record": KIND, KIND: {...}}``. The JSON Schema of a line is ``docs/trace.schema.json``,
generated from these types (a test keeps the two equal).

Round trip: the header carries everything of the ledger that is not a per-call list, so importing
a trace rebuilds the identical ledger, and its receipt is byte for byte the original's whenever
nothing was cut. When the bounds cut calls or events, the header says exactly what, the totals
still count everything, and the imported ledger is a fixed point (exporting it again changes
nothing).
"""

from __future__ import annotations

from typing import Literal

from .ledger import (
    BreakSite,
    Call,
    Compilation,
    Environment,
    OutsideRegion,
    Retention,
    RunInfo,
    Struct,
    Totals,
)

TRACE_KIND: Literal["seamscope.trace"] = "seamscope.trace"
#: Bumped on any incompatible change of a line's layout.
TRACE_VERSION = 1
DEFAULT_MAX_CALLS = 64
DEFAULT_MAX_EVENTS = 16


class TraceBounds(Struct, frozen=True):
    max_calls: int
    """At most this many calls are written: the first half and the last half of those retained."""
    max_events_per_call: int
    """At most this many events of a call are written (the first ones, in order)."""


class CallCut(Struct, frozen=True):
    index: int
    events_total: int
    events_written: int


class TraceCut(Struct, frozen=True):
    """What the bounds left out; empty lists mean nothing was cut."""

    calls_retained: int
    """Calls the ledger held (its own retention already applied)."""
    calls_written: int
    calls_omitted: list[int]
    """Indexes of retained calls not written."""
    calls_cut: list[CallCut]
    """Calls written with some of their events left out."""


class TraceCounts(Struct, frozen=True):
    """How many lines of each kind follow the header: a reader tells a cut file by them."""

    compilations: int
    break_sites: int
    calls: int
    outside: int


class TraceHeader(Struct, tag="header", tag_field="record", frozen=True):
    kind: Literal["seamscope.trace"]
    trace_version: int
    schema_version: int
    """The ledger schema version (model.ledger.SCHEMA_VERSION) of the records."""
    bounds: TraceBounds
    cut: TraceCut
    counts: TraceCounts
    run: RunInfo
    environment: Environment
    totals: Totals
    retention: Retention
    site_id_scheme: int = 1
    """How the records' site ids were made (``Ledger.site_id_scheme``)."""


class CompilationRecord(Struct, tag="compilation", tag_field="record", frozen=True):
    compilation: Compilation


class BreakSiteRecord(Struct, tag="break_site", tag_field="record", frozen=True):
    break_site: BreakSite


class CallRecord(Struct, tag="call", tag_field="record", frozen=True):
    call: Call


class OutsideRecord(Struct, tag="outside", tag_field="record", frozen=True):
    outside: OutsideRegion


TraceRecord = TraceHeader | CompilationRecord | BreakSiteRecord | CallRecord | OutsideRecord


def trace_json_schema() -> dict[str, object]:
    """The JSON Schema of one trace line (``docs/trace.schema.json`` is this, written out)."""
    import msgspec

    from .schema import clean_descriptions

    schema = clean_descriptions(msgspec.json.schema(TraceRecord))
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://seamscope.dev/schema/trace.schema.json",
        "title": f"seamscope trace line (trace_version {TRACE_VERSION})",
        "description": (
            "A seamscope trace is JSON Lines: line 1 is a header record, then one compilation, "
            "break_site, call or outside record per line. Each line matches this schema. "
            "Durations are integer nanoseconds."
        ),
        **schema,
    }


if __name__ == "__main__":  # python -m seamscope.model.trace > docs/trace.schema.json
    import json
    import sys

    sys.stdout.write(json.dumps(trace_json_schema(), indent=1, sort_keys=True) + "\n")
