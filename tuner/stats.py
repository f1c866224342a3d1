"""Statistics of repeated runs: median, MAD, a bootstrap confidence interval, the
conservative score winners are chosen on, and the rule for calling two configs tied."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAD_SCALE = 1.4826  # makes the MAD estimate a normal distribution's standard deviation


@dataclass(frozen=True)
class RepeatStats:
    n: int
    median: float
    mad: float  # scaled median absolute deviation
    ci_low: float
    ci_high: float

    @property
    def score(self) -> float:
        """Median minus one scaled MAD: a config must be fast *and* steady to rank high
        (the rule of vLLM's own sweep tuner)."""
        return self.median - self.mad


def geometric_mean(values: Sequence[float]) -> float:
    """How figures measured at several loads are combined: each level weighs the same, whatever
    its scale."""
    return float(np.exp(np.mean(np.log(np.asarray(values, dtype=float)))))


def mad(values: Sequence[float]) -> float:
    array = np.asarray(values, dtype=float)
    return float(MAD_SCALE * np.median(np.abs(array - np.median(array))))


def bootstrap_ci(values: Sequence[float], level: float = 0.95, resamples: int = 2000,
                 seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the median (a single value gives a zero-width interval)."""
    array = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    medians = np.median(rng.choice(array, size=(resamples, len(array)), replace=True), axis=1)
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(medians, [tail, 100 - tail])
    return float(low), float(high)


def repeat_stats(values: Sequence[float]) -> RepeatStats:
    if not values:
        raise ValueError("no values")
    low, high = bootstrap_ci(values)
    return RepeatStats(n=len(values), median=float(np.median(values)), mad=mad(values),
                       ci_low=low, ci_high=high)


def tied(a: RepeatStats, b: RepeatStats, margin: float) -> bool:
    """Within the noise: medians closer than ``margin`` of the larger median plus the spread of
    their difference (the root sum of squares of both MADs, as for independent noise)."""
    spread = float(np.hypot(a.mad, b.mad))
    return abs(a.median - b.median) <= margin * max(a.median, b.median) + spread
