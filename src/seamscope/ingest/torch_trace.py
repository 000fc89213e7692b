"""``TORCH_TRACE`` logs → ledgers, in one streaming pass.

A log is what ``TORCH_TRACE=DIR`` makes PyTorch write (``dedicated_log_torch_trace_[rank_N_]XXXX.log``,
the file ``tlparse`` reads). Each record is a glog prefix, then one JSON object whose first key
names the event, then optionally a payload on lines that start with a tab (``has_payload`` is its
MD5). Why this parser is fast and small:

- the file is read once in large chunks (hashed as it goes) and only its record lines are cut out
  of each (``scan.record_scan``: payload lines, most of a log, never become Python objects);
  nothing else about the file is kept, so memory does not grow with its size;
- the event key is read off the raw bytes (``{"KEY": ...``) and records the ledger never needs
  (chromium events, tensor descriptions, generated code) are skipped without decoding;
- a payload is joined and decoded only where its text is needed (break reasons, recompile reasons,
  cache bypass reasons, each cache entry's guard tree, whose checks are counted by group); every
  other payload line costs one memchr (in C where it was built).

Tolerance: a bad line, a cut payload, an unknown event kind, a disagreement inside the log or a
log from an untested PyTorch version becomes an :class:`Issue` with the file and line, counted per
kind; what is readable is kept. What the reader recognised (the log's format, compiled autograd,
resets, an unknown version) is a note, no problem. The rules per log format: docs/import.md. Nothing
from a file is ever executed (JSON only: no eval, no pickle), and torch is never imported.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from ..model.builder import LedgerBuilder
from ..model.compat import is_tested, tested_range
from ..model.ledger import Environment, Ledger, RunInfo
from .compile_events import IGNORED_EVENTS, PAYLOAD_ARTIFACTS, CompileEventAssembler
from .limits import MAX_DEPTH, MAX_RANK, field_problem, rank_number
from .scan import CHUNK, PayloadSink, limits_prefilter, record_key, record_scan

#: What a ``TORCH_TRACE`` log cannot tell (RunInfo.absent): marked, never invented.
ABSENT = [
    "calls: the log records compilations, not the calls that ran them",
    "regions per call and their run time",
    "eager islands",
    "per-call timing and phases",
    "seam traffic",
    "device and backend",
]

#: PyTorch minor versions whose logs this parser was checked against.

LOG_NAME = re.compile(r"^dedicated_log_torch_trace_.*\.log(?:\.gz)?$")
#: The rank in a log's name: ``..._rank_5_x1y2.log`` (PyTorch's) or ``..._rank_5.log`` (renamed),
#: either gzip'd (``.log.gz``).
RANK_IN_NAME = re.compile(r"(?:^|_)rank_(\d+)(?:_[^/]*?)?\.log(?:\.gz)?$")
#: The first bytes of a gzip file (RFC 1952): a log compressed to be kept or sent.
GZIP_MAGIC = b"\x1f\x8b"

MAX_MESSAGES = 50  # issues kept with their line; the rest are only counted

_NEEDED = frozenset({b"str", b"dynamo_start", b"dynamo_output_graph", b"artifact", b"compilation_metrics",
                     b"dynamo_cpp_guards_str"})
#: What a payload is read for: the artifacts named, each cache entry's guard tree, and each graph's
#: code (the frames its nodes were traced in name the compilation: ``naming``).
_PAYLOADS = PAYLOAD_ARTIFACTS | {"dynamo_cpp_guards_str", "dynamo_output_graph"}
_IGNORED = frozenset(k.encode() for k in IGNORED_EVENTS)
_decode = msgspec.json.Decoder().decode
#: Yields the lines of a file that are not payload lines; payload lines go to the sink while it is on.
LineSource = Callable[[str, "ParseStats", PayloadSink], Iterator[tuple[int, bytes]]]


@dataclass(frozen=True)
class Issue:
    """One problem in an input file, as a user reads it: ``file:line: text``; or a note (what the
    reader recognised or decided, no problem: ``file: note: text``)."""

    file: str
    line: int
    kind: str
    text: str
    note: bool = False

    def __str__(self) -> str:
        return self.named(self.file)

    def named(self, file: str) -> str:
        """The same, with the file named ``file`` (a receipt names the log by its base name)."""
        where = f"{file}:{self.line}" if self.line else file
        return f"{where}: note: {self.text}" if self.note else f"{where}: {self.text}"


@dataclass
class ParseStats:
    """What the parser saw and what it skipped, by kind (tlparse's ``Stats``, for seamscope)."""

    lines: int = 0
    records: int = 0
    decoded: int = 0
    payloads_read: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    """Problem kind → count (``bad_line``, ``bad_json``, ``truncated``, ``payload``, ...)."""
    unknown_events: dict[str, int] = field(default_factory=dict)
    issues: list[Issue] = field(default_factory=list)
    """The first :data:`MAX_MESSAGES` problems with their line; ``skipped`` counts them all."""
    notes: list[Issue] = field(default_factory=list)
    """What the reader recognised or decided (log format, unknown version, compiled autograd,
    resets): no problem, never counted by ``--strict``."""
    sha256: str = ""
    cut_line: int = 0
    """The last line when it had no newline; reported as ``truncated`` only when what it ends
    (a record or a payload) is incomplete."""
    rank: int | None = None
    rank_line: int = 0
    """The first record naming ``rank``."""
    events: int = 0
    """Records with an event key (read or skipped): zero means the file is no ``TORCH_TRACE`` log."""
    last_record: int = 0
    """The line of the last record (for a payload cut at the end of the file)."""
    bytes: int = 0

    def problem(self, file: str, line: int, kind: str, text: str) -> None:
        self.skipped[kind] = self.skipped.get(kind, 0) + 1
        if len(self.issues) < MAX_MESSAGES:
            self.issues.append(Issue(file, line, kind, text))

    def note(self, file: str, line: int, kind: str, text: str) -> None:
        self.notes.append(Issue(file, line, kind, text, note=True))

    @property
    def problem_count(self) -> int:
        return sum(self.skipped.values())


def rank_from_name(path: str) -> int | None:
    """The rank in the log's name; None without one, or beyond ``MAX_RANK`` (then not a rank)."""
    m = RANK_IN_NAME.search(os.path.basename(path))
    return rank_number(m.group(1)) if m else None


def _absurd_rank_in_name(path: str) -> str | None:
    m = RANK_IN_NAME.search(os.path.basename(path))
    return m.group(1) if m and rank_number(m.group(1)) is None else None


def find_logs(directory: str) -> list[str]:
    """The ``TORCH_TRACE`` logs in a directory (not recursive), by rank then name."""
    names = [n for n in os.listdir(directory) if LOG_NAME.match(n)]
    paths = [os.path.join(directory, n) for n in names if os.path.isfile(os.path.join(directory, n))]
    return sorted(paths, key=lambda p: (rank_from_name(p) is None, rank_from_name(p) or 0, p))


CUT_TEXT = "last line has no newline and is incomplete (file cut while written?)"


def _payload_text(raw: bytes, md5: str) -> tuple[bytes, bool]:
    """The payload's bytes and whether they match their MD5; a file with CRLF line ends (a copy
    through Windows) matches once the ``\r`` of each line is dropped."""
    if hashlib.md5(raw).hexdigest() == md5:
        return raw, True
    if b"\r" in raw:
        lf = raw.replace(b"\r\n", b"\n")  # one \r before each line's end, and the last line's
        lf = lf[:-1] if lf[-1:] == b"\r" else lf
        if hashlib.md5(lf).hexdigest() == md5:
            return lf, True
    return raw, False


def _tail_lines(path: str, n: int) -> list[bytes]:
    """The last ``n`` lines of a file without a final newline, read backwards (a bounded read at
    the end; only for a payload cut there)."""
    with open(path, "rb") as f:
        pos = f.seek(0, os.SEEK_END)
        data = b""
        while pos > 0 and data.count(b"\n") < n:
            step = min(CHUNK, pos)
            pos -= step
            f.seek(pos)
            data = f.read(step) + data
    return data.split(b"\n")[-n:]


def _cut_payload_complete(path: str, stats: ParseStats) -> bool:
    """Whether a payload that ends the file without a newline, of a record the reader skipped,
    is whole: its record's ``has_payload`` MD5 matches the lines read back."""
    lines = _tail_lines(path, stats.cut_line - stats.last_record + 1)
    head, body = lines[0], [ln[1:] for ln in lines[1:]]
    j = head.find(b"] {", 0, 400)
    try:
        meta = _decode(head[j + 2 :]) if j >= 0 else None
    except (msgspec.DecodeError, UnicodeDecodeError):
        return False
    md5 = meta.get("has_payload") if isinstance(meta, dict) else None
    return isinstance(md5, str) and _payload_text(b"\n".join(body), md5)[1]


def iter_records(
    path: str, stats: ParseStats, lines: LineSource = record_scan
) -> Iterator[tuple[int, dict[str, Any], str | None]]:
    """``(line, metadata, payload)`` for the records the ledger needs, in file order.

    Payloads are returned only for :data:`PAYLOAD_ARTIFACTS`, guard trees and graphs (else None); records of ignored
    kinds are counted and skipped undecoded; unknown kinds are counted in ``stats``. ``lines``
    gives the lines that are not payload lines (``scan.each_line`` is the one-line-at-a-time
    reference of the default).
    """
    name = path
    pend: tuple[int, dict[str, Any], str] | None = None  # record waiting for its payload
    sink = PayloadSink(_IGNORED)
    ignored = _IGNORED
    needed = _NEEDED

    def flush(at_end: bool = False) -> tuple[int, dict[str, Any], str | None]:
        ln, meta, md5 = pend  # type: ignore[misc]
        cut = at_end and stats.cut_line > 0
        raw, count = sink.take()
        if not count:
            if not (cut and stats.cut_line == ln):  # else reported as truncated already
                stats.problem(name, ln, "payload", "payload announced (has_payload) but missing")
            return ln, meta, None
        raw, whole = _payload_text(raw, md5)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            text = raw.decode("utf-8", "replace")
            stats.problem(name, ln, "non_utf8", "payload is not UTF-8 (bad bytes replaced)")
        if not whole:
            if cut and stats.cut_line == ln + count:
                stats.problem(name, stats.cut_line, "truncated", CUT_TEXT)
            else:
                stats.problem(name, ln, "payload", "payload does not match its MD5 (cut or altered); kept as read")
        stats.payloads_read += 1
        return ln, meta, text

    records = events = last_rec = 0  # kept local in the loop; written to ``stats`` after it
    last_line = b""
    for ln, line in lines(path, stats, sink):
        if pend is not None:
            sink.on = False
            yield flush()
            pend = None
        if not line:
            continue
        j, key = record_key(line)
        if j < 0:
            if ln == stats.cut_line:
                stats.problem(name, ln, "truncated", CUT_TEXT)
            else:
                stats.problem(name, ln, "bad_line", "not a structured-trace record (no glog prefix and JSON)")
            continue
        records += 1
        last_rec, last_line = ln, line
        if key in ignored:
            events += 1
            continue
        if key not in needed:
            if key:
                try:
                    skey = key.decode()
                except UnicodeDecodeError:
                    skey = repr(key)
                if skey not in stats.unknown_events:
                    stats.problem(name, ln, "unknown_event", f"unknown event kind {skey!r} (skipped)")
                else:
                    stats.skipped["unknown_event"] += 1
                stats.unknown_events[skey] = stats.unknown_events.get(skey, 0) + 1
                events += 1
                continue
            stats.problem(name, ln, "bad_json", "record does not start with an event key")
            continue
        events += 1
        try:
            meta = _decode(line[j + 2 :])
        except (msgspec.DecodeError, UnicodeDecodeError, RecursionError) as e:
            if ln == stats.cut_line:  # a cut last line is reported once, as ``truncated``
                stats.problem(name, ln, "truncated", CUT_TEXT)
            else:
                stats.problem(name, ln, "bad_json", f"unreadable JSON ({e}); record skipped")
            continue
        # msgspec already refuses NaN, Infinity and out-of-range floats; what is left to refuse is
        # an integer beyond 64 bits (a run of 20 digits) or nesting beyond MAX_DEPTH (that many
        # brackets), so the walk runs only on a record whose line could hold either
        ints, brackets = limits_prefilter(line, 0)
        deep = brackets > MAX_DEPTH
        bad = field_problem(meta, ints=ints) if ints or deep else None
        if bad is not None:
            stats.problem(name, ln, "bad_json", f"{bad}; record skipped")
            continue
        if not isinstance(meta, dict):
            stats.problem(name, ln, "bad_json", "record is not a JSON object")
            continue
        stats.decoded += 1
        if stats.rank is None and isinstance(meta.get("rank"), int) and 0 <= meta["rank"] <= MAX_RANK:
            stats.rank, stats.rank_line = meta["rank"], ln
        md5 = meta.get("has_payload")
        if ln == stats.cut_line and isinstance(md5, str):  # its payload never came
            stats.problem(name, ln, "truncated", CUT_TEXT)
        if isinstance(md5, str) and key in (b"artifact", b"dynamo_cpp_guards_str", b"dynamo_output_graph"):
            art = meta.get("artifact") if key == b"artifact" else {"name": key.decode()}
            if isinstance(art, dict) and art.get("name") in _PAYLOADS:
                pend = (ln, meta, md5)
                sink.on = True
                continue
        yield ln, meta, None
    # records the line source only counted (never the last line, so never one cut there)
    records, events, last_rec = records + sink.skipped, events + sink.skipped, max(last_rec, sink.last_skipped)
    stats.records, stats.events, stats.last_record = stats.records + records, stats.events + events, last_rec
    if pend is not None:
        yield flush(at_end=True)
    elif stats.cut_line and last_rec == stats.cut_line:
        _check_cut_record(name, last_line, stats)
    elif stats.cut_line and stats.cut_line > last_rec > 0 and not stats.skipped.get("truncated"):
        # the file ends inside the payload of a record whose payload was skipped unread
        if not _cut_payload_complete(path, stats):
            stats.problem(name, stats.cut_line, "truncated", CUT_TEXT)


def _check_cut_record(name: str, line: bytes, stats: ParseStats) -> None:
    """The last record, on a line without a newline: cut unless it decodes whole and announces no
    payload. (A record the reader decoded was judged already.)"""
    if stats.skipped.get("truncated"):
        return
    j = line.find(b"] {", 0, 400)
    try:
        meta = _decode(line[j + 2 :])
    except (msgspec.DecodeError, UnicodeDecodeError):
        meta = None
    if not isinstance(meta, dict) or isinstance(meta.get("has_payload"), str):
        stats.problem(name, stats.cut_line, "truncated", CUT_TEXT)


@dataclass
class TraceImport:
    """One input file (a ``TORCH_TRACE`` log, a seamscope trace) read into a ledger, with what was
    skipped on the way."""

    path: str
    ledger: Ledger
    stats: ParseStats

    @property
    def issues(self) -> list[Issue]:
        return self.stats.issues


def _version_issue(version: str) -> str | None:
    if not is_tested(version):
        return (
            f"log written by PyTorch {version}; seamscope reads logs of PyTorch "
            f"{tested_range()} (other versions may lose fields; unknown kinds are counted)"
        )
    return None


#: The log formats a ``TORCH_TRACE`` file can be in, by the field its ``compilation_metrics``
#: give a frame's compile time in (docs/import.md says which PyTorch builds wrote which).
LOG_FORMATS = {
    "duration_us": "compile time from duration_us",
    "cumulative_us": "compile time from dynamo_cumulative_compile_time_us (no duration_us)",
    "seconds": "compile time from entire_frame_compile_time_s (no microsecond fields)",
}


def _notes(path: str, asm: CompileEventAssembler, stats: ParseStats) -> None:
    """What the reader recognised: the log's format, its PyTorch version, compiled autograd, resets."""
    if asm.torch_version is None:
        stats.note(path, 0, "version_unknown", "no compilation_metrics with pytorch_version: PyTorch version unknown")
    else:
        msg = _version_issue(asm.torch_version)
        if msg is not None:
            stats.problem(path, 0, "version", msg)
    if asm.log_format:
        main = max(asm.log_format, key=lambda k: asm.log_format[k])
        text = f"log format {main} ({LOG_FORMATS[main]}"
        if asm.log_format_versions:
            text += f"; log_format_version {', '.join(map(str, sorted(asm.log_format_versions)))}"
        if asm.null_autograd_ids:
            text += "; records carry a null compiled_autograd_id"
        others = sorted(k for k in asm.log_format if k != main)
        if others:
            text += f"; also {', '.join(f'{asm.log_format[k]} record(s) as {k}' for k in others)}"
        stats.note(path, 0, "log_format", text + ")")
    autograd = sum(1 for c in asm.compilations if c.startswith("!"))
    if autograd:
        stats.note(path, 0, "compiled_autograd",
                   f"{autograd} compilation(s) of compiled autograd graphs (ids !N/x/y) counted as compilations")
    if asm.generation > 1:
        stats.note(path, 0, "generations",
                   f"compile ids restart {asm.generation - 1} time(s) (torch._dynamo.reset()): "
                   f"{asm.generation} generations, the later ones' ids marked x/y@2 … x/y@{asm.generation}")


def is_gzip(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(2) == GZIP_MAGIC
    except OSError:
        return False


def import_torch_trace(path: str, cwd: str | None = None) -> TraceImport:
    """Read one log into a ledger (compile-time evidence only; no calls). A gzip'd log is read
    decompressed (into a temporary file, as the reader scans a file), and says so in a note."""
    if is_gzip(path):
        return _import_gzip(path, cwd)
    return _import_log(path, cwd)


def _gunzip(path: str, dst: Any) -> str | None:
    """Decompress ``path`` (every gzip member) into the open file ``dst``, chunk by chunk; what is
    wrong with a damaged or cut archive (None: nothing), after writing all that decompressed."""
    import zlib

    d, fed = zlib.decompressobj(wbits=31), False
    with open(path, "rb") as src:
        try:
            while chunk := src.read(CHUNK):
                while chunk:
                    dst.write(d.decompress(chunk))
                    fed = True
                    chunk = b""
                    if d.eof:  # another member may follow (``cat a.gz b.gz``)
                        chunk = d.unused_data
                        d, fed = zlib.decompressobj(wbits=31), False
        except zlib.error as e:
            return f"damaged ({e})"
    return "cut (it ends before its end-of-stream marker)" if fed else None


def _import_gzip(path: str, cwd: str | None) -> TraceImport:
    import tempfile

    name = os.path.basename(path).removesuffix(".gz")
    with tempfile.TemporaryDirectory(prefix="seamscope-gunzip-") as tmp:
        plain = os.path.join(tmp, name)
        with open(plain, "wb") as dst:
            cut = _gunzip(path, dst)
        r = _import_log(plain, cwd)
    stats = r.stats
    stats.issues = [dataclasses.replace(i, file=path) for i in stats.issues]
    stats.notes = [dataclasses.replace(i, file=path) for i in stats.notes]
    stats.note(path, 0, "gzip", "gzip-compressed: read decompressed")
    if cut is not None:
        stats.problem(path, 0, "gzip", f"the compressed file is {cut}; what decompressed was read")
    return TraceImport(path=path, ledger=r.ledger, stats=stats)


def _import_log(path: str, cwd: str | None) -> TraceImport:
    from .._version import __version__

    stats = ParseStats()
    asm = CompileEventAssembler(cwd=cwd, from_log=True)
    notices = asm.notices
    for ln, meta, payload in iter_records(path, stats):
        try:
            asm.feed(meta, payload)
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as e:
            # A record of the right kind with the wrong shape (another PyTorch version, an edit).
            stats.problem(path, ln, "bad_record", f"record not understood ({type(e).__name__}: {e}); skipped")
        if notices:
            for kind, text in notices:
                stats.problem(path, ln, kind, text)
            notices.clear()
    for kind, n in asm.unknown_events.items():
        stats.unknown_events[kind] = stats.unknown_events.get(kind, 0) + n
    for name, n in sorted(asm.missing_fields.items()):
        # kept as sites with the fields they have; counted here, with one message per field
        kind = f"break_without_{name}"
        stats.problem(path, 0, kind, f"{n} graph-break record(s) without a {name.replace('_', ' ')} (kept as sites)")
        stats.skipped[kind] += n - 1
    if stats.bytes == 0:
        stats.problem(path, 0, "empty", "empty file: no records")
    elif stats.events == 0:
        stats.problem(path, 0, "no_records", "no structured-trace records found (is this a TORCH_TRACE log?)")
    else:
        _notes(path, asm, stats)
    incomplete = sorted(asm.pending)
    if incomplete:
        stats.problem(
            path, 0, "incomplete",
            f"{len(incomplete)} compilation(s) without compilation_metrics (log cut?): "
            + ", ".join(incomplete[:8]) + (" …" if len(incomplete) > 8 else ""),
        )
    rank = rank_from_name(path)
    absurd = _absurd_rank_in_name(path)
    if absurd is not None:
        stats.note(path, 0, "rank", f"the rank in the file's name ({absurd[:30]}{'…' if len(absurd) > 30 else ''}) "
                                    f"is beyond {MAX_RANK}: not read as a rank")
    if rank is None:
        rank = stats.rank
    elif stats.rank is not None and stats.rank != rank:
        stats.problem(path, stats.rank_line, "rank_mismatch",
                      f"record says rank {stats.rank}, the file's name rank {rank}: taken from the name")
    base = os.path.basename(path)
    warnings = [i.named(base) for i in stats.notes] + [i.named(base) for i in stats.issues]
    if stats.problem_count > len(stats.issues):
        warnings.append(f"{base}: {stats.problem_count - len(stats.issues)} more problems not listed")
    run = RunInfo(
        source="torch_trace",
        command=[os.path.basename(path)],
        input_trace_sha256=stats.sha256 or hashlib.sha256(b"").hexdigest(),
        rank=rank,
        has_runtime=False,
        absent=list(ABSENT),
        warnings=warnings,
    )
    env = Environment(
        seamscope_version=__version__,
        python_version=asm.python_version or "",
        torch_version=asm.torch_version,
        platform="",
        device="",
    )
    b = LedgerBuilder(run, env, clock=lambda: 0)
    for comp in asm.compilations.values():
        b.set_compilation(comp)
    for site in asm.sites.values():
        b.set_break_site(site)
    return TraceImport(path=path, ledger=b.build(), stats=stats)

