"""What a study measures next: one small interface, one implementation per strategy.

The study loop (``tuner.study.loop.optimize``) asks its proposer, before each trial, to put the
next configuration in the Optuna study's queue, and tells it which configuration a trial took.
It never asks which strategy it runs:

- ``GuidedProposer`` (``guided``): the step-cost model's next config, enqueued one at a time,
  with why and what it expects; stops when no config is plausibly better than the best measured;
- ``QueueProposer`` (``grid``): every config enqueued up front; stops when the queue is empty;
- ``SamplerProposer`` (``tpe``): the baseline (and configs to rerun) enqueued, then Optuna's
  sampler chooses; stops only at the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Protocol

import optuna
from optuna.trial import TrialState

from tuner.propose.guided import DEFAULT_RUN_NOISE, GuidedSearch, key_of, mean_noise
from tuner.propose.predict import Observation
from tuner.plan.space import Candidate

Measured = dict[str, Observation | None]  # config key -> what its trial gave (None: failed)


class Proposer(Protocol):
    def enqueue_next(self, study: optuna.Study, measured: Measured, pending: set[str],
                     not_measured: Collection[str]) -> bool:
        """Queue the next config in ``study`` (or leave the choice to its sampler); False: stop,
        nothing more is worth a server restart."""

    def taken(self, candidate: Candidate) -> None:
        """A trial took ``candidate``."""


def to_rerun(t: optuna.trial.FrozenTrial) -> bool:
    """Failed without a cause of its own (interrupted, its worker died, a transient fault: not
    measured), or the baseline failed, which every answer needs: run it again."""
    return t.state == TrialState.FAIL and ("failure_cause" not in t.user_attrs
                                           or t.params.get("method") == "off")


def reruns(study: optuna.Study, candidates: Sequence[Candidate], measured: Measured) -> list[Candidate]:
    """Configs an earlier run could not measure (interrupted, a host fault, a failed baseline)."""
    again = {key_of(t.params) for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
             if to_rerun(t) and key_of(t.params) not in measured}
    return [c for c in candidates if key_of(c.params) in again]


def _enqueue_once(study: optuna.Study, queue: Sequence[Candidate]) -> None:
    waiting = {key_of(t.system_attrs.get("fixed_params", {}))
               for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))}
    for candidate in queue:
        if key_of(candidate.params) not in waiting:  # left enqueued by an interrupted run
            study.enqueue_trial(candidate.params)


class QueueProposer:
    """Configs to rerun, then every config not yet measured, all enqueued up front (grid)."""

    def __init__(self, study: optuna.Study, candidates: Sequence[Candidate], measured: Measured):
        queue = reruns(study, candidates, measured)
        self.queue = queue + [c for c in candidates if key_of(c.params) not in measured and c not in queue]
        _enqueue_once(study, self.queue)

    def enqueue_next(self, study, measured, pending, not_measured) -> bool:
        return bool(self.queue)

    def taken(self, candidate: Candidate) -> None:
        self.queue = [c for c in self.queue if c.params != candidate.params]


class SamplerProposer:
    """Configs to rerun and the baseline first, then whatever the study's sampler draws (tpe)."""

    def __init__(self, study: optuna.Study, candidates: Sequence[Candidate], measured: Measured):
        queue = reruns(study, candidates, measured)
        baseline = candidates[0]
        if key_of(baseline.params) not in measured and baseline not in queue:
            queue.insert(0, baseline)  # the baseline is always measured first
        _enqueue_once(study, queue)

    def enqueue_next(self, study, measured, pending, not_measured) -> bool:
        return True

    def taken(self, candidate: Candidate) -> None:
        pass


class GuidedProposer:
    """The step-cost model's next config (``tuner.propose.guided``), with its reason and
    prediction as trial attributes. ``spreads``: (relative MAD, repeats) of the measured runs,
    from which the run-to-run noise is estimated before each proposal."""

    def __init__(self, search: GuidedSearch, spreads: Callable[[], tuple[list[float], list[int]]]):
        self.search = search
        self.spreads = spreads

    def enqueue_next(self, study, measured, pending, not_measured) -> bool:
        self.search.noise = mean_noise(*self.spreads())
        proposal = self.search.propose({k: o for k, o in measured.items() if k not in not_measured},
                                       pending, not_measured)
        if proposal is None:
            return False
        attrs = {"proposal_reason": proposal.reason}
        if proposal.prediction is not None:
            attrs |= {"predicted_tokens_per_s": proposal.prediction.tokens_per_s,
                      "predicted_sigma": proposal.prediction.sigma}
        study.enqueue_trial(proposal.candidate.params, user_attrs=attrs)
        return True

    def taken(self, candidate: Candidate) -> None:
        pass


def guided_proposer(study: optuna.Study, candidates: Sequence[Candidate], measured: Measured, z: float,
                    prior: Sequence[Observation], first: Sequence[Candidate],
                    spreads: Callable[[], tuple[list[float], list[int]]]) -> GuidedProposer:
    search = GuidedSearch(candidates, DEFAULT_RUN_NOISE, z, prior=prior, first=first,
                          rerun=reruns(study, candidates, measured))
    return GuidedProposer(search, spreads)
