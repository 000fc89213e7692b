"""Which calls are ``fallback`` calls, on hand-fed events (no torch).

GIVEN a builder fed as capture feeds it around a recompile limit or a failed compilation, WHEN
the ledger is built, THEN each call's phase is what the conventions say: ``cold`` when something
compiled code in it, ``fallback`` when it fell back or ran a fallen frame eagerly (a frame whose
compiled graphs it did not run), ``steady`` otherwise, and the phase totals count them so.
"""

from __future__ import annotations

import pytest
from fakes import comp

from seamscope.model.builder import LedgerBuilder
from seamscope.model.fake import FakeClock, fake_environment
from seamscope.model.ledger import Ledger, RunInfo
from seamscope.model.selfcheck import self_check


def _builder() -> LedgerBuilder:
    return LedgerBuilder(RunInfo(source="fake"), fake_environment(), clock=FakeClock(0))


def _compile(b: LedgerBuilder, t: int, cid: str, **kw: object) -> None:
    """A compilation of ``cid`` at ``t`` (10 ns) inside the open call, as capture reports one."""
    b.set_compilation(comp(cid, ns=10, **kw))  # type: ignore[arg-type]
    b.compile_span(cid, t, t + 10)


def _regions(b: LedgerBuilder, t: int, *cids: str) -> None:
    for i, cid in enumerate(cids):
        b.region(cid, 0, t + 20 + 10 * i, t + 25 + 10 * i)


def _phases(led: Ledger) -> tuple[list[str], dict[str, int]]:
    self_check(led)
    return [c.phase for c in led.calls], {p.phase: p.calls for p in led.totals.phases if p.calls}


@pytest.mark.parametrize("status", ["failed", "skipped"])
def test_a_fallback_for_a_compilation_that_failed_leaves_its_frame_compiled(status):
    """A compile error (or a skipped frame) ends one attempt in eager execution; the frame keeps
    its compiled graphs for later inputs, so a later call that does not enter it is steady."""
    b = _builder()
    b.begin_call(0)
    _compile(b, 0, "0/0")
    _compile(b, 10, "1/0")
    _regions(b, 0, "0/0", "1/0")
    b.end_call(100)
    b.begin_call(1000)
    _compile(b, 1000, "1/1", status=status, graphs=0, reason="compile error")
    b.fallback("1/1", "compile error", 1010)
    _regions(b, 1000, "0/0")
    b.end_call(1100)
    b.begin_call(2000)  # frame 1 not entered: nothing ran eagerly for want of a graph
    _regions(b, 2000, "0/0")
    b.end_call(2100)
    led = b.build()
    assert _phases(led) == (["cold", "fallback", "steady"], {"cold": 1, "fallback": 1, "steady": 1})
    assert [c.outcome for c in led.calls] == ["compile", "fallback", "hit"]


def test_a_frame_recorded_as_fallen_runs_eagerly_in_calls_that_skip_its_graphs():
    """After the recompile limit a frame runs its cached graphs or runs eagerly, silently: a
    call that ran none of a fallen frame's graphs (one that has graphs) ran it eagerly. A frame
    counts as fallen when one of its compilations is recorded as a fallback, even when no
    fallback event named it (here the only event names another frame's failed compilation)."""
    b = _builder()
    b.begin_call(0)
    _compile(b, 0, "0/0")
    _compile(b, 10, "2/0")
    _compile(b, 20, "3/0", graphs=0)  # a frame compiled to no graph: nothing of it ever runs
    _regions(b, 30, "0/0", "2/0")
    b.end_call(100)
    b.begin_call(1000)  # frames 2 and 3 hit the recompile limit; frame 0's recompile fails
    _compile(b, 1000, "2/1", status="fallback", graphs=0)
    _compile(b, 1010, "3/1", status="fallback", graphs=0)
    _compile(b, 1020, "0/1", status="failed", graphs=0)
    b.fallback("0/1", "compile error", 1030)
    _regions(b, 1030, "0/0")
    b.end_call(1100)
    b.begin_call(2000)  # frame 2's graph did not run: it ran eagerly
    _regions(b, 2000, "0/0")
    b.end_call(2100)
    b.begin_call(3000)  # frame 2 hit a cached variant; frame 0 (not fallen) was not entered
    _regions(b, 3000, "2/0")
    b.end_call(3100)
    b.begin_call(4000)
    _regions(b, 4000, "0/0", "2/0")
    b.end_call(4100)
    led = b.build()
    assert _phases(led) == (["cold", "fallback", "fallback", "steady", "steady"],
                            {"cold": 1, "fallback": 2, "steady": 2})
    assert [c.outcome for c in led.calls] == ["compile", "fallback", "hit", "hit", "hit"]


def test_a_fallback_event_marks_its_frame_fallen_whatever_its_number():
    """The frame of a recompile-limit fallback (frame 2, attempt 1) is the one whose graphs a
    later call must run to be steady."""
    b = _builder()
    b.begin_call(0)
    _compile(b, 0, "1/0")
    _compile(b, 10, "2/0")
    _regions(b, 20, "1/0", "2/0")
    b.end_call(100)
    b.begin_call(1000)
    b.fallback("2/1", "recompile limit", 1000)  # no compilation record for it (yet)
    _regions(b, 1000, "1/0")
    b.end_call(1100)
    b.begin_call(2000)
    _regions(b, 2000, "1/0")
    b.end_call(2100)
    b.begin_call(3000)
    _regions(b, 3000, "1/0", "2/0")
    b.end_call(3100)
    led = b.build()
    assert _phases(led) == (["cold", "fallback", "fallback", "steady"], {"cold": 1, "fallback": 2, "steady": 1})


def test_a_call_is_cold_when_code_compiled_in_it_though_another_frame_fell_back():
    """A call whose only compilation is a recompile-limit attempt compiled nothing: ``fallback``
    (with a region of another frame run in it). One where a frame compiled code while another
    hit the limit is ``cold``: its time is compile time, as any first call's."""
    b = _builder()
    b.begin_call(0)
    _compile(b, 0, "0/0")
    _compile(b, 10, "1/0")
    _regions(b, 20, "0/0", "1/0")
    b.end_call(100)
    b.begin_call(1000)
    _compile(b, 1000, "1/1", status="fallback", graphs=0, reason="recompile limit")
    b.fallback("1/1", "recompile limit", 1010)
    _regions(b, 1000, "0/0", "1/0")
    b.end_call(1100)
    b.begin_call(2000)
    _compile(b, 2000, "2/0")  # a new frame compiles
    b.fallback("1/2", "recompile limit", 2010)
    _regions(b, 2000, "0/0", "1/0", "2/0")
    b.end_call(2100)
    led = b.build()
    assert _phases(led) == (["cold", "fallback", "cold"], {"cold": 2, "fallback": 1})
    cold = next(p for p in led.totals.phases if p.phase == "cold")
    assert cold.compile_ns == 30  # 0/0, 1/0 and 2/0; the fallen attempt's 10 ns are the fallback call's
    assert [c.outcome for c in led.calls] == ["compile", "fallback", "fallback"]
