"""Predicting tokens/s of configurations not measured yet, with an uncertainty.

Two facts carry the prediction (``../shared/notes/formulas.md``):

- one run of a chain drafter at k gives the per-position acceptance p_0..p_{k-1}, hence the
  acceptance length tau(k') = 1 + sum_{i<k'} p_i for every k' <= k;
- tokens/s = tau / step time. Each trial measures its step time relative to a plain decoding
  step, t(k) = tau(k) * baseline tokens/s / tokens/s; ``StepCostModel`` interpolates it in k
  between a drafter's trials.

So tokens/s(k) = baseline tokens/s * tau(k) / t(k). The uncertainty is the interpolation's own
(the run-to-run noise is handled by the search's margin).

The uncertainty is only as good as the model's shape. A trial that lands outside its prediction
(``prediction_miss``: farther than z standard deviations of the prediction and of the run-to-run
noise together) shows the shape is wrong for its drafter; the guided search then adds the miss to
the uncertainty of that drafter's later predictions (``Prediction.widened``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

# How far the step time may bend away from a straight line before a drafter has three trials to
# show it: |e''| / 2 in units of e(k_max) / k_max^2. 0.6 trusts the line through (0, a) and the
# trial at k_max to 15 % of e(k_max) at k_max / 2, a wide prior: about what the stored search
# table's drafters bend by (docs/lab/notes-from-code.md#tunerproposepredict).
PRIOR_CURVATURE = 0.6


@dataclass(frozen=True)
class Observation:
    """One measured configuration: ``drafter`` names (method, draft, method fields); k 0 = baseline."""

    drafter: str
    k: int
    tokens_per_s: float
    per_position: tuple[float, ...] | None = None  # p_0..p_{k-1}, unconditional
    feasible: bool = True  # met the latency targets; an infeasible config cannot be "the best"
    by_load: tuple[tuple[str, float], ...] = ()  # (load, tokens/s) when one trial ran several
    # What the search predicted for this trial when it proposed it (None: no prediction, as for
    # the baseline and a drafter's first trial), in tokens/s, and its one standard deviation.
    predicted: float | None = None
    predicted_sigma: float | None = None

    def acceptance_length(self, k: int) -> float | None:
        """tau(k) from this run, for k up to the run's own k."""
        if self.per_position is None or k > len(self.per_position):
            return None
        return 1.0 + float(sum(self.per_position[:k]))


@dataclass(frozen=True)
class Prediction:
    tokens_per_s: float
    sigma: float  # one standard deviation, in tokens/s
    acceptance_length: float

    def upper(self, z: float) -> float:
        return self.tokens_per_s + z * self.sigma

    def widened(self, spread: float) -> Prediction:
        """With ``spread`` (relative to the prediction) added to its uncertainty, as independent
        errors add: what a drafter's earlier miss says about the model's shape there."""
        if spread <= 0:
            return self
        return replace(self, sigma=math.hypot(self.sigma, spread * self.tokens_per_s))


def prediction_miss(measured: float, predicted: float, sigma: float, noise: float, z: float) -> float | None:
    """How far a trial fell outside its prediction's stated uncertainty, relative to the
    prediction: (|measured - predicted| - allowed) / predicted, signed like measured - predicted
    (> 0: it measured more than predicted); None inside it. ``allowed`` is ``z`` standard
    deviations of the prediction's own uncertainty (``sigma``, tokens/s) and of the run-to-run
    noise (``noise``, relative) together: the z the search calls "plausible" by, so a miss is a
    figure the model had called implausible. (At one standard deviation a right model would miss
    one trial in three.)"""
    if not predicted or predicted <= 0:
        return None
    allowed = z * math.hypot(sigma or 0.0, noise * predicted)
    error = measured - predicted
    if abs(error) <= allowed:
        return None
    return math.copysign(abs(error) - allowed, error) / predicted


