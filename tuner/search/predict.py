"""Predicting tokens/s of configurations not measured yet, with an uncertainty.

Two facts carry the prediction (``../shared/notes/formulas.md``):

- one run of a chain drafter at k gives the per-position acceptance p_0..p_{k-1}, hence the
  acceptance length tau(k') = 1 + sum_{i<k'} p_i for every k' <= k;
- tokens/s = tau / step time, and the step time relative to a plain decoding step grows with k:
  t(k) / t(0) = 1 + a + c * k (``StepCostModel``), fitted per drafter from its own trials.

So tokens/s(k) = baseline tokens/s * tau(k) / (1 + a + c * k). The uncertainty is the model's own
(the run-to-run noise is handled by the search's margin): it grows with the distance in k from
the nearest measured trial of the same drafter, at a rate learned from how wrong the model was
on the trials measured so far (a prior of ``PRIOR_MODEL_ERROR`` until two trials of one drafter
exist).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Relative error of the linear step-cost model when predicting k from a trial at 2k (or k = 0);
# a deliberately wide prior, replaced by the measured error as soon as there is any.
PRIOR_MODEL_ERROR = 0.15
MIN_MODEL_ERROR = 0.02


@dataclass(frozen=True)
class Observation:
    """One measured configuration: ``drafter`` names (method, draft, method fields); k 0 = baseline."""

    drafter: str
    k: int
    tokens_per_s: float
    per_position: tuple[float, ...] | None = None  # p_0..p_{k-1}, unconditional
    feasible: bool = True  # met the latency targets; an infeasible config cannot be "the best"

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


class StepCostModel:
    """Fitted from observations of one model on one host at one load.

    The step time of a drafter relative to a plain decoding step is t(k) = 1 + a + c k: ``a`` the
    fixed cost of speculating at all (a draft pass, the rejection sampler; large on CPU, small
    on a GPU), ``c`` the cost per drafted token. Two or more trials of a drafter at different k
    fit both; with one, ``a`` is taken from the drafters that have two (their median), else 0,
    which makes predictions for smaller k optimistic, so the search looks there.
    """

    def __init__(self, observations: Sequence[Observation]):
        baselines = [o.tokens_per_s for o in observations if o.k == 0]
        self.baseline = float(np.median(baselines)) if baselines else None
        self.by_drafter: dict[str, list[Observation]] = {}
        for o in observations:
            if o.k > 0 and o.per_position is not None and o.tokens_per_s > 0:
                self.by_drafter.setdefault(o.drafter, []).append(o)
        self.model_error = self._model_error()

    def profile(self, drafter: str) -> Observation | None:
        """The drafter's trial at the highest k: its acceptance profile covers every smaller k."""
        found = self.by_drafter.get(drafter)
        return max(found, key=lambda o: o.k) if found else None

    def acceptance_length(self, drafter: str, k: int) -> float:
        """tau(k) from the highest-k trial's profile, corrected by the drafter's own trials: a run
        at k measures its tau(k) directly, and a high-k run's profile read it up to about 5 %
        apart (its drafts start at other positions). The correction is interpolated in k."""
        profile = self.profile(drafter)
        anchors = sorted({o.k: o.acceptance_length(o.k) / profile.acceptance_length(o.k)
                          for o in self.by_drafter[drafter]}.items())
        return profile.acceptance_length(k) * float(np.interp(k, *zip(*anchors)))

    def relative_step_time(self, o: Observation) -> float:
        """t(k) / t(0) as measured by one trial: tau / (tokens/s relative to the baseline)."""
        return o.acceptance_length(o.k) * self.baseline / o.tokens_per_s

    def _fit_both(self, points: Sequence[Observation]) -> tuple[float, float]:
        """(a, c) by least squares, both kept >= 0."""
        ks = np.array([o.k for o in points], dtype=float)
        excess = np.array([self.relative_step_time(o) - 1.0 for o in points])
        (a, c), *_ = np.linalg.lstsq(np.vstack([np.ones_like(ks), ks]).T, excess, rcond=None)
        if c < 0:
            return float(max(0.0, excess.mean())), 0.0
        if a < 0:
            return 0.0, float(max(0.0, ks @ excess / (ks @ ks)))
        return float(a), float(c)

    def _shared_overhead(self, skip: str) -> float:
        fitted = [self._fit_both(points)[0] for drafter, points in self.by_drafter.items()
                  if drafter != skip and len({o.k for o in points}) >= 2]
        return float(np.median(fitted)) if fitted else 0.0

    def step_costs(self, drafter: str, exclude: Observation | None = None) -> tuple[float, float] | None:
        """(a, c) of t(k) = 1 + a + c k for the drafter, fitted on its trials but ``exclude``."""
        points = [o for o in self.by_drafter.get(drafter, []) if o is not exclude]
        if not points or self.baseline is None:
            return None
        if len({o.k for o in points}) >= 2:
            return self._fit_both(points)
        excess = float(np.mean([self.relative_step_time(o) - 1.0 for o in points]))
        a = min(self._shared_overhead(drafter), max(excess, 0.0))
        return a, max(0.0, (excess - a) / points[0].k)

    def _model_error(self) -> float:
        """Relative error per unit of relative k distance, from leave-one-out predictions."""
        errors = []
        for drafter, points in self.by_drafter.items():
            for o in points:
                others = [p for p in points if p is not o and p.k > o.k]
                if not others:
                    continue
                a, c = self.step_costs(drafter, exclude=o)
                tau = max(others, key=lambda p: p.k).acceptance_length(o.k)
                predicted = self.baseline * tau / (1 + a + c * o.k)
                distance = min(abs(p.k - o.k) for p in others) / max(p.k for p in others)
                errors.append(abs(predicted / o.tokens_per_s - 1) / max(distance, 0.1))
        if not errors:
            return PRIOR_MODEL_ERROR
        return max(MIN_MODEL_ERROR, math.sqrt(float(np.mean(np.square(errors)))))

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
        a, c = self.step_costs(drafter)
        mean = self.baseline * tau / (1 + a + c * k)
        points = self.by_drafter[drafter]
        distance = min(abs(o.k - k) for o in points) / profile.k
        return Prediction(mean, self.model_error * distance * mean, tau)
