"""Helpers shared by the break and churn findings: stable ids, the suggested-command placeholder,
and small text formatting."""

from __future__ import annotations

import hashlib
import re

import msgspec

from ..model.findings import Finding
from ..model.normalize import normalize_text

PROBE = "seamscope probe FILE.py:FUNC"
"""Placeholder for the user's workload in suggested commands (the ledger does not name it)."""


# --- ids -----------------------------------------------------------------------------------------

_LINE_NO = re.compile(r"(_at_|line |:)\d+")


def _stable_text(text: str) -> str:
    """Reason text with everything that moves between runs or with edits above the site removed."""
    return _LINE_NO.sub(r"\1#", normalize_text(text)).strip()


def _hash_id(prefix: str, *parts: object) -> str:
    return prefix + hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()[:8]




def _with(f: Finding, **changes: object) -> Finding:
    return msgspec.structs.replace(f, **changes)


def _short(path: str) -> str:
    i = path.find("site-packages/")
    return path[i + len("site-packages/") :] if i >= 0 else path


def _bytes(n: int) -> str:
    for unit, k in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= k:
            return f"{n / k:.3g} {unit}"
    return f"{n} B"
