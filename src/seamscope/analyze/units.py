"""One way to write a duration for people (terminal, findings, reports agree to the digit)."""

from __future__ import annotations


def fmt_ns(ns: int | None) -> str:
    """Three significant digits in the largest unit that keeps the number at or above 1."""
    if ns is None:
        return "–"
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:.3g} s"
    if ns >= 1_000_000:
        return f"{ns / 1e6:.3g} ms"
    if ns >= 1_000:
        return f"{ns / 1e3:.3g} µs"
    return f"{ns} ns"
