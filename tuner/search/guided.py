"""The guided search: spend a server restart only where it can still change the answer.

Order of trials:
1. the baseline (every speedup is measured against it);
2. each drafter (method + draft + method fields) once, at its highest k: that one run's
   per-position acceptance gives the acceptance length at every smaller k;
3. then, from the step-cost model fitted on everything measured so far (``predict``), the
   unmeasured config with the largest expected gain over best * (1 + noise), which weighs the
   predicted gain against the model's uncertainty (expected improvement);
4. stop when no unmeasured config can plausibly beat the best by more than the noise: its
   predicted tokens/s plus ``z`` standard deviations stays below best * (1 + noise). ``noise``
   is the run-to-run spread measured by the repeats. The winner is always a measured config,
   so a predicted winner is confirmed by measurement before it is named.

With two or more loads, 3 and 4 hold for the geometric mean over the loads and for each load
on its own (a model per load: the step time grows with the batch), so the best k of every
batch size is measured for the k-by-batch-size schedule.
"""

from __future__ import annotations

import json
import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from tuner.search.predict import Observation, Prediction, StepCostModel
from tuner.search.space import BASELINE, FIXED_K, Candidate

DEFAULT_Z = 1.28  # "plausibly": a one-sided 90 % bound
# Run-to-run spread assumed until repeats measure it (--repeats 2 or more).
DEFAULT_RUN_NOISE = 0.02


def drafter_of(params: dict) -> str:
    """The params without k: configs sharing it share one acceptance profile and step cost."""
    return json.dumps({k: v for k, v in params.items() if not k.endswith(".k")}, sort_keys=True)


def k_of(params: dict) -> int:
    method = params["method"]
    return 0 if method == BASELINE else int(params[f"{method}.k"])


def key_of(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


@dataclass(frozen=True)
class Proposal:
    candidate: Candidate
    prediction: Prediction | None  # None where no model exists yet (baseline, first of a drafter)
    reason: str


def observation(params: dict, tokens_per_s: float, per_position: Sequence[float] | None,
                feasible: bool = True, by_load: dict[str, float] | None = None) -> Observation:
    return Observation(drafter_of(params), k_of(params), tokens_per_s,
                       tuple(per_position) if per_position is not None else None, feasible,
                       tuple(sorted((by_load or {}).items())))


def run_noise(spreads: Sequence[float]) -> float:
    """The run-to-run spread of tokens/s: the median of the trials' relative MADs (MAD / median,
    from their repeats); ``DEFAULT_RUN_NOISE`` before any trial has repeats."""
    ordered = sorted(spreads)
    return ordered[len(ordered) // 2] if ordered else DEFAULT_RUN_NOISE


def _phi(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def _expected_gain(p: Prediction, bar: float) -> float:
    """Expected improvement over ``bar`` under a normal prediction: it weighs how likely a config
    is to beat the bar with by how much, so a near-certain crumb does not outrank a likely leap."""
    if p.sigma <= 0:
        return max(0.0, p.tokens_per_s - bar)
    z = (p.tokens_per_s - bar) / p.sigma
    density = math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return (p.tokens_per_s - bar) * _phi(z) + p.sigma * density


class GuidedSearch:
    """``prior``: observations of an earlier study (warm start), tokens/s relative to its
    baseline; they stand in for the first trial of their drafters and are scaled by this study's
    baseline. ``first``: configs measured right after the baseline (the previous winner)."""

    def __init__(self, candidates: Sequence[Candidate], noise: float, z: float = DEFAULT_Z,
                 prior: Sequence[Observation] = (), first: Sequence[Candidate] = ()):
        self.candidates = list(candidates)
        self.noise = noise
        self.z = z
        self.prior = list(prior)
        self.first = list(first)

    def propose(self, measured: dict[str, Observation | None],
                pending: Collection[str] = ()) -> Proposal | None:
        """The next config to measure, or None to stop (or, while ``pending`` is not empty, to
        wait for it). ``measured`` maps every config key already run to its observation (None
        when the trial failed: it is not proposed again); ``pending``: keys other workers are
        measuring now."""
        todo = [c for c in self.candidates if key_of(c.params) not in measured
                and key_of(c.params) not in pending]
        if not todo:
            return None
        observed = [o for o in measured.values() if o is not None]
        baseline = self.candidates[0]
        if key_of(baseline.params) not in measured and key_of(baseline.params) not in pending:
            return Proposal(baseline, None, "the baseline comes first")
        for candidate in self.first:
            if key_of(candidate.params) not in measured and key_of(candidate.params) not in pending:
                return Proposal(candidate, None, "warm start: the previous best")
        tried = {drafter_of(c.params) for c in self.candidates
                 if key_of(c.params) in measured or key_of(c.params) in pending}
        tried |= {o.drafter for o in self.prior}
        for candidate in todo:
            drafter = drafter_of(candidate.params)
            if drafter not in tried:
                highest = max((c for c in todo if drafter_of(c.params) == drafter),
                              key=lambda c: k_of(c.params))
                fixed = candidate.params["method"] in FIXED_K
                return Proposal(highest, None, "its k is fixed by the checkpoint" if fixed else
                                "highest k first: its acceptance profile covers every smaller k")
        base = next((o.tokens_per_s for o in observed if o.k == 0), None)
        if base is None:  # the baseline failed: nothing can be compared
            return None
        scaled = [replace(o, tokens_per_s=o.tokens_per_s * base) for o in self.prior]
        views = [("", StepCostModel(observed + scaled), observed)]
        views += [(f" at {load}", StepCostModel(at_load), at_load) for load, at_load in _by_load(observed).items()]
        scored = []
        for name, model, seen in views:
            bar = max((o.tokens_per_s for o in seen if o.feasible), default=0.0) * (1 + self.noise)
            for candidate in todo:
                p = model.predict(drafter_of(candidate.params), k_of(candidate.params))
                if p is None or p.upper(self.z) <= bar:  # beyond its drafter's trials, or implausible
                    continue
                gain = _expected_gain(p, bar)
                # Ranked relative to the bar, so that loads an order of magnitude apart compare.
                scored.append((gain / bar, p.tokens_per_s / bar, candidate, p, gain, bar, name))
        if not scored:
            return None
        _, _, candidate, p, gain, bar, name = max(scored, key=lambda s: s[:2])
        chance = _phi((p.tokens_per_s - bar) / max(p.sigma, 1e-9))
        overall = views[0][1].predict(drafter_of(candidate.params), k_of(candidate.params))
        return Proposal(candidate, overall,
                        f"expected gain {gain:.0f} tok/s{name}; {chance:.0%} likely to beat the best "
                        f"measured{name} ({bar / (1 + self.noise):.0f} tok/s) by more than the noise "
                        f"({self.noise:.1%})")


def _by_load(observed: Sequence[Observation]) -> dict[str, list[Observation]]:
    """With two or more loads, each load's own observations (its tokens/s in place of the
    geometric mean): the best k at one batch size is not the best over all of them, and the
    k-by-batch-size schedule can only choose among measured configs."""
    loads = {load for o in observed for load, _ in o.by_load}
    if len(loads) < 2:
        return {}
    return {load: [replace(o, tokens_per_s=dict(o.by_load)[load], by_load=()) for o in observed
                   if load in dict(o.by_load)] for load in sorted(loads)}
