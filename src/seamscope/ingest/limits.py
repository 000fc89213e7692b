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
import re
from typing import Any

import msgspec

from ..errors import UnusableInput

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
    try:
        raw = json.loads(data)
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
