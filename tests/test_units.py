"""The one duration format: integer and fractional nanoseconds, and a missing figure; the one way to write
a share and a change in percent."""

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


def test_one_way_to_write_a_share_and_a_change() -> None:
    from seamscope.analyze.units import fmt_change, fmt_pct, percent, percent_change

    assert (percent(1, 4), percent(3, 0), percent_change(200, 150), percent_change(0, 5)) == (25.0, None, -25.0, None)
    assert [fmt_pct(x) for x in (0.523, 3.14, 42.4, None)] == ["0.52%", "3.1%", "42%", "–"]
    assert [fmt_change(x) for x in (12.44, -3.0, 0.0, None)] == ["+12.4%", "−3.0%", "±0.0%", "–"]
    assert (fmt_change(-12.6, 0, "n/a"), fmt_change(None, 0, "n/a")) == ("−13%", "n/a")


def test_one_way_to_read_a_duration() -> None:
    from seamscope.analyze.units import parse_duration

    assert [parse_duration(t) for t in ("90", "90s", " 2.5m ", "1h", "10 m")] == [90, 90, 150, 3600, 600]
    assert [parse_duration(t) for t in ("", "s", "-1s", "1d", "1.s", "ten")] == [None] * 6
    assert (parse_duration("30", unit_required=True), parse_duration("30s", unit_required=True)) == (None, 30)
