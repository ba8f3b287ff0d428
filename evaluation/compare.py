"""Paired comparisons of two methods over the same positions, with bootstrap confidence intervals.

Every method answers the same positions, so the per-position differences are resampled
together (scipy's paired bootstrap): a 5-point difference is told from noise by its interval.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import stats

RESAMPLES = 2000
LEVEL = 0.95


@dataclass(frozen=True)
class Interval:
    value: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.value:+.3f} [{self.low:+.3f}, {self.high:+.3f}]"


def _difference(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(a, axis=axis) - np.mean(b, axis=axis)


def _ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(a, axis=axis) / np.maximum(np.mean(b, axis=axis), 1e-12)


def _median_ratio(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.median(a, axis=axis) / np.maximum(np.median(b, axis=axis), 1e-12)


STATISTICS: dict[str, Callable[..., np.ndarray]] = {
    "difference": _difference,  # mean(a) - mean(b): shares, P@k
    "ratio": _ratio,  # mean(a) / mean(b): accepted characters
    "median_ratio": _median_ratio,  # median(a) / median(b): time per request
}


def paired(a: Sequence[float], b: Sequence[float], statistic: str = "difference", seed: int = 0) -> Interval:
    """The statistic of (a, b) with its percentile bootstrap interval, positions resampled in pairs."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"paired samples need the same length of at least 2, got {len(x)} and {len(y)}")
    function = STATISTICS[statistic]
    value = float(function(x, y))
    if np.all(x == x[0]) and np.all(y == y[0]):
        return Interval(value, value, value)  # nothing varies: the bootstrap has nothing to resample
    result = stats.bootstrap((x, y), function, paired=True, vectorized=True, n_resamples=RESAMPLES,
                             confidence_level=LEVEL, method="percentile", rng=np.random.default_rng(seed))
    return Interval(value, float(result.confidence_interval.low), float(result.confidence_interval.high))


def mean(values: Sequence[float], seed: int = 0) -> Interval:
    """The mean of one method's values with its percentile bootstrap interval."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2 or np.all(x == x[0]):
        value = float(np.mean(x)) if len(x) else float("nan")
        return Interval(value, value, value)
    result = stats.bootstrap((x,), np.mean, vectorized=True, n_resamples=RESAMPLES, confidence_level=LEVEL,
                             method="percentile", rng=np.random.default_rng(seed))
    return Interval(float(np.mean(x)), float(result.confidence_interval.low), float(result.confidence_interval.high))
