"""Whether the machine was busy while a trial timed its runs: measured, never guessed from noise.

Runs vary between fresh processes on an idle machine too (a sub-millisecond call by 15–60%), so
variation alone says nothing about load. The trial says "the machine is busy" only from what it
measured: the load average when each timed run ended (more runnable tasks than CPUs, the run
itself counted once), or the run being preempted (involuntary context switches of its own process,
from ``getrusage``) more than :data:`PREEMPT_PER_S` times a second.
"""

from __future__ import annotations

import os
import statistics

from ...model.trials import RunFigures

PREEMPT_PER_S = 50.0
"""Involuntary context switches a second that mean another task kept taking the run's CPU
(an idle machine gives a few: the run's own threads yielding to the kernel's)."""


def load_average() -> float | None:
    """The 1-minute load average (None where ``/proc/loadavg`` cannot be read)."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def busy(runs: list[RunFigures]) -> str | None:
    """What shows the machine was busy during these timed runs, or None when nothing measured does."""
    ok = [r for r in runs if r.ok]
    loads = [(r.load_avg, r.cpus) for r in ok if r.load_avg is not None and r.cpus]
    if loads:
        load = statistics.median(x for x, _ in loads)
        n = loads[0][1] or 1
        if load - 1.0 >= 0.5 * n:
            return f"load average {load:.1f} on {n} CPU(s) during the timed runs"
    rates = [r.preempted / (r.process_ns / 1e9) for r in ok if r.preempted is not None and r.process_ns > 0]
    if rates and statistics.median(rates) > PREEMPT_PER_S:
        return f"the runs were preempted {statistics.median(rates):.0f} times a second"
    cpu = [r.cpu_ns / r.script_ns for r in ok if r.cpu_ns is not None and r.script_ns]
    if loads and cpu and statistics.median(cpu) < 0.5 and statistics.median(x for x, _ in loads) >= 1.5:
        return f"the runs got {statistics.median(cpu):.0%} of a CPU while running (load average above 1.5)"
    return None


def measured(runs: list[RunFigures]) -> str:
    """What was measured of the load, when it was not busy: ``load average 1.0 on 16 CPU(s)``."""
    loads = [(r.load_avg, r.cpus) for r in runs if r.ok and r.load_avg is not None and r.cpus]
    if not loads:
        return "no load measured"
    return f"load average {statistics.median(x for x, _ in loads):.1f} on {loads[0][1]} CPU(s)"
