"""The one duration format: integer and fractional nanoseconds, and a missing figure."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from seamscope.analyze.units import fmt_ns


def test_each_unit() -> None:
    assert fmt_ns(0) == "0 ns"
    assert fmt_ns(999) == "999 ns"
    assert fmt_ns(1_000) == "1 µs"
    assert fmt_ns(12_345) == "12.3 µs"
    assert fmt_ns(1_234_567) == "1.23 ms"
    assert fmt_ns(2_500_000_000) == "2.5 s"


def test_missing() -> None:
    assert fmt_ns(None) == "–"
    assert fmt_ns(None, missing="n/a") == "n/a"


def test_fractional_nanoseconds_round_to_whole() -> None:
    assert fmt_ns(512.4) == "512 ns"
    assert fmt_ns(512.6) == "513 ns"
    assert fmt_ns(1234.5) == "1.23 µs"


@given(st.integers(0, 10**13))
def test_a_whole_float_reads_like_the_int(n: int) -> None:
    assert fmt_ns(float(n)) == fmt_ns(n)
