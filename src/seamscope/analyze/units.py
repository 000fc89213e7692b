"""One way to write a duration for people (terminal, findings, reports agree to the digit)."""

from __future__ import annotations


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
