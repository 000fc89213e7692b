"""Canonical bytes: sorted keys, floats rounded to fixed significant digits, no timestamps.

The same ledger gives the same bytes whatever the insertion order of its dicts, so hashes are
reproducible and golden files are meaningful.

:func:`canonical_bytes` gets there in C: msgspec encodes the object, decodes it again with every
float rounded as it is read (msgspec writes a float as its shortest round-trip text, so the
rounding sees the float itself), and encodes that with sorted keys. :func:`to_builtins` is the
same in Python, one object at a time (ten times slower on a large receipt);
tests/test_model_ledger.py checks both give the same bytes.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

import msgspec

FLOAT_DIGITS = 6  # significant digits kept for every float in canonical output


def round_float(x: float) -> float:
    if not math.isfinite(x) or x == 0.0:
        return 0.0 if x == 0.0 else x
    return float(f"{x:.{FLOAT_DIGITS}g}")


def _canon(obj: Any) -> Any:
    if isinstance(obj, float):
        return round_float(obj)
    if isinstance(obj, dict):
        return {str(k): _canon(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_canon(v) for v in obj]
    return obj


def to_builtins(obj: Any) -> Any:
    """Plain JSON-able data with canonical floats (structs become dicts, tagged unions keep tags)."""
    return _canon(msgspec.to_builtins(obj))


def _rounded(text: str) -> float:
    return round_float(float(text))


_encode = msgspec.json.Encoder().encode
_sorted = msgspec.json.Encoder(order="sorted").encode
_decode_rounded = msgspec.json.Decoder(float_hook=_rounded).decode


def canonical_value(obj: Any) -> Any:
    """:func:`to_builtins`, in C."""
    return _decode_rounded(_encode(obj))


_PLAIN = frozenset({str, int, bool, type(None)})  # values canonical as they are


def sha256_canonical(value: Any, depth: int = 4, rounded: bool = False) -> str:
    """``sha256(canonical_bytes(value))`` for plain data (dicts, lists), its outer ``depth``
    levels written piece by piece and a list of strings and integers at once, so that the whole
    text (37 MB for a receipt of 1,550 recompiles, with every failed guard) is never held, nor
    decoded again. ``rounded``: its floats are canonical already (:func:`canonical_value`)."""
    h = hashlib.sha256()
    _feed(h.update, value, depth, rounded)
    return h.hexdigest()


def _feed(out: Callable[[bytes], object], value: Any, depth: int, rounded: bool) -> None:
    kind = type(value)
    if kind in _PLAIN:
        out(_encode(value))
    elif kind is dict and value and _flat(value):  # no float, no nesting below a list: as it is
        out(_sorted(value))
    elif kind is dict and depth and value:
        sep = b"{"
        for k, v in sorted({str(k): v for k, v in value.items()}.items()):
            out(sep)
            out(_encode(k))
            out(b":")
            _feed(out, v, depth - 1, rounded)
            sep = b","
        out(b"}")
    elif (kind is list or kind is tuple) and value and set(map(type, value)) <= _PLAIN:
        out(_encode(value))
    elif (kind is list or kind is tuple) and depth and value:
        sep = b"["
        for v in value:
            out(sep)
            _feed(out, v, depth - 1, rounded)
            sep = b","
        out(b"]")
    else:
        out(_sorted(value) if rounded else canonical_bytes(value))


def _flat(d: dict[Any, Any]) -> bool:
    """Whether a dict's canonical bytes are its sorted encoding: string keys, each value a
    string, an integer, a bool, None, or a list of those (a compilation of the structure hash)."""
    plain = _PLAIN
    for k, v in d.items():
        if type(k) is not str:
            return False
        kind = type(v)
        if kind not in plain and not ((kind is list or kind is tuple) and set(map(type, v)) <= plain):
            return False
    return True


def canonical_bytes(obj: Any) -> bytes:
    """Compact canonical JSON: the bytes that are hashed (``msgspec.json.encode(to_builtins(obj),
    order="sorted")``, without a Python call per value)."""
    return _sorted(_decode_rounded(_encode(obj)))


def pretty_bytes(obj: Any) -> bytes:
    """Canonical JSON indented for people; same content as :func:`canonical_bytes`."""
    return indented(canonical_bytes(obj))


def indented(canonical: bytes) -> bytes:
    """Canonical bytes as :func:`pretty_bytes` writes them."""
    return msgspec.json.format(canonical, indent=1) + b"\n"


def sha256_of(obj: Any) -> str:
    return hashlib.sha256(canonical_bytes(obj)).hexdigest()
