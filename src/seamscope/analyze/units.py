"""One way to write a duration, a count and a percentage for people (terminal, findings, reports
agree to the digit), and to read a duration a user typed (``90s``, ``10m``)."""

from __future__ import annotations

import re

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*")
SECONDS_PER_UNIT = {"s": 1, "m": 60, "h": 3600}


def fmt_ns(ns: float | None, missing: str = "–") -> str:
    """Three significant digits in the largest unit that keeps the number at or above 1 (a
    fractional figure under 1 µs to the nearest ns); ``missing`` for None. Every part that writes
    a duration for people uses this one."""
    if ns is None:
        return missing
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:.3g} s"
    if ns >= 1_000_000:
        return f"{ns / 1e6:.3g} ms"
    if ns >= 1_000:
        return f"{ns / 1e3:.3g} µs"
    return f"{round(ns)} ns"


def parse_duration(text: str, unit_required: bool = False) -> float | None:
    """A duration a user typed, in seconds: ``90``, ``90s``, ``2.5m``, ``1h`` (a bare number is
    seconds unless ``unit_required``); None when the text is no such duration."""
    m = _DURATION.fullmatch(text)
    if m is None or (unit_required and not m.group(2)):
        return None
    return float(m.group(1)) * SECONDS_PER_UNIT[m.group(2) or "s"]


def fmt_bytes(n: int) -> str:
    """Three significant digits in the largest binary unit at or above 1: ``1.5 MB``, ``512 B``."""
    for unit, k in (("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= k:
            return f"{n / k:.3g} {unit}"
    return f"{n} B"


def percent(part: float, whole: float) -> float | None:
    """``part`` as a percentage of ``whole``; None when there is no whole (0 or less)."""
    return 100.0 * part / whole if whole > 0 else None


def percent_change(before: float | None, after: float | None) -> float | None:
    """How far ``after`` is from ``before``, in percent of ``before`` (-25.0 from 200 to 150); None
    when either is missing or ``before`` is 0."""
    if before is None or after is None or before == 0:
        return None
    return (after - before) * 100.0 / before


def fmt_pct(x: float | None, missing: str = "–") -> str:
    """A share of a whole (:func:`percent`): two significant digits under 10% (``0.52%``, ``3.1%``),
    whole percents from there (``42%``); ``missing`` for None."""
    if x is None:
        return missing
    return f"{x:.2g}%" if x < 10 else f"{x:.0f}%"


def fmt_change(x: float | None, digits: int = 1, missing: str = "–") -> str:
    """A change (:func:`percent_change`) with its sign, ``digits`` after the point: ``+12.4%``,
    ``−3.0%`` (a minus sign, not a hyphen), ``±0.0%``; ``missing`` for None."""
    if x is None:
        return missing
    return f"{'+' if x > 0 else ('−' if x < 0 else '±')}{abs(x):.{digits}f}%"


def noun(n: int, singular: str, plural: str | None = None) -> str:
    """The noun for a count of ``n``: ``call`` for 1, ``calls`` for 0 and 2 (``plural`` when the
    plural is not ``singular + "s"``)."""
    return singular if n == 1 else (plural if plural is not None else singular + "s")


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """``1 call``, ``0 calls``, ``2 break sites``: one way to write a count in every renderer."""
    return f"{n} {noun(n, singular, plural)}"


def number_ranges(numbers: list[int]) -> str:
    """``[1, 2, 3, 5, 7, 8, 9]`` → ``1–3, 5, 7–9``: a list of call indices people can read at any
    length (three or more consecutive numbers as a range; order kept, runs only ascending)."""
    parts: list[str] = []
    i = 0
    while i < len(numbers):
        j = i
        while j + 1 < len(numbers) and numbers[j + 1] == numbers[j] + 1:
            j += 1
        if j - i >= 2:
            parts.append(f"{numbers[i]}–{numbers[j]}")
        else:
            parts.extend(str(n) for n in numbers[i : j + 1])
        i = j + 1
    return ", ".join(parts)


def fmt_variation(spread: float, digits: int = 0) -> str:
    """How much a figure varied (``spread``: max − min over the smaller): ``12%`` below twice,
    else as the ratio of the two, ``38.9×`` (never ``3786%``)."""
    if spread < 1.0:
        return f"{spread:.{digits}%}"
    return f"{1.0 + spread:.3g}×"
