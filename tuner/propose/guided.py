"""The guided search: spend a server restart only where it can still change the answer.

Order of trials:
1. the baseline (every speedup is measured against it);
2. each drafter (method + draft + method fields) once, at its highest k: that one run's
   per-position acceptance gives the acceptance length at every smaller k. Drafters go in the
   order of ``OPENING_ORDER`` (the likeliest winners first), so that a study stopped early by
   ``--time-limit`` has measured them;
3. then, from the step-cost model fitted on everything measured so far (``predict``), the
   unmeasured config with the largest expected gain over best * (1 + noise), which weighs the
   predicted gain against the model's uncertainty (expected improvement);
4. stop when no unmeasured config can plausibly beat the best by more than the noise: its
   predicted tokens/s plus ``z`` standard deviations stays below best * (1 + noise). ``noise``
   is how well a trial's figure is known: the run-to-run spread measured by the repeats, over
   the square root of the replays a trial takes (``mean_noise``). The winner is always a measured config,
   so a predicted winner is confirmed by measurement before it is named;
5. a trial measured above its prediction by more than ``z`` standard deviations of the
   prediction and the noise together (``predict.prediction_miss``) shows that the model's shape
   is wrong for its drafter: every later prediction of that drafter gets the miss (how far beyond
   that stated uncertainty it fell, relative; the largest of the drafter's) as extra spread
   (``Prediction.widened``), so that the search measures more of it rather than stopping on a
   wrong model. Only a miss above counts: stopping too early needs a model that predicts too
   little, while one that predicted too much made the search measure, and the trial corrects it
   where it stood. (Counting misses below too took 2 restarts more per study on the stored
   table, 6.0 to 8.0, and found nothing more: all of them on ngram's first prediction, which the
   line from (0, a) makes high on purpose.)

With two or more loads, 3 and 4 hold for the geometric mean over the loads and for each load
on its own (a model per load: the step time grows with the batch), so the best k of every
batch size is measured for the k-by-batch-size schedule.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from tuner.decide.stats import DEFAULT_RUN_NOISE
from tuner.plan.settings import DEFAULT_Z
from tuner.propose.predict import Observation, Prediction, StepCostModel, prediction_miss
from tuner.plan.space import BASELINE, FIXED_K, Candidate

# Which drafters are measured first (step 2), whatever order the flags named them in. Drafts made
# for the target (eagle3, the block drafters, MTP heads) before the free ngram and suffix, and the
# separate draft model last: it starts slowest and, on the H200, ran below the baseline at every
# load (0.59-0.69x, docs/lab/gpu.md section 8). With --time-limit 10m a cold H200 stopped after four
# trials in the flags' order (eagle3, draft_model, ngram) before DFlash, the study's winner.
OPENING_ORDER = ("eagle3", "dflash", "dspark", "mtp", "ngram", "suffix", "draft_model")


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
                feasible: bool = True, by_load: dict[str, float] | None = None,
                predicted: tuple[float | None, float | None] | None = None) -> Observation:
    """``predicted``: (tokens/s, sigma) the trial was proposed on (the trial's user attributes
    predicted_tokens_per_s, predicted_sigma), for ``GuidedSearch.misses``."""
    value, sigma = predicted or (None, None)
    return Observation(drafter_of(params), k_of(params), tokens_per_s,
                       tuple(per_position) if per_position is not None else None, feasible,
                       tuple(sorted((by_load or {}).items())), value, sigma if value is not None else None)


# The median of the scaled MAD of n normal values over their standard deviation: the MAD of a
# few repeats is small, most of all at n = 3, where it is the smaller distance of the outer two
# to the middle one (400 000 samples of each n).
MAD_MEDIAN_RATIO = {2: 0.707, 3: 0.534, 4: 0.672, 5: 0.747, 6: 0.791, 7: 0.827, 8: 0.849, 9: 0.869,
                    10: 0.881, 11: 0.893, 12: 0.904}


def mad_median_ratio(n: int) -> float:
    return MAD_MEDIAN_RATIO.get(n, 1.0 - 1.15 / n) if n >= 2 else 1.0


def run_noise(spreads: Sequence[float], repeats: Sequence[int] | None = None) -> float:
    """The run-to-run spread of tokens/s: the median of the trials' relative MADs (MAD / median,
    from their repeats); ``DEFAULT_RUN_NOISE`` before any trial has repeats. ``repeats``: each
    trial's number of repeats, to undo the MAD's shortfall at that n (``MAD_MEDIAN_RATIO``:
    the median over trials of 3 repeats' MAD is 0.53 standard deviations)."""
    if repeats is not None:
        spreads = [s / mad_median_ratio(n) for s, n in zip(spreads, repeats, strict=True)]
    ordered = sorted(spreads)
    return ordered[len(ordered) // 2] if ordered else DEFAULT_RUN_NOISE


def mean_noise(spreads: Sequence[float], repeats: Sequence[int]) -> float:
    """How well a trial's figure is known: the run-to-run spread of one replay (``run_noise``)
    over the square root of the replays a trial takes (their median). With ``--max-repeats`` a
    trial replays until its mean is known to ``--precision``: comparing it with a config's
    prediction by one replay's spread would let the search stop before a config that the
    measured figures could still tell apart (at a load whose replays spread 10 %, any config
    less than 10 % better than the best)."""
    if not repeats:
        return run_noise(spreads)
    return run_noise(spreads, repeats) / math.sqrt(statistics.median(repeats))


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
    baseline. ``first``: configs measured right after the baseline (the previous winner).
    ``widen``: False turns step 5 (widening a drafter's uncertainty after a miss) off."""

    def __init__(self, candidates: Sequence[Candidate], noise: float, z: float = DEFAULT_Z,
                 prior: Sequence[Observation] = (), first: Sequence[Candidate] = (), widen: bool = True,
                 rerun: Sequence[Candidate] = ()):
        self.candidates = list(candidates)
        self.noise = noise
        self.z = z
        self.prior = list(prior)
        self.first = list(first)
        self.rerun = list(rerun)  # an earlier run could not measure these (interrupted, a host fault)
        self.widen = widen
        # The predictions this search proposed on, for observations that do not carry theirs.
        self.proposed: dict[str, Prediction] = {}

    def misses(self, measured: dict[str, Observation | None]) -> dict[str, float]:
        """Drafter -> the largest miss of its trials measured above the stated uncertainty of
        the prediction they were proposed on: how far beyond it, relative to the prediction
        (``predict.prediction_miss``)."""
        found: dict[str, float] = {}
        for key, o in measured.items():
            if o is None:
                continue
            if o.predicted is not None:
                value, sigma = o.predicted, o.predicted_sigma or 0.0
            elif key in self.proposed:
                value, sigma = self.proposed[key].tokens_per_s, self.proposed[key].sigma
            else:
                continue
            miss = prediction_miss(o.tokens_per_s, value, sigma, self.noise, self.z)
            if miss is not None and miss > 0:
                found[o.drafter] = max(miss, found.get(o.drafter, 0.0))
        return found

    def propose(self, measured: dict[str, Observation | None],
                pending: Collection[str] = (), skipped: Collection[str] = ()) -> Proposal | None:
        """The next config to measure, or None to stop (or, while ``pending`` is not empty, to
        wait for it). ``measured`` maps every config key already run to its observation (None
        when the trial failed: it is not proposed again); ``pending``: keys other workers are
        measuring now; ``skipped``: keys a host fault kept from being measured in this run, left
        for the next (their drafter still counts as untried)."""
        todo = [c for c in self.candidates if key_of(c.params) not in measured
                and key_of(c.params) not in pending and key_of(c.params) not in skipped]
        if not todo:
            return None
        observed = [o for o in measured.values() if o is not None]
        baseline = self.candidates[0]
        if key_of(baseline.params) not in measured and key_of(baseline.params) not in pending:
            return Proposal(baseline, None, "the baseline comes first") if baseline in todo else None
        for candidate in self.rerun:
            if candidate in todo:
                return Proposal(candidate, None, "an earlier run could not measure it")
        for candidate in self.first:
            if key_of(candidate.params) not in measured and key_of(candidate.params) not in pending:
                return Proposal(candidate, None, "warm start: the previous best")
        tried = {drafter_of(c.params) for c in self.candidates
                 if key_of(c.params) in measured or key_of(c.params) in pending}
        tried |= {o.drafter for o in self.prior}
        for candidate in sorted(todo, key=_opening_rank):
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
        missed = self.misses(measured) if self.widen else {}

        def predict(model: StepCostModel, candidate: Candidate) -> Prediction | None:
            drafter = drafter_of(candidate.params)
            p = model.predict(drafter, k_of(candidate.params))
            return p.widened(missed[drafter]) if p is not None and drafter in missed else p

        scored = []
        for name, model, seen in views:
            bar = max((o.tokens_per_s for o in seen if o.feasible), default=0.0) * (1 + self.noise)
            for candidate in todo:
                p = predict(model, candidate)
                if p is None or p.upper(self.z) <= bar:  # beyond its drafter's trials, or implausible
                    continue
                gain = _expected_gain(p, bar)
                # Ranked relative to the bar, so that loads an order of magnitude apart compare.
                scored.append((gain / bar, p.tokens_per_s / bar, candidate, p, gain, bar, name))
        if not scored:
            return None
        _, _, candidate, p, gain, bar, name = max(scored, key=lambda s: s[:2])
        chance = _phi((p.tokens_per_s - bar) / max(p.sigma, 1e-9))
        overall = predict(views[0][1], candidate)
        if overall is not None:
            self.proposed[key_of(candidate.params)] = overall
        miss = missed.get(drafter_of(candidate.params))
        return Proposal(candidate, overall,
                        f"expected gain {gain:.0f} tok/s{name}; {chance:.0%} likely to beat the best "
                        f"measured{name} ({bar / (1 + self.noise):.0f} tok/s) by more than the noise "
                        f"({self.noise:.1%})" + (f"; uncertainty widened by {miss:.1%}: a trial of this drafter "
                                                 f"measured that much above its prediction's stated "
                                                 f"uncertainty" if miss else ""))


def _opening_rank(candidate: Candidate) -> int:
    method = candidate.params["method"]
    return OPENING_ORDER.index(method) if method in OPENING_ORDER else len(OPENING_ORDER)


def _by_load(observed: Sequence[Observation]) -> dict[str, list[Observation]]:
    """With two or more loads, each load's own observations (its tokens/s in place of the
    geometric mean): the best k at one batch size is not the best over all of them, and the
    k-by-batch-size schedule can only choose among measured configs."""
    loads = {load for o in observed for load, _ in o.by_load}
    if len(loads) < 2:
        return {}
    return {load: [replace(o, tokens_per_s=dict(o.by_load)[load], by_load=()) for o in observed
                   if load in dict(o.by_load)] for load in sorted(loads)}
