"""The schedule of one trial (torch-free): when it started, when ``--budget`` ends, the seconds a
run takes, the runs still owed, whether they fit, and each run's timeout.

One object owns all of it, made by :func:`.trial.run_trials` when the trial starts (so the time
spent before, checking the command line, is not the trial's). Every question "is there room?" is
answered by one rule, :meth:`Budget.owed`: the runs still owed, name by name, each at that name's
own median run time. A name with no run yet is estimated at the baseline's (every candidate runs
the same script), and the baseline, before its second run, from its first run's script time plus
a start (:data:`START_S`): the trial's very first run also waited for the fork server to import
torch, so its process time says little of the runs after it.

The budget never writes into the trial's inputs: a run it ends raises :class:`BudgetSpent`, which
says during what; the trial carries that on its result.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable, Mapping

BASELINE = "baseline"

START_S = 0.5
"""Seconds a run spends starting and writing its receipt once the fork server is up (a generous
bound of what the trials' overhead benchmark measures: 0.09-0.45 s)."""

OUTPUT_RUNS = 3
"""The baseline's output runs: its check, the eager run and its second check (counted though it
runs only where a candidate's outputs differ from its first)."""


class BudgetSpent(Exception):
    """The trial's budget ended before or during a run (``during``: that run's folder): the trial
    stops there (what was measured is kept; the runs not finished are listed)."""

    def __init__(self, message: str, during: str) -> None:
        super().__init__(message)
        self.during = during


class Budget:
    """Start, deadline, measured run times, runs owed, what fits, and the per-run timeout.

    ``seconds``: ``--budget`` (None: no bound: everything fits, a run's timeout is ``--timeout``);
    ``timeout``: ``--timeout``; ``clock``: seconds (a fake one in tests)."""

    def __init__(self, seconds: float | None, timeout: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        self.timeout_s = timeout
        self.clock = clock
        self.start = clock()
        self.deadline = None if seconds is None else self.start + seconds
        self.run_s: list[float] = []
        """Every run's seconds, in order (the ETA)."""
        self.times: dict[str, list[float]] = {}
        """Each name's runs' seconds."""
        self._first: tuple[str, float | None] | None = None

    # --- what was measured ------------------------------------------------------------------------

    def record(self, key: str, seconds: float, script_s: float | None = None) -> None:
        """One run of ``key`` took ``seconds``; the trial's first run also gives its script's own
        time (``script_s``), what the runs after it are estimated from until there are others."""
        if self._first is None:
            self._first = (key, script_s)
        self.run_s.append(seconds)
        self.times.setdefault(key, []).append(seconds)

    def done(self, key: str) -> int:
        """Runs of ``key`` recorded."""
        return len(self.times.get(key, []))

    def elapsed(self) -> float:
        return self.clock() - self.start

    def left(self) -> float | None:
        """Seconds left (never below 0), None without a budget."""
        return None if self.seconds is None else max(0.0, self.seconds - self.elapsed())

    def spent(self) -> bool:
        return self.seconds is not None and self.elapsed() > self.seconds

    # --- the one rule -----------------------------------------------------------------------------

    def typical(self) -> float:
        """What a run takes: the median of every run after the first, else the first run's script
        time plus a start (never more than its process time)."""
        if len(self.run_s) > 1:
            return statistics.median(self.run_s[1:])
        first = self.run_s[0] if self.run_s else 0.0
        script_s = self._first[1] if self._first is not None else None
        return first if script_s is None else min(first, script_s + START_S)

    def per_run(self, key: str) -> float:
        """Seconds one run of ``key`` takes: the median of its own runs (the trial's first run left
        out), else the baseline's, else :meth:`typical`."""
        own = self.times.get(key, [])
        if self._first is not None and self._first[0] == key:
            own = own[1:]
        if own:
            return statistics.median(own)
        return self.per_run(BASELINE) if key != BASELINE else self.typical()

    def owed(self, runs: Mapping[str, int]) -> float:
        """Seconds of the runs ``{name: count}`` still owed, each at its name's :meth:`per_run`."""
        return sum(n * self.per_run(k) for k, n in runs.items() if n > 0)

    def fits(self, runs: Mapping[str, int]) -> bool:
        """Whether the runs owed end within the budget (always, without one)."""
        return self.seconds is None or self.elapsed() + self.owed(runs) <= self.seconds

    def missing(self, repeat: int, outputs: Mapping[str, int]) -> dict[str, int]:
        """Runs owed by each name of ``outputs``: its repetitions not yet run (of ``repeat``) and
        its output runs."""
        return {k: max(0, repeat - self.done(k)) + n for k, n in outputs.items()}

    def admitting(self, name: str, repeat: int, started: Iterable[str]) -> dict[str, int]:
        """Runs owed if candidate ``name`` starts now: the baseline's missing repetitions and its
        :data:`OUTPUT_RUNS`, each started candidate's missing repetitions and output run, and the
        new one's repetitions and output run."""
        owed = self.missing(repeat, {BASELINE: OUTPUT_RUNS, **{k: 1 for k in started if k not in (BASELINE, name)}})
        owed[name] = repeat + 1
        return owed

    def shortfall(self, runs: Mapping[str, int]) -> tuple[float, float]:
        """(seconds the runs need, seconds left): why they did not fit."""
        return self.owed(runs), self.left() or 0.0

    # --- one run's timeout ------------------------------------------------------------------------

    def timeout(self, during: str) -> tuple[float | None, bool]:
        """The run's timeout: ``--timeout``, or the budget left when that is shorter (then True).
        Raises :class:`BudgetSpent` when the budget has ended already."""
        if self.deadline is None:
            return self.timeout_s, False
        left = self.deadline - self.clock()
        if left <= 0:
            raise BudgetSpent(f"the budget ended before {during}", during)
        if self.timeout_s is None or left < self.timeout_s:
            return left, True
        return self.timeout_s, False
