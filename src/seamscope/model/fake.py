"""A fake clock and a fake event source, so the accounting is tested without torch
(after pyinstrument's ``fake_time_util``).

``FakeProgram`` describes a compiled program as frames with regions and breaks; ``play`` drives a
:class:`LedgerBuilder` exactly as live capture does, advancing a fake clock by the durations given.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field

from .builder import LedgerBuilder
from .ledger import BreakSite, Call, Compilation, Environment, Frame, RunInfo


class FakeClock:
    """Monotonic nanoseconds that move only when told to."""

    def __init__(self, start: int = 1_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now

    def advance(self, ns: int) -> int:
        self.now += max(0, ns)
        return self.now


@dataclass(frozen=True)
class FakeStep:
    """One thing a call does: run a region, sit in an island, compile, or pay overhead."""

    kind: str  # "region" | "island" | "compile" | "overhead" | "fallback"
    ns: int
    compile_id: str = "0/0"
    after_ns: int = 0
    """For a region: seamscope's bookkeeping right after it (capture's ``region_run``)."""


@dataclass
class FakeCall:
    steps: list[FakeStep]
    family: str | None = None
    error: str | None = None


@dataclass
class FakeProgram:
    """Compilations with optional breaks; calls made of steps."""

    breaks: dict[str, str] = field(default_factory=dict)
    """compile id → site name whose break ends that compile's graph."""
    resumes: dict[str, str] = field(default_factory=dict)
    """compile id → site name that compile's frame resumes after (a resume function)."""
    calls: list[FakeCall] = field(default_factory=list)


def fake_site(name: str) -> BreakSite:
    sid = "B" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return BreakSite(
        site_id=sid,
        file="model.py",
        line=10 + len(name),
        function="forward",
        gb_code="GB0059",
        gb_type="Failed to trace builtin operator",
        reason=f"fake break {name}",
        user_stack=[Frame(file="model.py", line=10 + len(name), function="forward")],
        compile_ids=[],
    )


def fake_environment() -> Environment:
    return Environment(seamscope_version="test", python_version="3", torch_version=None)


def play(
    program: FakeProgram,
    *,
    clock: FakeClock | None = None,
    first_calls: int = 256,
    call_cap: int = 1024,
    observe: Callable[[Call], None] | None = None,
    build_every: int = 0,
) -> LedgerBuilder:
    """``observe``: watch every call (as a compile budget does); ``build_every``: also build
    after every that many calls (as an interrupted or watched run does)."""
    clock = clock or FakeClock()
    b = LedgerBuilder(
        RunInfo(source="fake", command=["fake"]),
        fake_environment(),
        clock=clock,
        first_calls=first_calls,
        call_cap=call_cap,
    )
    if observe is not None:
        b.watch_calls(observe)
    sites = {name: fake_site(name) for name in set(program.breaks.values()) | set(program.resumes.values())}
    for s in sites.values():
        b.set_break_site(s)
    seen: set[str] = set()
    for call in program.calls:
        b.begin_call(clock(), call.family)
        for st in call.steps:
            t0 = clock()
            t1 = clock.advance(st.ns)
            if st.kind == "region" and st.after_ns:
                b.region_run(st.compile_id, 0, t0, t1, clock.advance(st.after_ns), None, None)
            elif st.kind == "region":
                b.region(st.compile_id, 0, t0, t1)
            elif st.kind == "compile":
                site = program.breaks.get(st.compile_id)
                resume = program.resumes.get(st.compile_id)
                b.set_compilation(
                    Compilation(
                        compile_id=st.compile_id,
                        frame_name="forward",
                        file="model.py",
                        line=1,
                        status="ok",
                        start_ns=t0 - b.origin,
                        duration_ns=st.ns,
                        graph_count=1,
                        own_break_site_id=sites[site].site_id if site else None,
                        own_break_depth=0,
                        resume_site_id=sites[resume].site_id if resume else None,
                        resume_depth=0 if resume else None,
                        break_site_ids=[sites[site].site_id] if site else [],
                    )
                )
                b.compile_span(st.compile_id, t0, t1)
                if st.compile_id in seen or not st.compile_id.endswith("/0"):
                    b.guard_miss(st.compile_id, t0)
                seen.add(st.compile_id)
            elif st.kind == "overhead":
                b.overhead(t0, t1)
            elif st.kind == "fallback":
                b.fallback(st.compile_id, "recompile limit", t0)
        b.end_call(clock(), call.error)
        if build_every and b.call_count % build_every == 0:
            b.build()
    return b
