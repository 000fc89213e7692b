"""Order statistics used everywhere: nearest-rank quantiles on integer samples (deterministic,
no interpolation, so a figure is always one of the measured samples)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def quantile(samples: Sequence[int], q: float) -> int | None:
    """Nearest-rank quantile: the smallest sample with at least ``q`` of the samples at or below."""
    if not samples:
        return None
    s = sorted(samples)
    k = max(1, math.ceil(q * len(s)))
    return s[min(k, len(s)) - 1]


def median(samples: Sequence[int]) -> int | None:
    return quantile(samples, 0.5)


def median_float(values: Sequence[float]) -> float | None:
    if not values:
        return None
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return float(s[mid]) if n % 2 else (s[mid - 1] + s[mid]) / 2.0
