"""The verdict procedure of ``seamscope try`` on simulated repetitions (torch-free, no timing).

Each simulated run's time is the true time times a noise factor. Two noise models: lognormal (a
run as likely faster as slower) and "noise only adds" (1 + s·E, E exponential: stalls, a busy
core). A noise level is stated as the trial's own noise figure: the typical (median) variation
(max − min) / min of one side over three repetitions, so "15%" here is what the table would print.
A trial starts with three repetitions per side and adds one to each while the candidate is
undecided (:func:`stats.undecided`), up to six, as the trial does.
"""

from __future__ import annotations

import functools
import math
import random
import statistics

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seamscope.experiments.trials import stats

MODELS = ("lognormal", "adds")


def _draw(model: str, s: float, rng: random.Random) -> float:
    if model == "lognormal":
        return math.exp(rng.gauss(0.0, s))
    return 1.0 + s * rng.expovariate(1.0)


@functools.cache
def calibrated(model: str, level: float) -> float:
    """The noise parameter whose median (max − min) / min over three runs is ``level``."""
    lo, hi = 1e-4, 5.0
    for _ in range(30):
        mid = (lo + hi) / 2
        rng = random.Random(9)
        figs = []
        for _ in range(2000):
            xs = [_draw(model, mid, rng) for _ in range(3)]
            figs.append((max(xs) - min(xs)) / min(xs))
        lo, hi = (mid, hi) if statistics.median(figs) < level else (lo, mid)
    return (lo + hi) / 2


def simulate(model: str, s: float, effect: float, rng: random.Random, start: int = 3,
             most: int = 6) -> tuple[str, int]:
    """One trial: (the verdict, repetitions per side it took)."""
    cand = [effect * _draw(model, s, rng) for _ in range(start)]
    base = [_draw(model, s, rng) for _ in range(start)]
    while True:
        iv = stats.interval(cand, base)
        assert iv is not None
        verdict = stats.decide(iv)
        if len(cand) >= most or not stats.undecided(iv, verdict):
            return verdict, len(cand)
        cand.append(effect * _draw(model, s, rng))
        base.append(_draw(model, s, rng))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("level", [0.15, 0.30, 0.45, 0.60])
def test_a_candidate_identical_to_the_baseline_is_called_faster_or_slower_at_most_5_percent(model, level):
    s = calibrated(model, level)
    rng = random.Random(1000 * MODELS.index(model) + round(100 * level))
    verdicts = [simulate(model, s, 1.0, rng)[0] for _ in range(1000)]
    false = sum(v in ("faster", "slower") for v in verdicts) / len(verdicts)
    assert false <= 0.05, (model, level, false)


@pytest.mark.parametrize("model", MODELS)
def test_a_25_percent_effect_at_15_percent_noise_is_found_in_90_percent_within_6_repetitions(model):
    s = calibrated(model, 0.15)
    rng = random.Random(7)
    results = [simulate(model, s, 0.75, rng) for _ in range(1000)]
    found = sum(v == "faster" for v, _ in results) / len(results)
    assert found >= 0.90, (model, found)
    assert all(n <= 6 for _, n in results)
    # a slower one is never called faster (it gets no more repetitions once it cannot win)
    assert {simulate(model, s, 1 / 0.75, rng)[0] for _ in range(300)} <= {"slower", "noisy", "no measurable change"}


@pytest.mark.parametrize(("model", "least"), [("lognormal", 0.90), ("adds", 0.80)])
def test_a_30_percent_slowdown_at_15_percent_noise_is_called_slower_within_6_repetitions(model, least):
    """A noisy candidate whose estimate is a clear slowdown gets more repetitions, so the user is
    told ``slower``, not ``noisy`` (96% and 86% with these seeds)."""
    s = calibrated(model, 0.15)
    rng = random.Random(7 + MODELS.index(model))
    results = [simulate(model, s, 1.30, rng) for _ in range(1000)]
    assert sum(v == "slower" for v, _ in results) / len(results) >= least, model
    assert not any(v == "faster" for v, _ in results)


def test_the_t_quantiles_are_the_tables():
    for df, q975, q9875 in ((1, 12.7062, 25.4517), (2, 4.3027, 6.2053), (5, 2.5706, 3.1634), (30, 2.0423, 2.3596)):
        assert stats.t_quantile(0.975, df) == pytest.approx(q975, abs=1e-3)
        assert stats.t_quantile(0.9875, df) == pytest.approx(q9875, abs=1e-3)


def test_decided_candidates_get_no_more_repetitions():
    fast = stats.interval([50, 51, 52], [100, 101, 99])
    assert fast is not None and stats.decide(fast) == "faster" and not stats.undecided(fast, "faster")
    same = stats.interval([100, 101, 99.5], [100.2, 100.5, 99.8])
    assert same is not None and stats.decide(same) == "no measurable change"
    assert not stats.undecided(same, "no measurable change")
    wide = stats.interval([60, 100, 140], [100, 60, 140])
    assert wide is not None and stats.decide(wide) == "noisy" and stats.undecided(wide, "noisy")
    hopeless = stats.interval([200, 260, 300], [100, 150, 100])
    assert hopeless is not None and hopeless.low > 1 and not stats.undecided(hopeless, stats.decide(hopeless))
    assert stats.interval([1.0], [1.0, 2.0]) is None


@given(st.lists(st.floats(0.1, 100.0), min_size=2, max_size=6), st.lists(st.floats(0.1, 100.0), min_size=2,
                                                                           max_size=6))
def test_the_interval_holds_the_ratio_and_swapping_sides_inverts_it(cand, base):
    iv = stats.interval(cand, base)
    back = stats.interval(base, cand)
    assert iv is not None and back is not None
    assert iv.low <= iv.ratio * (1 + 1e-9) and iv.ratio <= iv.high * (1 + 1e-9)
    assert back.ratio == pytest.approx(1 / iv.ratio, rel=1e-6)
    assert back.low == pytest.approx(1 / iv.high, rel=1e-6)
    swap = {"faster": "slower", "slower": "faster"}
    assert stats.decide(back) == swap.get(stats.decide(iv), stats.decide(iv))
