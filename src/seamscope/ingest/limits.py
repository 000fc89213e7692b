"""What every reader of seamscope's own JSON refuses, before any figure is used.

JSON itself bounds nothing: an integer may have 400 digits, arrays may nest 100,000 deep, and a
decoder may turn ``1e400`` into infinity. Each of those would surface later as an ``OverflowError``
or a ``RecursionError`` deep inside a report. :func:`decode_json` turns them into one
:class:`~seamscope.errors.UnusableInput` line naming the field, so a command exits 2.

- integers: within 64 bits (``-2**63`` to ``2**64 - 1``), the range every count and nanosecond
  figure of a receipt lives in;
- nesting: at most :data:`MAX_DEPTH` levels (a receipt needs about ten);
- floats: finite (JSON has no NaN or Infinity; a number too large for a float is refused too).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from typing import Any, BinaryIO

import msgspec

from ..errors import UnusableInput

#: The largest rank a file or folder name may give (``rank_5``, ``rank-5``): a rank is one process
#: of a job, and no job has more than 2**31 of them. A bigger number in a name is no rank.
MAX_RANK = (1 << 31) - 1


def rank_number(digits: str) -> int | None:
    """The rank written as ``digits`` in a name; None beyond :data:`MAX_RANK`."""
    return int(digits) if len(digits) <= 10 and int(digits) <= MAX_RANK else None


MAX_DEPTH = 64  # levels of arrays/objects; a receipt uses about 10
INT_MIN, INT_MAX = -(1 << 63), (1 << 64) - 1

#: An integer beyond 64 bits has at least 20 digits; a file without such a run needs no int walk.
LONG_DIGITS = re.compile(rb"\d{20,}")


def _path(parts: tuple[Any, ...]) -> str:
    out = "$"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def field_problem(obj: Any, ints: bool = True) -> str | None:
    """The first value a reader refuses, as ``"what at $.path"``; None when all is well.

    Iterative (no recursion, whatever the depth); ``ints=False`` checks nesting and floats only."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(obj, ())]
    while stack:
        value, parts = stack.pop()
        if isinstance(value, dict):
            if len(parts) >= MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels at {_path(parts)}"
            stack.extend((v, (*parts, k)) for k, v in value.items())
        elif isinstance(value, list):
            if len(parts) >= MAX_DEPTH:
                return f"nested deeper than {MAX_DEPTH} levels at {_path(parts)}"
            stack.extend((v, (*parts, i)) for i, v in enumerate(value))
        elif isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        elif isinstance(value, int):
            if ints and not INT_MIN <= value <= INT_MAX:
                return f"integer beyond 64 bits at {_path(parts)}"
        elif isinstance(value, float) and not math.isfinite(value):
            return f"NaN or Infinity at {_path(parts)}"
    return None


def _locate(data: bytes) -> str | None:
    """The field a strict decoder refused, when it is a number out of range or a NaN/Infinity
    literal (Python's own parser reads both, and :func:`field_problem` then names the path)."""
    try:  # an integer of thousands of digits is past Python's int-from-text limit: read it as "too big"
        raw = json.loads(data, parse_int=lambda s: int(s) if len(s) < 40 else INT_MAX + 1)
    except (ValueError, RecursionError):
        return None
    return field_problem(raw)


def decode_json(data: bytes, name: str) -> Any:
    """``msgspec.json.decode`` of a whole file, refusing what :func:`field_problem` refuses."""
    try:
        raw = msgspec.json.decode(data)
    except RecursionError:
        raise UnusableInput(f"{name}: JSON nested deeper than {MAX_DEPTH} levels") from None
    except msgspec.DecodeError as e:
        located = _locate(data)
        if located is not None:
            raise UnusableInput(f"{name}: {located}") from None
        hint = " (truncated?)" if "truncated" in str(e).lower() or not data.strip() else ""
        raise UnusableInput(f"{name}: not valid JSON{hint}: {e}") from None
    problem = field_problem(raw, ints=LONG_DIGITS.search(data) is not None)
    if problem is not None:
        raise UnusableInput(f"{name}: {problem}")
    return raw


# --- what a reader opens -------------------------------------------------------------------------

#: The largest receipt a reader takes (a receipt keeps per-call detail for a bounded number of
#: calls, so real ones stay far below this; a bigger file would take many times its size in memory).
MAX_RECEIPT_BYTES = 256 << 20
#: The longest line a trace or ``TORCH_TRACE`` reader takes (real record lines are kilobytes).
MAX_LINE_BYTES = 64 << 20

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _not_regular(path: str, mode: int) -> UnusableInput:
    kind = next((name for test, name in _KINDS if test(mode)), "not a regular file")
    return UnusableInput(f"{path}: {kind}, not a file: seamscope reads regular files only")


def open_regular(path: str, buffering: int = -1) -> BinaryIO:
    """``path`` opened for reading when it is a regular file; one line (exit 2) for a FIFO, a
    device, a socket or a directory, which could block the reader or never end (``/dev/zero``).

    The type is checked with ``stat`` before opening (opening a FIFO blocks, opening some devices
    acts), and again on the descriptor, opened non-blocking, in case the path changed between."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UnusableInput(f"{path}: no such file") from None
    except OSError as e:
        raise UnusableInput(f"{path}: cannot read: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise UnusableInput(f"{path}: cannot read: {e.strerror}") from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise _not_regular(path, st.st_mode)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb", buffering=buffering)


def _size_text(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n >= 1 << 20 else f"{n} bytes"


def read_capped(path: str, limit: int, what: str) -> bytes:
    """The whole of a regular file of at most ``limit`` bytes; one line (exit 2) otherwise."""
    with open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > limit:
            raise UnusableInput(
                f"{path}: {_size_text(size)}, larger than the {_size_text(limit)} seamscope reads as {what}"
            )
        try:
            # read(n) allocates n bytes first: ask for the size it has (plus one, to see it grow),
            # then any growth in bounded pieces, never the whole limit at once
            chunks = [f.read(size + 1)]
            total = len(chunks[0])
            while size < total <= limit:
                more = f.read(min(1 << 20, limit + 1 - total))
                if not more:
                    break
                chunks.append(more)
                total += len(more)
        except OSError as e:
            raise UnusableInput(f"{path}: cannot read: {e.strerror}") from None
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if len(data) > limit:  # it grew while read
        raise UnusableInput(f"{path}: larger than the {_size_text(limit)} seamscope reads as {what}")
    return data


def line_too_long(path: str, line_no: int) -> UnusableInput:
    return UnusableInput(f"{path}: line {line_no} is longer than {_size_text(MAX_LINE_BYTES)}: "
                         "not a file seamscope wrote or PyTorch's trace")
