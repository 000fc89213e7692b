"""The ``TORCH_TRACE`` reader's byte scans: which lines are records, and whether a record line needs
the limits walk. In C (``seamscope._logscan``) where it was built, else in Python: same results
(tests/test_import_scan.py compares both on real and generated logs).

A log is mostly payload lines (a tab, then a line of a payload): 150,000 of the 160,000 lines of
an eager run's log. The reader needs the others only, so the file is never split into one Python
object per line: :func:`record_lines` finds the lines that do not start with a tab, and the payload
lines of the few records whose payload is read are cut out of the buffer between two of them.
``SEAMSCOPE_PURE_PYTHON=1`` uses the Python versions.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, Protocol

from .limits import LONG_DIGITS, MAX_LINE_BYTES, line_too_long, open_regular

CHUNK = 1 << 20  # 1 MiB reads: few syscalls, bounded memory


def record_key(line: bytes) -> tuple[int, bytes]:
    """Where a record line's JSON starts less 2 (``j``: the glog prefix ends with ``] {`` in its
    first 400 bytes; -1 when it does not) and its event key (``b""`` when there is none)."""
    j = line.find(b"] {", 0, 400)
    if j < 0:
        return j, b""
    k0 = j + 4
    k1 = line.find(b'"', k0)
    return j, line[k0:k1] if line[k0 - 1 : k0] == b'"' and k1 > 0 else b""


def record_lines_py(buf: bytes, end: int, skip: frozenset[bytes]) -> tuple[list[int], int, int, int]:
    """``([start, stop, index, ...], lines, skipped, last_skipped)``: each line of ``buf[:end]``
    (``end`` just past a newline) that does not start with a tab, flat (``stop`` excludes the
    newline, ``index`` counts lines from 0), and the number of lines in ``buf[:end]``.

    A record whose event key is in ``skip`` is left out (counted in ``skipped``; ``last_skipped``
    is the index of the last, or -1) unless the line given out before it is no such record, or
    is in an earlier buffer: the payload of that line, if it is read, ends at this one."""
    spans: list[int] = []
    pos = index = skipped = 0
    last_skipped = -1
    open_payload = True
    for line in buf[:end].split(b"\n")[:-1] if end else ():
        stop = pos + len(line)
        if line[:1] != b"\t":
            kind = bool(skip) and record_key(line)[1] in skip
            if kind and not open_payload:
                skipped, last_skipped = skipped + 1, index
            else:
                spans += (pos, stop, index)
                open_payload = not kind
        pos, index = stop + 1, index + 1
    return spans, index, skipped, last_skipped


def limits_prefilter_py(buf: bytes, start: int) -> tuple[bool, int]:
    """``(long_digits, brackets)``: whether ``buf[start:]`` holds a run of 20 digits (an integer
    that may be beyond 64 bits), and how many ``[`` and ``{`` it holds (how deep it may nest)."""
    part = buf[start:] if start else buf
    return LONG_DIGITS.search(part) is not None, part.count(b"[") + part.count(b"{")


def payload_text_py(blocks: list[bytes]) -> tuple[bytes, int]:
    """``(text, lines)``: the payload in ``blocks`` (payload lines as read, each with its tab,
    joined by newlines) without the tabs, and its number of lines."""
    raw = b"\n".join(blocks)
    return raw[1:].replace(b"\n\t", b"\n"), raw.count(b"\n") + 1


def _load() -> ModuleType | None:
    if os.environ.get("SEAMSCOPE_PURE_PYTHON", "") not in ("", "0"):
        return None
    try:
        from .. import _logscan
    except ImportError:
        return None
    return _logscan


NATIVE = _load()
"""``seamscope._logscan``, or None (the Python versions are used)."""

record_lines: Callable[[bytes, int, frozenset[bytes]], tuple[list[int], int, int, int]] = (
    NATIVE.record_lines if NATIVE is not None else record_lines_py)
limits_prefilter: Callable[[bytes, int], tuple[bool, int]] = (
    NATIVE.limits_prefilter if NATIVE is not None else limits_prefilter_py)
payload_text: Callable[[list[bytes]], tuple[bytes, int]] = (
    NATIVE.payload_text if NATIVE is not None and hasattr(NATIVE, "payload_text") else payload_text_py)


class FileStats(Protocol):
    """What a line source records about the file (``torch_trace.ParseStats`` has these)."""

    bytes: int
    sha256: str
    cut_line: int
    lines: int


class PayloadSink:
    """Where a line source puts the payload lines that follow a record, while the reader wants
    them (``on``): only for the records whose payload it reads."""

    __slots__ = ("on", "blocks", "skip", "skipped", "last_skipped")

    def __init__(self, skip: frozenset[bytes] = frozenset()) -> None:
        self.on = False
        self.blocks: list[bytes] = []
        """Payload lines as read (each with its tab), one or more per block, joined by newlines."""
        self.skip = skip
        """Event keys of records the reader only counts: a line source may count them here
        instead of giving them out (:func:`record_lines`)."""
        self.skipped = 0
        self.last_skipped = 0
        """The line of the last record counted in ``skipped`` (0: none)."""

    def add(self, block: bytes) -> None:
        self.blocks.append(block)

    def take(self) -> tuple[bytes, int]:
        """The payload (its lines without their tabs, joined by newlines) and its number of
        lines; the sink is emptied."""
        if not self.blocks:
            return b"", 0
        blocks, self.blocks = self.blocks, []
        return payload_text(blocks)


def _chunks(path: str, stats: FileStats) -> Iterator[bytes]:
    """The file in :data:`CHUNK` reads, each counted and hashed; the hash is set at the end.

    The hash is taken in a second thread (``hashlib`` lets go of the GIL while it hashes), in
    the order read, at most :data:`HASH_QUEUE` reads behind: on two cores it costs no time."""
    h = hashlib.sha256()
    todo: queue.Queue[bytes | None] = queue.Queue(HASH_QUEUE)
    worker = threading.Thread(target=_hash_all, args=(h, todo), name="seamscope-sha256", daemon=True)
    worker.start()
    try:
        with open_regular(path, buffering=0) as f:
            while True:
                chunk = f.read(CHUNK)
                if not chunk:
                    break
                todo.put(chunk)
                stats.bytes += len(chunk)
                yield chunk
    finally:
        todo.put(None)
        worker.join()
    stats.sha256 = h.hexdigest()


HASH_QUEUE = 8  # reads waiting to be hashed (8 MiB at most)


def _hash_all(h: Any, todo: queue.Queue[bytes | None]) -> None:
    while (chunk := todo.get()) is not None:
        h.update(chunk)


def iter_lines(path: str, stats: FileStats) -> Iterator[tuple[int, bytes]]:
    """``(line number, line without its newline)`` for every line; hashes every byte read. The
    last line is yielded even without a newline (a cut file: ``stats.cut_line``)."""
    n = 0
    rest = b""
    for chunk in _chunks(path, stats):
        lines = (rest + chunk).split(b"\n") if rest else chunk.split(b"\n")
        rest = lines.pop()
        if len(rest) > MAX_LINE_BYTES:
            raise line_too_long(path, n + len(lines) + 1)
        for ln in lines:
            n += 1
            yield n, ln
    if rest:
        n += 1
        stats.cut_line = n  # the reader says whether it was cut
        yield n, rest
    stats.lines = n


def each_line(path: str, stats: FileStats, sink: PayloadSink) -> Iterator[tuple[int, bytes]]:
    """A line source, one line at a time: every line that does not start with a tab is yielded;
    a payload line goes to ``sink`` while it is on. The reference :func:`record_scan` must equal."""
    for ln, line in iter_lines(path, stats):
        if line[:1] == b"\t":
            if sink.on:
                sink.add(line)
            continue
        yield ln, line


def record_scan(path: str, stats: FileStats, sink: PayloadSink) -> Iterator[tuple[int, bytes]]:
    """The same line source as :func:`each_line`, without a Python object per payload line: each
    1 MiB read is scanned for the lines that do not start with a tab (:func:`record_lines`), and
    payload lines are cut out of the buffer only while ``sink`` is on. Most records of the kinds
    in ``sink.skip`` are only counted there."""
    base = 0  # lines before ``buf``
    rest = b""
    scan = record_lines
    for chunk in _chunks(path, stats):
        buf = rest + chunk if rest else chunk
        end = buf.rfind(b"\n") + 1
        if not end:  # no line ends in it yet
            if len(buf) > MAX_LINE_BYTES:  # /dev/zero's kind of file: never one line
                raise line_too_long(path, base + 1)
            rest = buf
            continue
        spans, count, skipped, last = scan(buf, end, sink.skip)
        if skipped:
            sink.skipped += skipped
            sink.last_skipped = base + last + 1
        cur = 0  # the first byte not yet given out (as a record line or to the sink)
        it = iter(spans)
        for s, e, i in zip(it, it, it, strict=True):
            if sink.on and s > cur:
                sink.add(buf[cur : s - 1])  # whole payload lines, without the last newline
            yield base + i + 1, buf[s:e]
            cur = e + 1
        if sink.on and end > cur:
            sink.add(buf[cur : end - 1])
        base += count
        rest = buf[end:]
    if rest:
        base += 1
        stats.cut_line = base  # the reader says whether it was cut
        if rest[:1] != b"\t":
            yield base, rest
        elif sink.on:
            sink.add(rest)
    stats.lines = base
