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


def canonical_bytes(obj: Any) -> bytes:
    """Compact canonical JSON: the bytes that are hashed (``msgspec.json.encode(to_builtins(obj),
    order="sorted")``, without a Python call per value)."""
    return _sorted(_decode_rounded(_encode(obj)))


def pretty_bytes(obj: Any) -> bytes:
    """Canonical JSON indented for people; same content as :func:`canonical_bytes`."""
    return msgspec.json.format(canonical_bytes(obj), indent=1) + b"\n"


def sha256_of(obj: Any) -> str:
    return hashlib.sha256(canonical_bytes(obj)).hexdigest()
