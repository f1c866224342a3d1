"""The Optuna study: ask for a configuration, measure it (tuner.trial), tell the result, store it.

Each trial restarts a server, so the loop is ask/tell rather than ``study.optimize``. When the
whole space fits the trial budget every configuration is enqueued (baseline first); otherwise
TPE draws from the conditional space. Rerunning the same command resumes the study.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import optuna
from optuna.trial import TrialState

from tuner.engine.installed import gpu_name
from tuner.errors import TunerError, UsageError
from tuner.search.answer import DEFAULT_NOISE, Answer, choose
from tuner.search.space import Candidate, SearchSpace
from tuner.store import ResultStore, TrialRow
from tuner.trial import MeasureSettings, Measurement, Progress, measure_config
from tuner.workload import Workload

MAX_ERROR_RATE = 0.1  # more failed requests than this and the figures mean nothing
INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class OptimizeSettings:
    trials: int = 20  # measured configurations in the study, baseline included
    noise: float = DEFAULT_NOISE
    seed: int = 0


class StudyProgress(Progress, Protocol):
    def trial_started(self, number: int, label: str, done: int, budget: int) -> None: ...

    def trial_finished(self, row: TrialRow) -> None: ...


def study_name(model: str, workload_type: str, load_label: str) -> str:
    return f"{model} | {workload_type} | {load_label}"


def _key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def _close_stale_trials(study: optuna.Study) -> None:
    """A trial still RUNNING was left by a process that died: mark it interrupted, to be rerun."""
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_user_attr(trial._trial_id, INTERRUPTED, True)
        study.tell(trial.number, state=TrialState.FAIL)


def _plan(study: optuna.Study, candidates: Sequence[Candidate], budget: int) -> tuple[set[str], list[Candidate], bool]:
    """(configs already measured, configs to enqueue in order, whether the space is exhausted by them)."""
    measured, interrupted = set(), []
    for t in study.get_trials(deepcopy=False):
        if t.state == TrialState.COMPLETE or (t.state == TrialState.FAIL and not t.user_attrs.get(INTERRUPTED)):
            measured.add(_key(t.params))
    for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
        if t.user_attrs.get(INTERRUPTED) and _key(t.params) not in measured:
            interrupted.append(_key(t.params))
    by_key = {_key(c.params): c for c in candidates}
    queue = [by_key[k] for k in dict.fromkeys(interrupted) if k in by_key]
    exhaustive = len(candidates) <= budget
    baseline = candidates[0]
    rest = [c for c in candidates if _key(c.params) not in measured and c not in queue]
    if exhaustive:
        queue += rest
    elif _key(baseline.params) not in measured and baseline not in queue:
        queue.insert(0, baseline)  # the baseline is always measured first
    return measured, queue, exhaustive


def optimize(
    model: str, workload: Workload, space: SearchSpace, settings: MeasureSettings,
    store: ResultStore, storage: optuna.storages.BaseStorage, options: OptimizeSettings,
    progress: StudyProgress,
) -> Answer:
    name = study_name(model, workload.type, settings.load.label)
    sampler = optuna.samplers.TPESampler(seed=options.seed, multivariate=True, group=True,
                                         n_startup_trials=5)
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize",
                                sampler=sampler, load_if_exists=True)
    _close_stale_trials(study)
    store.mark_stale_running(name)
    candidates = space.candidates()
    measured, queue, exhaustive = _plan(study, candidates, options.trials)
    waiting = {_key(t.system_attrs.get("fixed_params", {}))
               for t in study.get_trials(deepcopy=False, states=(TrialState.WAITING,))}
    for candidate in queue:
        if _key(candidate.params) not in waiting:  # left enqueued by an interrupted run
            study.enqueue_trial(candidate.params)
    run_id = store.start_run(
        study_name=name, model=model, workload=workload, space=space.to_dict(),
        load=settings.load.label, server_args=list(settings.server.server_args),
        host=platform.node(), gpu_name=gpu_name())
    vllm_version, duplicates, status = None, 0, "interrupted"
    try:
        budget = min(options.trials, len(candidates))
        while len(measured) < budget and (queue or not exhaustive):
            trial = study.ask()
            candidate = space.suggest(trial)
            queue = [c for c in queue if c.params != candidate.params]
            if _key(candidate.params) in measured:
                # TPE proposed a config already measured: nothing new to learn from a restart.
                study.tell(trial, state=TrialState.PRUNED)
                duplicates += 1
                if duplicates > 20 * len(candidates):
                    break
                continue
            measurement = _run_trial(study, trial, candidate, model, workload, settings, store,
                                     run_id, progress, (len(measured), budget))
            measured.add(_key(candidate.params))
            if measurement is not None:
                vllm_version = measurement.server.vllm_version or vllm_version
            rows = store.trials(study_name=name)
            progress.trial_finished(next(r for r in reversed(rows) if r.optuna_trial_number == trial.number))
        status = "finished"
    finally:
        store.finish_run(run_id, status, vllm_version)
    return choose(store.trials(study_name=name), options.noise)


def _run_trial(study, trial, candidate, model, workload, settings, store, run_id, progress,
               position: tuple[int, int]) -> Measurement | None:
    config = candidate.spec.to_vllm() if candidate.spec else None
    trial.set_user_attr("config", config)
    trial_id = store.start_trial(run_id, trial.number, config, candidate.label)
    try:
        progress.trial_started(trial.number, candidate.label, *position)
        m = measure_config(model, candidate.spec, workload, settings, progress)
    except KeyboardInterrupt:
        trial.set_user_attr(INTERRUPTED, True)
        study.tell(trial, state=TrialState.FAIL)
        store.end_trial(trial_id, "interrupted", "interrupted by the user (Ctrl-C or SIGTERM)")
        raise
    except UsageError:
        # The user's setup, not this config, is wrong: stop, and let a rerun retry this trial.
        trial.set_user_attr(INTERRUPTED, True)
        study.tell(trial, state=TrialState.FAIL)
        store.end_trial(trial_id, "interrupted", "stopped by a usage error")
        raise
    except TunerError as exc:
        trial.set_user_attr("failure_cause", str(exc))
        study.tell(trial, state=TrialState.FAIL)
        log_path = getattr(exc, "log_path", None)
        store.end_trial(trial_id, "failed", str(exc), str(log_path) if log_path else None)
        return None
    match = None
    if candidate.spec is not None and (baseline := store.baseline_digests(study.study_name)):
        match = greedy_match_rate(baseline, m.runs[0].requests)
    store.complete_trial(trial_id, m, match)
    s = m.summary
    if s.failed > MAX_ERROR_RATE * s.requests:
        cause = f"{s.failed} of {s.requests} requests failed ({'; '.join(s.errors)})"
        trial.set_user_attr("failure_cause", cause)
        study.tell(trial, state=TrialState.FAIL)
        store.end_trial(trial_id, "failed", cause)
        return m
    for attr, value in (("tpot_p50_s", s.tpot.p50 if s.tpot else None),
                        ("ttft_p50_s", s.ttft.p50 if s.ttft else None),
                        ("acceptance_rate", m.acceptance.acceptance_rate if m.acceptance else None),
                        ("mean_acceptance_length",
                         m.acceptance.mean_acceptance_length if m.acceptance else None),
                        ("server_log", m.server.log_path),
                        ("tokens_per_s_median", m.tokens_per_s.median),
                        ("tokens_per_s_mad", m.tokens_per_s.mad),
                        ("greedy_match_rate", match)):
        trial.set_user_attr(attr, value)
    study.tell(trial, m.tokens_per_s.score)  # the conservative score the winner is chosen on
    return m


def greedy_match_rate(baseline: dict[str, str], requests) -> float | None:
    """Share of greedy requests whose text equals the baseline's: speculative decoding must not
    change greedy output, so anything below 1 is flagged."""
    pairs = [(r.text_digest, baseline[r.request_id]) for r in requests
             if r.ok and r.greedy and r.text_digest and r.request_id in baseline]
    if not pairs:
        return None
    return sum(a == b for a, b in pairs) / len(pairs)