class StepCostModel:
    """Fitted from observations of one model on one host at one load.

    The excess step time e(k) = t(k) - 1 of a drafter (the draft passes, the rejection sampler,
    the longer verification) is measured by each of its trials and interpolated in k between
    them: through the nearest two measured k's, bent by the parabola through three once there
    are three. The uncertainty is the size of that bend, curvature * (k - k1) * (k - k2): nil at
    a measured k, largest mid-way between two. The shape differs by drafter (here ngram's e(k)
    flattens at high k, a draft model's grows about linearly with its passes), so it is read off
    the trials rather than assumed; before a drafter has three, ``PRIOR_CURVATURE`` stands in.

    A drafter with one trial gets the line from (0, a) to it: ``a``, the cost of speculating at
    all, from the drafters with two or more trials (their median), else 0, which makes smaller
    k optimistic, so the search looks there.
    """

    def __init__(self, observations: Sequence[Observation]):
        baselines = [o.tokens_per_s for o in observations if o.k == 0]
        self.baseline = float(np.median(baselines)) if baselines else None
        self.by_drafter: dict[str, list[Observation]] = {}
        for o in observations:
            if o.k > 0 and o.per_position is not None and o.tokens_per_s > 0:
                self.by_drafter.setdefault(o.drafter, []).append(o)
        # Read once here: every prediction, and the shared overhead, read them again.
        self._excess = ({drafter: self._measured_excess(points) for drafter, points in self.by_drafter.items()}
                        if self.baseline is not None else {})

    def profile(self, drafter: str) -> Observation | None:
        """The drafter's trial at the highest k: its acceptance profile covers every smaller k."""
        found = self.by_drafter.get(drafter)
        return max(found, key=lambda o: o.k) if found else None

    def acceptance_length(self, drafter: str, k: int) -> float:
        """tau(k) from the highest-k trial's profile, corrected by the drafter's own trials: a run
        at k measures its tau(k) directly, and a high-k run's profile reads it somewhat apart (its
        drafts start at other positions; docs/lab/notes-from-code.md#tunerproposepredict). The
        correction is interpolated in k."""
        profile = self.profile(drafter)
        anchors = sorted({o.k: o.acceptance_length(o.k) / profile.acceptance_length(o.k)
                          for o in self.by_drafter[drafter]}.items())
        return profile.acceptance_length(k) * float(np.interp(k, *zip(*anchors)))

    def excess_step_times(self, drafter: str) -> dict[int, float]:
        """Measured k -> e(k) = tau(k) * baseline / tokens/s - 1 (the mean where k ran twice)."""
        return self._excess.get(drafter, {})

    def _measured_excess(self, points: Sequence[Observation]) -> dict[int, float]:
        found: dict[int, list[float]] = {}
        for o in points:
            found.setdefault(o.k, []).append(o.acceptance_length(o.k) * self.baseline / o.tokens_per_s - 1)
        return {k: float(np.mean(v)) for k, v in sorted(found.items())}

    def _shared_overhead(self, skip: str) -> float:
        """e(0+) of the drafters with two or more trials (the line through their lowest two)."""
        found = []
        for drafter in self.by_drafter:
            e = self.excess_step_times(drafter)
            if drafter != skip and len(e) >= 2:
                (k0, e0), (k1, e1) = list(e.items())[:2]
                found.append(max(0.0, e0 - k0 * (e1 - e0) / (k1 - k0)))
        return float(np.median(found)) if found else 0.0

    def excess_step_time(self, drafter: str, k: int) -> tuple[float, float]:
        """(e(k), its uncertainty) for the drafter, from its measured trials."""
        e = self.excess_step_times(drafter)
        k_max = max(e)
        if len(e) == 1:
            (k1, e1), (k2, e2) = (0, min(self._shared_overhead(drafter), e[k_max])), (k_max, e[k_max])
        else:  # the nearest two, one on each side of k where there are both
            below = [p for p in e.items() if p[0] <= k][-1:]
            above = [p for p in e.items() if p[0] > k][:1]
            (k1, e1), (k2, e2) = below + above if below and above else sorted(e.items(), key=lambda p: abs(p[0] - k))[:2]
        value = e1 + (e2 - e1) * (k - k1) / (k2 - k1)
        spread = (k - k1) * (k - k2)
        if len(e) >= 3:
            # The parabola through the two and the farthest other trial: with a near one, the
            # run-to-run noise of two trials a k apart would swamp the bend.
            third = max((p for p in e.items() if p[0] not in (k1, k2)), key=lambda p: abs(p[0] - k))
            bend = _second_difference((k1, e1), (k2, e2), third)
            value += bend * spread
        else:
            bend = PRIOR_CURVATURE * max(e[k_max], 0.0) / k_max ** 2
        # The step time does not fall as k grows: keep the value in order with the two points.
        if k < min(k1, k2):
            value = min(value, e1, e2)
        elif k > max(k1, k2):
            value = max(value, e1, e2)
        else:
            value = min(max(value, min(e1, e2)), max(e1, e2))
        return max(value, 0.0), abs(bend * spread)

    def predict(self, drafter: str, k: int) -> Prediction | None:
        """None where nothing is known yet: no baseline, or no trial of this drafter at k or above."""
        if self.baseline is None:
            return None
        if k == 0:
            return Prediction(self.baseline, 0.0, 1.0)
        profile = self.profile(drafter)
        if profile is None or k > profile.k:
            return None
        tau = self.acceptance_length(drafter, k)
        excess, sigma = self.excess_step_time(drafter, k)
        mean = self.baseline * tau / (1 + excess)
        return Prediction(mean, mean * sigma / (1 + excess), tau)


def _second_difference(p0: tuple[float, float], p1: tuple[float, float], p2: tuple[float, float]) -> float:
    """The divided difference f[x0, x1, x2] of three points: the coefficient of (x - x0)(x - x1)
    in the Newton form of the parabola through them (half its second derivative)."""
    (x0, y0), (x1, y1), (x2, y2) = p0, p1, p2
    return ((y2 - y1) / (x2 - x1) - (y1 - y0) / (x1 - x0)) / (x2 - x0)
