"""Canonical bytes: sorted keys, floats rounded to fixed significant digits, no timestamps.

The same ledger gives the same bytes whatever the insertion order of its dicts, so hashes are
reproducible and golden files are meaningful.
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


def canonical_bytes(obj: Any) -> bytes:
    """Compact canonical JSON: the bytes that are hashed."""
    return msgspec.json.encode(to_builtins(obj), order="sorted")


def pretty_bytes(obj: Any) -> bytes:
    """Canonical JSON indented for people; same content as :func:`canonical_bytes`."""
    return msgspec.json.format(canonical_bytes(obj), indent=1) + b"\n"


def sha256_of(obj: Any) -> str:
    return hashlib.sha256(canonical_bytes(obj)).hexdigest()
