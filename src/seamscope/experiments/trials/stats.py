"""The statistical test behind a trial's timing verdicts (torch-free, standard library only).

A candidate's figure (total time, compile time, the typical paired steady call) is one number per
repetition, each repetition a fresh process. The test is **Welch's t interval on the logarithms**:
the ratio candidate / baseline of the two sides' geometric means, with a two-sided
:data:`LEVEL` confidence interval. Logarithms, because timing noise is multiplicative (a run twice
as slow is as likely on a long run as on a short one); Welch, because the two sides need not vary
alike (a remedy that removes recompiles also removes their variation); unpaired, because the
repetitions are interleaved (baseline, A, B, baseline, ...), so drift on the machine reaches both
sides alike, and pairing by repetition would halve the degrees of freedom of two or three
repetitions.

The verdict from the interval, with :data:`MIN_EFFECT` the smallest change worth a verdict:

- ``faster``: the interval lies below 1 − MIN_EFFECT; ``slower``: above 1 + MIN_EFFECT;
- ``no measurable change``: neither, and the interval lies within 1 ± :data:`RESOLUTION` (the
  trial rules out a change that large);
- ``noisy``: the interval reaches beyond 1 ± RESOLUTION: the runs varied too much to tell.

The level is 97.5% rather than 95% because a candidate is looked at again after each added
repetition (see :func:`undecided`): on simulated trials (``tests/test_trials_stats.py``) this keeps
a false ``faster``/``slower`` of a candidate identical to the baseline under 5% over up to six
repetitions at every noise level tried.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

LEVEL = 0.975
"""Two-sided confidence of the interval."""
MIN_EFFECT = 0.03
"""A change within 3% of 1 is no measurable change, however quiet the machine."""
RESOLUTION = 0.25
"""An interval reaching beyond 1 ± 25% cannot tell a change from noise: ``noisy``."""


@dataclass(frozen=True)
class Interval:
    """Candidate / baseline of the geometric means, with its confidence interval."""

    ratio: float
    low: float
    high: float
    n: int
    """Repetitions of the candidate."""
    n_base: int
    df: float

    def text(self) -> str:
        interval = f"{LEVEL:.1%} interval {self.low:.3f}–{self.high:.3f}"
        return f"{self.ratio:.3f}× ({interval}, {self.n} vs {self.n_base} runs)"


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-12:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T ≤ t) for Student's t with ``df`` (real, > 0) degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def _t_pdf(t: float, df: float) -> float:
    return math.exp(math.lgamma((df + 1.0) / 2.0) - math.lgamma(df / 2.0) - 0.5 * math.log(df * math.pi)
                    - (df + 1.0) / 2.0 * math.log1p(t * t / df))


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t: Newton's method on :func:`t_cdf`, kept inside a
    bracket that bisection narrows whenever a step would leave it."""
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        lo, hi = hi, hi * 2.0
    t = (lo + hi) / 2.0
    for _ in range(60):
        f = t_cdf(t, df) - p
        if abs(f) < 1e-13:
            break
        lo, hi = (t, hi) if f < 0 else (lo, t)
        step = t - f / _t_pdf(t, df)
        t = step if lo < step < hi else (lo + hi) / 2.0
    return t


def interval(cand: list[float], base: list[float], level: float = LEVEL) -> Interval | None:
    """Welch's t interval of log(cand) − log(base), as a ratio; None with fewer than two positive
    figures on a side (one repetition has no variation to measure)."""
    c = [math.log(x) for x in cand if x > 0]
    b = [math.log(x) for x in base if x > 0]
    if len(c) < 2 or len(b) < 2:
        return None
    mc, mb = statistics.fmean(c), statistics.fmean(b)
    diff = mc - mb
    vc = sum((x - mc) ** 2 for x in c) / (len(c) - 1) / len(c)
    vb = sum((x - mb) ** 2 for x in b) / (len(b) - 1) / len(b)
    se2 = vc + vb
    if se2 <= 0.0:
        return Interval(ratio=math.exp(diff), low=math.exp(diff), high=math.exp(diff), n=len(c), n_base=len(b),
                        df=float(len(c) + len(b) - 2))
    df = se2 * se2 / ((vc * vc / (len(c) - 1)) + (vb * vb / (len(b) - 1)))
    half = t_quantile(1.0 - (1.0 - level) / 2.0, max(df, 1.0)) * math.sqrt(se2)
    return Interval(ratio=math.exp(diff), low=math.exp(diff - half), high=math.exp(diff + half), n=len(c),
                    n_base=len(b), df=df)


def decide(iv: Interval) -> str:
    """``faster`` / ``slower`` / ``no measurable change`` / ``noisy`` (see the module's text)."""
    if iv.high < 1.0 - MIN_EFFECT:
        return "faster"
    if iv.low > 1.0 + MIN_EFFECT:
        return "slower"
    if iv.low >= 1.0 - RESOLUTION and iv.high <= 1.0 + RESOLUTION:
        return "no measurable change"
    return "noisy"


def undecided(iv: Interval | None, verdict: str) -> bool:
    """Whether more repetitions could change what the trial recommends or says: ``noisy`` with room
    below 1 − MIN_EFFECT (it could still be faster), or whose estimate is a slowdown of half the
    :data:`RESOLUTION` or more (the next runs usually confirm it: the user is told ``slower``, not
    ``noisy``; on simulated trials this keeps a false verdict of an A/A candidate under 5%), or
    ``no measurable change`` whose estimate is faster or whose interval still admits a saving of
    more than half the :data:`RESOLUTION`. Decided ones (``faster``, ``slower``, a change ruled
    out) and noisy ones that straddle 1 without room to win get no more."""
    if iv is None:
        return verdict in ("noisy", "no measurable change", "n/a")
    if verdict == "noisy":
        return iv.low < 1.0 - MIN_EFFECT or iv.ratio >= 1.0 + RESOLUTION / 2.0
    if verdict == "no measurable change":
        return iv.ratio < 1.0 - MIN_EFFECT or iv.low < 1.0 - RESOLUTION / 2.0
    return False


