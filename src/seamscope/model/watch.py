"""What watch mode reports after warm-up: one event per recompile, fallback, new graph and new
break site (``capture/watch.py`` makes them; ``docs/watch.md``)."""

from __future__ import annotations

import re
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Literal

from msgspec import Struct

EventKind = Literal["recompile", "fallback", "graph", "break"]
STEADY_BUCKETS_S: tuple[float, ...] = (
    5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
COMPILE_BUCKETS_S: tuple[float, ...] = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
PHASES: tuple[str, ...] = ("cold", "steady", "fallback")
"""The phases a call is counted in (``seamscope_calls_total{phase}``)."""
RECOMPILE_CAUSES: tuple[str, ...] = ("size", "value", "type", "flag", "dtype_device", "other")
"""A recompile's cause families (``analyze.causes``); with ``recompile_limit`` for an attempt
that hit the limit with no guard recorded."""
FALLBACK_CAUSES: tuple[str, ...] = ("recompile_limit", "failed", "skipped")
"""What a compilation that produced no code ended in."""


class WatchEvent(Struct, frozen=True, kw_only=True):
    """One thing that compiled (or broke, or fell back) after warm-up."""

    kind: EventKind
    """``recompile``: a frame compiled again (a guard failed); ``fallback``: a compilation that
    did not produce code (the recompile limit, a failure: the frame runs eagerly); ``graph``: a
    frame compiled for the first time after warm-up; ``break``: a break site not seen before."""
    frame: str
    """The frame as reports name it: ``forward (server.py:12)``."""
    qualname: str = ""
    """The frame as the metrics' ``frame`` label names it: its module and qualified name
    (``server.Net.forward``), the same when lines move."""
    file: str
    line: int
    cause: str
    """A bounded word: a recompile's cause family (``size``, ``value``, ``flag``,
    ``dtype_device``, ``recompile_limit``, ``other``), a fallback's status, a break's ``gb_type``."""
    detail: str
    """The cause in the user's words (``x dim 0: 4 → 8``), or the break's reason."""
    failed_guard: str | None = None
    compile_id: str | None = None
    site_id: str | None = None
    call_index: int | None = None
    """The call it happened in (0-based, counting every observed call of the process)."""
    unix_time: float = 0.0
    since_start_s: float = 0.0
    """Seconds since watching began, when the event was reported: once its compilation ended (the
    timeline of ``summary`` and ``report`` shows when the compilation began, ``compile_ns`` earlier)."""
    compile_ns: int | None = None
    """What the compilation cost (None for a break site: its compilation is its own event)."""
    context: dict[str, str] = {}
    """The request's tags (``seamscope.watch.tag(request_id=...)``) when it happened."""
    pid: int = 0

    def line_text(self) -> str:
        """One log line (user strings are data: the caller escapes them where it renders)."""
        at = f" in call {self.call_index}" if self.call_index is not None else ""
        cost = f", compile {self.compile_ns / 1e6:.1f} ms" if self.compile_ns is not None else ""
        ctx = "".join(f" {k}={v}" for k, v in sorted(self.context.items()))
        return f"{self.kind} after warm-up{at}: {self.frame}: {self.cause}: {self.detail}{cost}{ctx}"


@dataclass(frozen=True)
class Histogram:
    """Non-cumulative bucket counts (a value v goes to the first bound >= v; the last count is
    above every bound), and the sum of the values."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    total: float = 0.0

    @staticmethod
    def bucket(bounds: tuple[float, ...], value: float) -> int:
        return bisect_left(bounds, value)


@dataclass(frozen=True)
class Snapshot:
    """Cumulative counts since watching began, as the metrics sinks read them."""

    calls: dict[str, int]
    compiles: dict[tuple[str, str], int]
    """(frame, stage) → compilations that produced code."""
    recompiles: dict[tuple[str, str, str], int]
    """(frame, cause, stage)."""
    fallbacks: dict[tuple[str, str, str], int]
    break_crossings: dict[tuple[str, str], int]
    """(frame, cause = the break's gb_type)."""
    watch_events: dict[tuple[str, str, str], int]
    """(kind, frame, cause): events after warm-up."""
    graphs: int
    steady: Histogram
    compile: Histogram
    warmed_up: bool
    frames: dict[str, tuple[str, int]] = field(default_factory=dict)
    """Each ``frame`` label → the file and line it was first compiled at (the labels stay the same
    when a library's lines move; this says where the frame is now)."""


_POLICY = re.compile(r"watch: warm-up = the first (?:(\d+) calls|(\d+(?:\.\d+)?) s)")


def warmup_policy(calls: int | None, seconds: float | None) -> str:
    """The words a watched run's decision record says its warm-up in (``Decision.warmup_policy``)."""
    return (
        f"watch: warm-up = the first {calls} calls" if seconds is None else f"watch: warm-up = the first {seconds:g} s"
    )


def parse_warmup_policy(text: str) -> tuple[int | None, float | None] | None:
    """(calls, seconds) of a watched run's warm-up, from its decision record; None: not watched."""
    m = _POLICY.search(text or "")
    if m is None:
        return None
    return (int(m.group(1)), None) if m.group(1) is not None else (None, float(m.group(2)))
