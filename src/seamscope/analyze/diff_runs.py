"""Timing verdicts over several runs a side: ``seamscope diff A1 A2 A3 -- B1 B2 B3``.

One run a side has no variation to judge (fresh processes of the same sub-millisecond call differ
by 15–60% on a quiet machine), so its timing rows say ``one run each: not a verdict`` and no
break-even is drawn. With two or more runs a side each figure is judged by the test ``seamscope
try`` states for its candidates (Welch's t interval on the logarithms, :mod:`..experiments.trials.stats`):
``faster``, ``slower``, ``no measurable change`` or ``noisy``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..experiments.trials import stats
from ..model.diff import TimingVerdict
from ..model.receipt import Receipt

ONE_RUN = "one run each: not a verdict"


def total_wall(r: Receipt) -> int | None:
    return sum(p.wall_ns for p in r.summary.phases) if r.summary.has_runtime else None


def steady_median(r: Receipt) -> int | None:
    """The steady calls' median (None without steady calls)."""
    return next((p.median_ns for p in r.summary.phases if p.phase == "steady" and p.calls), None)


def _compile(r: Receipt) -> int | None:
    return r.summary.compile_ns if r.ledger.compilations else None


FIGURES: tuple[tuple[str, Callable[[Receipt], int | None]], ...] = (
    ("total", total_wall),
    ("steady median", steady_median),
    ("compile time", _compile),
)
"""The figures judged: the run's total wall time over its calls, the steady calls' median, the
compile time."""


def timing_verdicts(befores: Sequence[Receipt], afters: Sequence[Receipt]) -> list[TimingVerdict]:
    """Each figure of :data:`FIGURES`, judged over the runs of each side."""
    out = []
    for name, figure in FIGURES:
        vb = [v for v in map(figure, befores) if v is not None]
        va = [v for v in map(figure, afters) if v is not None]
        if not vb or not va:
            out.append(TimingVerdict(figure=name, verdict="not recorded", ratio=None, low=None, high=None,
                                     runs_before=len(vb), runs_after=len(va)))
            continue
        iv = stats.interval([float(v) for v in va], [float(v) for v in vb])
        if iv is None:
            ratio = (va[0] / vb[0]) if vb[0] else None
            out.append(TimingVerdict(figure=name, verdict=ONE_RUN, ratio=ratio, low=None, high=None,
                                     runs_before=len(vb), runs_after=len(va)))
            continue
        out.append(TimingVerdict(figure=name, verdict=stats.decide(iv), ratio=iv.ratio, low=iv.low, high=iv.high,
                                 runs_before=len(vb), runs_after=len(va)))
    return out


def verdict_text(t: TimingVerdict) -> str:
    """``steady median: faster, 0.812× (97.5% interval 0.750–0.880, 3 vs 3 runs)``; a single run
    a side gives its ratio as what it is, not a verdict."""
    if t.ratio is None:
        return f"{t.figure}: {t.verdict}"
    if t.low is None or t.high is None:
        return f"{t.figure}: ×{t.ratio:.3f} ({t.verdict})"
    return (f"{t.figure}: {t.verdict}, ×{t.ratio:.3f} ({stats.LEVEL:.1%} interval {t.low:.3f}–{t.high:.3f}, "
            f"{t.runs_after} vs {t.runs_before} runs)")


def judged(timing: Sequence[TimingVerdict], figure: str) -> str | None:
    """The verdict of ``figure`` when the runs decide it (``faster``/``slower``), else None."""
    t = next((t for t in timing if t.figure == figure), None)
    return t.verdict if t is not None and t.verdict in ("faster", "slower") else None
