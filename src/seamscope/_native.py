"""The optional C hot path (``seamscope._speedups``), or None where it cannot be used.

Capture's region timer and the builder's steady-call sums have pure-Python equivalents that give
the same figures (tests/test_native.py checks both against each other); C only makes them cheaper.
The C code reads ``CLOCK_MONOTONIC``, so it is used only where ``time.perf_counter_ns`` reads the
same clock (Linux). ``SEAMSCOPE_PURE_PYTHON=1`` turns it off, to compare or to rule it out.
"""

from __future__ import annotations

import os
import platform
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


def _ticks(native: ModuleType | None) -> str | None:
    """The time stamp counter, where the kernel keeps CLOCK_MONOTONIC on it (so it is stable and
    the same on every core): C then reads it inside a call, and clock_gettime only at the call's
    two ends, onto whose timeline it maps every tick. ``SEAMSCOPE_NO_TSC=1`` turns it off."""
    if native is None or os.environ.get("SEAMSCOPE_NO_TSC", "") not in ("", "0"):
        return None
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    try:
        with open("/sys/devices/system/clocksource/clocksource0/current_clocksource") as f:
            source = f.read().strip()
    except OSError:
        return None
    if source != "tsc":
        return None
    return "tsc" if native.set_ticks(True) else None


TICKS: str | None = _ticks(NATIVE)
"""What C reads inside a call: "tsc", or None (clock_gettime throughout)."""
