"""Statistics of repeated runs: median, MAD, a bootstrap confidence interval, the
conservative score winners are chosen on, the rules for calling two configs tied (not
separated) and shown equal, and the precision a config's tokens/s is known to."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAD_SCALE = 1.4826  # makes the MAD estimate a normal distribution's standard deviation
# Student's t quantiles by degrees of freedom, for the few replays a trial has: two-sided 95 %
# (0.975) for a precision, one-sided 95 % for an equivalence test. Beyond the table, within
# 0.01 of the true value.
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
T_95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812}

# Run-to-run spread assumed until repeats measure it (--repeats 2 or more): configs within it of
# each other are ties (decide.answer), and the guided search plans with it (propose.guided).
DEFAULT_RUN_NOISE = 0.02

def t_975(df: int) -> float:
    return T_975.get(df, 1.96 + 2.4 / df) if df >= 1 else math.inf


def t_95(df: int) -> float:
    return T_95.get(df, 1.645 + 1.7 / df) if df >= 1 else math.inf


def relative_precision(values: Sequence[float]) -> float:
    """Half the width of the 95 % t-interval of the mean, relative to the mean: 0.02 says the
    replays put the true tokens/s within +-2 %. Infinite from one replay."""
    n = len(values)
    mean = float(np.mean(values)) if n else 0.0
    if n < 2 or mean <= 0:
        return math.inf
    return t_975(n - 1) * float(np.std(values, ddof=1)) / math.sqrt(n) / mean


@dataclass(frozen=True)
class RepeatStats:
    n: int
    median: float
    mad: float  # scaled median absolute deviation
    ci_low: float
    ci_high: float

    @property
    def score(self) -> float:
        """Median minus one standard error (the scaled MAD over the root of the replays): a
        config ranks on what its replays show it surely reaches, so a noisy one measured once
        ranks below a steady one, and more replays of it let its median speak. (vLLM's own sweep
        tuner takes one whole MAD off: a config measured more often would never gain by it.)"""
        return self.median - self.mad / math.sqrt(max(self.n, 1))


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


def shown_equal(a: RepeatStats, b: RepeatStats, tolerance: float) -> bool:
    """Shown equal within ``tolerance`` of the larger median (an equivalence test at 95 %): the
    difference of the medians plus its one-sided bound (t by the replays' degrees of freedom,
    the MADs as the standard deviations) stays inside it. Needs two replays of each: one replay
    cannot show anything equal."""
    if a.n < 2 or b.n < 2:
        return False
    error = float(np.hypot(a.mad / math.sqrt(a.n), b.mad / math.sqrt(b.n)))
    return abs(a.median - b.median) + t_95(a.n + b.n - 2) * error <= tolerance * max(a.median, b.median)
