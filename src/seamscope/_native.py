"""The optional C hot path (``seamscope._speedups``), or None where it cannot be used.

Capture's region timer and the builder's steady-call sums have pure-Python equivalents that give
the same figures (tests/test_native.py checks both against each other); C only makes them cheaper.
The C code reads ``CLOCK_MONOTONIC``, so it is used only where ``time.perf_counter_ns`` reads the
same clock (Linux). ``SEAMSCOPE_PURE_PYTHON=1`` turns it off, to compare or to rule it out.
"""

from __future__ import annotations

import os
import time
from types import ModuleType

WHY_NOT: str | None = None
"""Why the C hot path is not used (None when it is)."""


def _load() -> ModuleType | None:
    global WHY_NOT
    if os.environ.get("SEAMSCOPE_PURE_PYTHON", "") not in ("", "0"):
        WHY_NOT = "SEAMSCOPE_PURE_PYTHON is set"
        return None
    try:
        from . import _speedups
    except ImportError as e:
        WHY_NOT = f"seamscope._speedups was not built ({e})"
        return None
    clock = time.get_clock_info("perf_counter").implementation
    if clock != "clock_gettime(CLOCK_MONOTONIC)":
        WHY_NOT = f"perf_counter reads {clock}, not the C timers' clock_gettime(CLOCK_MONOTONIC)"
        return None
    return _speedups


NATIVE: ModuleType | None = _load()
