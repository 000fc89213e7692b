"""seamscope trace → ledger, tolerant line by line (format in :mod:`seamscope.model.trace`).

A trace that is not one, or of an unknown version, is unusable input (exit 2). Inside a usable
trace, a line that breaks the schema is skipped with its line number, a trace over its declared
bounds or shorter than its header says is reported, and everything readable is kept.
"""

from __future__ import annotations

import functools
import hashlib
import os

import msgspec

from ..errors import UnusableInput
from ..model.ledger import (
    SCHEMA_VERSION,
    SCHEMA_VERSIONS_READ,
    BreakSite,
    Call,
    Compilation,
    Ledger,
    OutsideRegion,
)
from ..model.trace import (
    TRACE_KIND,
    TRACE_VERSION,
    BreakSiteRecord,
    CallRecord,
    CompilationRecord,
    OutsideRecord,
    TraceHeader,
    TraceRecord,
)
from .limits import LONG_DIGITS, MAX_LINE_BYTES, field_problem, line_too_long, open_regular
from .torch_trace import ParseStats, TraceImport


@functools.cache
def _records() -> msgspec.json.Decoder[TraceRecord]:
    """The records' decoder, made on first use: a typed decoder takes 6 ms to build, and
    ``seamscope import`` of a ``TORCH_TRACE`` log never reads a seamscope trace."""
    return msgspec.json.Decoder(TraceRecord)


def _line_problem(line: bytes) -> str | None:
    """An integer beyond 64 bits in a record line (the typed decoder bounds nesting and floats)."""
    if not LONG_DIGITS.search(line):
        return None
    return field_problem(msgspec.json.decode(line))


def looks_like_trace(head: bytes) -> bool:
    """True when the first bytes of a file are a seamscope trace header."""
    first = head.lstrip().split(b"\n", 1)[0]
    return first.startswith(b"{") and b'"kind":"seamscope.trace"' in first.replace(b" ", b"")


def _header(path: str, line: bytes) -> TraceHeader:
    try:
        raw = msgspec.json.decode(line)
    except (msgspec.DecodeError, RecursionError) as e:
        raise UnusableInput(f"{path}:1: not a seamscope trace (header is not JSON: {e})") from None
    problem = field_problem(raw)
    if problem is not None:
        raise UnusableInput(f"{path}:1: trace header: {problem}")
    if not isinstance(raw, dict) or raw.get("kind") != TRACE_KIND or raw.get("record") != "header":
        raise UnusableInput(f"{path}:1: not a seamscope trace (no header with \"kind\": \"{TRACE_KIND}\")")
    if raw.get("trace_version") != TRACE_VERSION or raw.get("schema_version") not in SCHEMA_VERSIONS_READ:
        raise UnusableInput(
            f"{path}:1: seamscope trace version {raw.get('trace_version')!r} (ledger schema "
            f"{raw.get('schema_version')!r}) is not supported; this seamscope reads trace version "
            f"{TRACE_VERSION}, schema {SCHEMA_VERSION}"
        )
    try:
        return msgspec.convert(raw, type=TraceHeader)
    except msgspec.ValidationError as e:
        raise UnusableInput(f"{path}:1: trace header does not match docs/trace.schema.json: {e}") from None


def _check_counts(path: str, header: TraceHeader, stats: ParseStats, comps: int, sites: int, calls: int,
                  outside: int) -> None:
    """A problem for each count that differs from what the header announced, and for calls over
    the trace's bound (what was read is kept either way)."""
    if calls > header.bounds.max_calls:
        stats.problem(path, 0, "bounds", f"{calls} calls, over the trace's bound of {header.bounds.max_calls} (kept)")
    want = header.counts
    for what, got, exp in (
        ("compilations", comps, want.compilations),
        ("break sites", sites, want.break_sites),
        ("calls", calls, want.calls),
        ("outside regions", outside, want.outside),
    ):
        if got != exp:
            stats.problem(path, 0, "count", f"header announces {exp} {what}, {got} read (cut or edited?)")


def import_seamscope_trace(path: str) -> TraceImport:
    stats = ParseStats()
    h = hashlib.sha256()
    header: TraceHeader | None = None
    comps: list[Compilation] = []
    sites: list[BreakSite] = []
    calls: list[Call] = []
    outside: list[OutsideRegion] = []
    f = open_regular(path)
    records = _records()
    with f:
        for n, line in enumerate(iter(lambda: f.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(line) > MAX_LINE_BYTES:
                raise line_too_long(path, n)
            h.update(line)
            stats.bytes += len(line)
            stats.lines = n
            if not line.endswith(b"\n"):
                stats.problem(path, n, "truncated", "last line has no newline (file cut?)")
            if not line.strip():
                continue
            if header is None:
                header = _header(path, line)
                continue
            stats.records += 1
            try:
                rec = records.decode(line)
            except (msgspec.DecodeError, RecursionError) as e:
                # ValidationError is a DecodeError: both mean "not a valid record line".
                stats.problem(path, n, "schema", f"line does not match docs/trace.schema.json ({e}); skipped")
                continue
            problem = _line_problem(line)
            if problem is not None:
                stats.problem(path, n, "schema", f"{problem}; skipped")
                continue
            stats.decoded += 1
            if isinstance(rec, CompilationRecord):
                comps.append(rec.compilation)
            elif isinstance(rec, BreakSiteRecord):
                sites.append(rec.break_site)
            elif isinstance(rec, CallRecord):
                if header.bounds.max_events_per_call < len(rec.call.events):
                    stats.problem(
                        path, n, "bounds",
                        f"call {rec.call.index} has {len(rec.call.events)} events, over the trace's "
                        f"bound of {header.bounds.max_events_per_call} (kept)",
                    )
                calls.append(rec.call)
            elif isinstance(rec, OutsideRecord):
                outside.append(rec.outside)
            else:
                stats.problem(path, n, "schema", "a second header inside the trace; skipped")
    stats.sha256 = h.hexdigest()
    if header is None:
        raise UnusableInput(f"{path}: empty file, not a seamscope trace")
    _check_counts(path, header, stats, len(comps), len(sites), len(calls), len(outside))
    run = header.run
    retention = header.retention
    if stats.problem_count:
        run = msgspec.structs.replace(run, warnings=[*run.warnings, *(str(i) for i in stats.issues)])
    if len(calls) != retention.retained:
        retention = msgspec.structs.replace(
            retention, retained=len(calls), dropped=header.totals.calls - len(calls)
        )
    ledger = Ledger(
        schema_version=header.schema_version,
        run=run,
        environment=header.environment,
        compilations=comps,
        break_sites=sites,
        calls=calls,
        outside=outside,
        totals=header.totals,
        retention=retention,
        site_id_scheme=header.site_id_scheme,
    )
    return TraceImport(path=os.fspath(path), ledger=ledger, stats=stats)
