"""The Optuna study: ask for a configuration, measure it (tuner.measure.trial), tell the result, store it.

Each trial restarts a server, so the loop is ask/tell rather than ``study.optimize``. What to
ask for next is the strategy's proposer's business (``tuner.propose.proposers``: guided, the
default, by the step-cost model; tpe by Optuna's TPE; grid, everything); the loop only asks it.
Several workers share one study through Optuna's storage (``tuner.study.workers``).

A trial measures its config at every load of ``--concurrency 1,4,16`` on one server. Latency
targets (``--slo``) are Optuna constraints (``Trial.set_constraint``, which TPE honours).
Rerunning the same command resumes the study; a new study of a (model, workload type) that has
results starts from the previous best.
"""

from __future__ import annotations

import json
import math
import platform
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import optuna
from optuna.trial import TrialState

from tuner.engine import SpecConfig
from tuner.engine.installed import gpu_name
from tuner.engine.server import synthetic_text
from tuner.errors import RefusedAtStart, TunerError, UsageError
from tuner.replay import LoadSpec
from tuner.decide.answer import DEFAULT_NOISE, Answer, choose, pooled, trial_stats
from tuner.decide.output_check import NEAR_TIE_MARGIN, BaselineOutputs, compare_outputs, output_changed, worst
from tuner.propose.guided import DEFAULT_RUN_NOISE, key_of, observation
from tuner.propose.proposers import Proposer, QueueProposer, SamplerProposer, guided_proposer, to_rerun
from tuner.propose.predict import Observation
from tuner.decide.k_by_batch_size import (KByBatchSize, best_single, k_by_batch_size_beats_single,
                                          single_answer, single_stats, tune_k_by_batch_size)
from tuner.decide.slo import pareto_front
from tuner.plan.space import Candidate, SearchSpace
from tuner.plan.checks import check_same_origin, check_same_vllm
from tuner.plan.settings import OptimizeSettings, study_name
from tuner.study.time_limit import TimeLimit
from tuner.decide.verdict import StudyRules, Verdict, measured_loads, study_verdict
from tuner.study.workers import WAIT_S, fail_stale, has_waiting, heartbeat, heartbeats_on, pending_keys
from tuner.decide.stats import RepeatStats, geometric_mean
from tuner.store import NOT_MEASURED, ResultStore, RunOrigin, TrialRow, workload_hash
from tuner.measure.trial import MeasureSettings, Measurement, Progress, measure_config_at_loads
from tuner.workload import Workload

MAX_ERROR_RATE = 0.1  # more failed requests than this and the figures mean nothing
INTERRUPTED = "interrupted"
NOT_MEASURED_ATTR = "not_measured"  # user attr: the transient fault that kept a trial from being measured
NOT_STARTED_ATTR = "not_started"  # user attr: vLLM's refusal was known before a server start
# Servers one config is measured on at most: an undecided config gets one more start, whose
# replays are pooled with the first's (answer.pooled), when its own server's spread may be why.
MAX_STARTS = 2


@dataclass(frozen=True)
class StudyOutcome:
    """What one ``optimize`` call found: the answer per load and, over several concurrency
    levels, the best single config and the k-by-batch-size schedule with its own measurement."""

    study_name: str
    answers: dict[str, Answer]  # load label -> answer, in load order
    single: list[TrialRow] | None  # best single config, a row per load (several loads only)
    k_by_batch_size: KByBatchSize | None
    k_by_batch_size_rows: list[TrialRow] | None  # it, measured on the real server, per load
    restarts: int  # server starts this call spent
    verdict: Verdict  # what to deploy, as `tuner best` and the dashboard show it
    time_limit_reached: bool = False  # --time-limit refused a start: the same command goes on
    elapsed_s: float = 0.0  # this call's time from its start to its answer

    @property
    def answer(self) -> Answer:
        """The answer at the first load (the only one for a single-load study)."""
        return next(iter(self.answers.values()))


class StudyProgress(Progress, Protocol):
    def trial_started(self, number: int, label: str, done: int, budget: int) -> None: ...

    def trial_finished(self, row: TrialRow) -> None: ...


def make_sampler(options: OptimizeSettings) -> optuna.samplers.BaseSampler:
    """TPE for the tpe strategy; with the guided and grid strategies every trial is enqueued."""
    return optuna.samplers.TPESampler(seed=options.seed, multivariate=True, group=True,
                                      n_startup_trials=5)


def _close_stale_trials(study: optuna.Study, storage: optuna.storages.BaseStorage, store: ResultStore) -> None:
    """A trial still RUNNING was left by a process that died: mark it interrupted, to be rerun.
    On a database other hosts can share, only those whose heartbeat is stale are: live workers
    elsewhere may be measuring the rest, and ``fail_stale`` in the loop fails those that stop
    beating. (SQLite is one host's file, and its one creator alone runs there.)"""
    if heartbeats_on(storage) and not storage.url.startswith("sqlite"):
        fail_stale(study, store)
        return
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        study._storage.set_trial_user_attr(trial._trial_id, INTERRUPTED, True)
        study.tell(trial.number, state=TrialState.FAIL)
    store.mark_stale_running(study.study_name)


def _baseline_measured_elsewhere(candidates: Sequence[Candidate], measured: Collection[str],
                                 pending: Collection[str]) -> bool:
    """Whether another worker is measuring the baseline right now (it is the space's first)."""
    baseline = key_of(candidates[0].params)
    return candidates[0].spec is None and baseline in pending and baseline not in measured


def _baseline_failed(candidates: Sequence[Candidate], measured: dict[str, Observation | None]) -> bool:
    """Whether this study's baseline failed (in this run, or for good)."""
    baseline = key_of(candidates[0].params)
    return candidates[0].spec is None and baseline in measured and measured[baseline] is None


def _retry_next_run(t: optuna.trial.FrozenTrial) -> bool:
    """Not measured for the host's fault, or a failed baseline: rerun by the next run, not again
    by this one (a trial another worker took over is queued again and runs now)."""
    return to_rerun(t) and (NOT_MEASURED_ATTR in t.user_attrs or "failure_cause" in t.user_attrs)


def _measured(study: optuna.Study, not_measured: Collection[str] = ()) -> dict[str, Observation | None]:
    """Config key -> what its trial gave the guided model (None: it failed, do not retry).
    ``not_measured``: keys that met a transient fault in this run, not retried until the next."""
    measured: dict[str, Observation | None] = dict.fromkeys(not_measured)
    for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.FAIL)):
        if to_rerun(t):
            continue
        tps = t.user_attrs.get("tokens_per_s_geomean", t.user_attrs.get("tokens_per_s_median"))
        measured[key_of(t.params)] = (
            observation(t.params, tps, t.user_attrs.get("per_position"), t.user_attrs.get("feasible", True),
                        t.user_attrs.get("tokens_per_s_by_load"),
                        (t.user_attrs.get("predicted_tokens_per_s"), t.user_attrs.get("predicted_sigma")))
            if t.state == TrialState.COMPLETE and tps else None)
    return measured


def warm_start(store: ResultStore, model: str, workload_type: str, loads: Sequence[LoadSpec], name: str,
               candidates: Sequence[Candidate], noise: float,
               synthetic: str | None = None) -> tuple[list[Observation], list[Candidate]]:
    """From the latest other study of this (model, workload type) at the same load levels and the
    same acceptance (a what-if study's figures are its synthetic profile's, ``synthetic``: this
    run's): its observations with tokens/s relative to its own baseline (with several levels,
    the geometric mean of that ratio over them), and its winner (the best single config over the
    levels) if the winner is in this space."""
    labels = [load.label for load in loads]
    rows = [r for r in store.trials(model=model, workload_type=workload_type)
            if r.study_name != name and r.load in labels and r.kind == "study"]
    studies = [s for s in dict.fromkeys(r.study_name for r in reversed(rows))]
    by_config = {json.dumps(c.spec.to_vllm() if c.spec else None, sort_keys=True): c for c in candidates}
    stored_rules = store.study_rules()
    for previous in studies:
        if (stored_rules.get(previous) or {}).get("synthetic_acceptance") != synthetic:
            continue
        study_rows = [r for r in rows if r.study_name == previous]
        # Its winner under its own rules (latency targets, output rule, noise): the one it named.
        rules = StudyRules.from_stored(stored_rules.get(previous))
        its_noise = noise if rules.noise is None else rules.noise
        try:
            answers = [choose([r for r in study_rows if r.load == label], its_noise, rules.slos,
                              rules.max_output_change) for label in labels]
        except TunerError:  # no baseline at some level: measured at other levels, or failed
            continue
        bases = {label: answer.baseline.tokens_per_s for label, answer in zip(labels, answers)}  # > 0 (choose)
        by_trial: dict[int, dict[str, TrialRow]] = {}
        for r in study_rows:
            if r.status == "complete" and r.tokens_per_s:
                by_trial.setdefault(r.optuna_trial_number, {})[r.load] = r
        prior = []
        for at_load in by_trial.values():
            row = next(iter(at_load.values()))
            key = json.dumps(row.config, sort_keys=True)
            if row.config is not None and key in by_config and len(at_load) == len(labels):
                relative = geometric_mean([at_load[label].tokens_per_s / bases[label] for label in labels])
                prior.append(observation(by_config[key].params, relative, at_load[labels[0]].per_position))
        if len(labels) == 1:
            winner = answers[0].winner.config if answers[0].winner else None
        else:
            single = best_single(study_rows, loads, rules.slos, rules.max_output_change, its_noise)
            winner = single[0].config if single else None
        first = by_config.get(json.dumps(winner, sort_keys=True))
        return prior, [first] if first is not None and first.spec is not None else []
    return [], []


def _proposer(options: OptimizeSettings, study: optuna.Study, candidates: Sequence[Candidate],
              store: ResultStore, model: str, workload_type: str, loads: Sequence[LoadSpec],
              name: str, synthetic: str | None = None) -> Proposer:
    """The strategy's proposer, set up on what the study holds already."""
    measured = _measured(study)
    if options.strategy == "grid":
        return QueueProposer(study, candidates, measured)
    if options.strategy == "tpe":
        return SamplerProposer(study, candidates, measured)
    prior, first = ([], [])
    if options.warm_start and not measured and not options.join:
        prior, first = warm_start(store, model, workload_type, loads, name, candidates, options.noise, synthetic)

    def spreads() -> tuple[list[float], list[int]]:
        rows = [r for r in store.trials(study_name=name)
                if r.repeats > 1 and r.tokens_per_s and r.tokens_per_s_mad is not None]
        return [r.tokens_per_s_mad / r.tokens_per_s for r in rows], [r.repeats for r in rows]

    return guided_proposer(study, candidates, measured, options.z, prior, first, spreads)


def optimize(
    model: str, workload: Workload, space: SearchSpace, settings: MeasureSettings,
    store: ResultStore, storage: optuna.storages.BaseStorage, options: OptimizeSettings,
    progress: StudyProgress, on_ready: Callable[[], object] | None = None,
    measure: Callable[..., list[Measurement]] | None = None, began: float | None = None,
    request: dict | None = None,
) -> StudyOutcome:
    """``on_ready``: called once the study is set up (stale trials closed), before the first
    trial: `tuner optimize --workers N` starts its other workers there, not earlier, so that
    their first trials are not taken for leftovers of a dead run. ``measure``: what measures a
    config at the loads (``measure_config_at_loads``, the real server); the search benchmark
    passes one that draws from a stored table, so it runs this very loop. ``began``: when the
    command started (``time.monotonic``), which --time-limit counts from; default now.
    ``request``: the study's request as JSON, kept with this run (tuner/plan/request.py)."""
    measure = measure or measure_config_at_loads
    name = options.name or study_name(model, workload.type, settings.loads_label)
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize",
                                sampler=make_sampler(options), load_if_exists=True)
    if not options.join:  # alone on the study: whatever is still running was left by a dead run
        _close_stale_trials(study, storage, store)
    candidates = space.candidates()
    # A resume (or a helper joining) measures where the study's figures were measured, or not at all.
    origins, here = store.measured_origins(name), platform.node()
    gpu = gpu_name()
    check_same_origin(origins, RunOrigin(here, gpu, None, workload_hash(Path(workload.path)), Path(workload.path).name),
                      options.join)
    proposer = _proposer(options, study, candidates, store, model, workload.type, settings.loads, name,
                         synthetic_text(settings.server.synthetic_acceptance))
    run_id = store.start_run(
        study_name=name, model=model, workload=workload, space=space.to_dict(),
        load=settings.loads_label, server_args=list(settings.server.server_args),
        host=here, gpu_name=gpu, deploy_args=list(options.deploy_args))
    store.set_run_fields(run_id, strategy=options.strategy, slos=[s.text for s in options.slos] or None,
                         max_output_change=options.max_output_change,
                         allow_output_change=options.allow_output_change,
                         synthetic_acceptance=synthetic_text(settings.server.synthetic_acceptance),
                         noise=options.noise, request=request)
    if on_ready is not None:
        on_ready()
    vllm_version, duplicates, status, restarts = None, 0, "interrupted", 0
    not_measured: set[str] = set()  # met a transient fault in this run: the next run retries
    starts_per_trial = settings.repeats if settings.repeat_mode == "fresh-server" else 1
    budget = min(options.trials, len(candidates))
    time_limit = TimeLimit(options.time_limit_s, began=began)
    try:
        while True:
            # Other workers' trials count against the budget, and while any runs this worker
            # waits rather than stops: its result changes what is worth measuring, and if its
            # worker dies the trial comes back to be run again.
            fail_stale(study, store)
            measured, pending = _measured(study, not_measured), pending_keys(study)
            if _baseline_failed(candidates, measured):
                # Nothing could be compared with it or checked against its greedy output: the
                # next run measures the baseline first (the verdict says so), then the configs.
                break
            done = len(measured) + len(pending) >= budget
            if not done and not has_waiting(study):
                done = not proposer.enqueue_next(study, measured, pending, not_measured)
            if done:
                if not pending:
                    break
                time.sleep(WAIT_S)
                continue
            if _baseline_measured_elsewhere(candidates, measured, pending):
                # Every config's greedy output is checked against the baseline's, which exists
                # once its trial is complete: a helper worker waits for it (issue 33).
                time.sleep(WAIT_S)
                continue
            if not time_limit.allows_start():
                break
            trial = study.ask()
            candidate = space.suggest(trial)
            if candidate.spec is not None and measured.get(key_of(candidates[0].params)) is None:
                # The baseline comes first, whatever an earlier run left queued before it (an
                # interrupted or failed baseline): this config goes back to the end of the queue.
                study.tell(trial, state=TrialState.PRUNED)
                study.enqueue_trial(candidate.params, user_attrs=trial.user_attrs)
                continue
            proposer.taken(candidate)
            if key_of(candidate.params) in measured or key_of(candidate.params) in pending_keys(study, trial.number):
                # Measured already, or another worker measures it now: a restart would teach nothing.
                study.tell(trial, state=TrialState.PRUNED)
                duplicates += 1
                if duplicates > 20 * len(candidates):
                    break
                continue
            with heartbeat(storage, trial), time_limit.trial():
                try:
                    measurements = _run_trial(study, trial, candidate, model, workload, settings, store,
                                              run_id, progress, (len(measured), budget), options, measure,
                                              origins)
                except optuna.exceptions.UpdateFinishedTrialError:  # taken over while it ran
                    progress.phase(TAKEN_OVER.format(number=trial.number))
                    measurements = None
            ended = study._storage.get_trial(trial._trial_id)
            if ended.user_attrs.get(NOT_STARTED_ATTR):
                # vLLM's refusal was known before a start: no start spent, so none is taken
                # from the budget either.
                budget = min(budget + 1, len(candidates))
            else:
                restarts += starts_per_trial
            if _retry_next_run(ended):
                not_measured.add(key_of(candidate.params))
            if measurements:
                vllm_version = measurements[0].server.vllm_version or vllm_version
            rows = [r for r in store.trials(study_name=name) if r.optuna_trial_number == trial.number]
            for row in rows:
                progress.trial_finished(row)
            _store_pareto(store, run_id, name)
        if settings.max_repeats is not None and not options.join:  # the creator alone settles
            restarts += starts_per_trial * _settle_undecided(
                name, model, workload, settings, store, run_id, progress, measure, options,
                len(_measured(study, not_measured)), time_limit)
        k_by_batch_size, k_by_batch_size_rows, single = None, None, None
        if len(settings.loads) > 1 and not options.join:  # the creator alone measures k by batch size
            k_by_batch_size, k_by_batch_size_rows, single = _k_by_batch_size(
                name, model, workload, settings, store, run_id, progress, measure, options, time_limit)
            if k_by_batch_size is not None and k_by_batch_size.needs_own_server and not time_limit.reached:
                # its own server was started
                restarts += starts_per_trial
        status = "finished"
    finally:
        store.finish_run(run_id, status, vllm_version)
    rows = store.trials(study_name=name)
    verdict = study_verdict(rows, StudyRules.from_stored(store.study_rules(name).get(name)), options.noise)
    answers = {load.label: verdict.answers[load.label] for load in settings.loads}
    return StudyOutcome(name, answers, single, k_by_batch_size, k_by_batch_size_rows, restarts, verdict,
                        time_limit.reached, time_limit.elapsed_s())


def _k_by_batch_size(name: str, model: str, workload: Workload, settings: MeasureSettings, store: ResultStore,
                     run_id: int, progress: StudyProgress, measure, options: OptimizeSettings,
                     time_limit: TimeLimit):
    """Over several concurrency levels: the best single config, the k-by-batch-size schedule
    tuned from the study's rows and that table measured on its own server, all stored with
    the run, unless --time-limit leaves no time for its server. (k by batch size, its rows,
    the best single config's rows)."""
    rows = store.trials(study_name=name)
    single = best_single(rows, settings.loads, options.slos, options.output_rule, options.noise)
    k_by_batch_size = tune_k_by_batch_size(rows, settings.loads, options.noise, options.slos,
                                           options.output_rule)
    measured = None
    if k_by_batch_size is not None and k_by_batch_size.needs_own_server and time_limit.allows_start():
        with time_limit.trial():
            measured = _measure_k_by_batch_size(k_by_batch_size, name, model, workload, settings, store,
                                                run_id, progress, measure, options.noise,
                                                options.near_tie_margin)
    store.set_run_fields(run_id, k_by_batch_size=_k_by_batch_size_record(k_by_batch_size, measured, single,
                                                                         options.noise))
    return k_by_batch_size, measured, single


def _to_start_again(rows: Sequence[TrialRow], options: OptimizeSettings,
                    tried: Collection[str]) -> tuple[TrialRow, str] | None:
    """Of the configs left undecided against a load's winner (``Answer.undecided``), winner
    included, the one whose tokens/s is known least well (standard error over median), started
    fewer than MAX_STARTS times and not tried already; with why, in words."""
    found = []

    def consider(winner: TrialRow, undecided: Sequence[TrialRow], stats: Callable[[TrialRow], RepeatStats],
                 where: str) -> None:
        for row in (winner, *undecided):
            if row.starts < MAX_STARTS and json.dumps(row.config, sort_keys=True) not in tried:
                other = winner if row is not winner else undecided[0]
                s = stats(row)
                found.append((s.mad / math.sqrt(max(s.n, 1)) / s.median if s.median > 0 else math.inf, row,
                              f"undecided against {other.label} {where}"))

    loads = measured_loads(rows)
    for load in loads:
        answer = choose([r for r in rows if r.load == load], options.noise, options.slos, options.output_rule)
        if answer.undecided and answer.winner is not None:
            consider(answer.winner, answer.undecided, trial_stats, f"at {load}")
    single = single_answer(rows, loads, options.slos, options.output_rule, options.noise) if len(loads) > 1 else None
    if single is not None and single.undecided:
        by_first = {id(c[0]): c for c in (single.rows, *single.undecided)}
        consider(single.rows[0], [c[0] for c in single.undecided], lambda r: single_stats(by_first[id(r)]),
                 f"over {','.join(loads)}")
    if not found:
        return None
    _, row, why = max(found, key=lambda f: f[0])
    return row, why


def _settle_undecided(name: str, model: str, workload: Workload, settings: MeasureSettings,
                      store: ResultStore, run_id: int, progress: StudyProgress, measure,
                      options: OptimizeSettings, measured: int, time_limit: TimeLimit) -> int:
    """Measure again what decides: while a load's winner and a contender are neither separated
    nor shown equal, start the less well known of them once more (its replays pooled with its
    first start's), as long as the study's --trials and --time-limit allow a start; returns the
    starts spent.
    Only with --max-repeats: a trial's own replays were not enough, so the spread between its
    servers may be the cause (on the H200 a server's tokens/s climbed over its first minute)."""
    spent, tried = 0, set()
    while True:
        rows = store.trials(study_name=name)
        # A second start measures its config at every load: it counts once against --trials.
        second_starts = sum({r.optuna_trial_number: r.starts - 1 for r in pooled(rows) if r.kind == "study"}.values())
        if measured + second_starts >= options.trials or not time_limit.allows_start():
            return spent
        pick = _to_start_again(rows, options, tried)
        if pick is None:
            return spent
        row, why = pick
        tried.add(json.dumps(row.config, sort_keys=True))
        spec = SpecConfig.from_vllm(row.config) if row.config is not None else None
        trial_id = store.start_trial(run_id, row.optuna_trial_number, row.config, row.label,
                                     reason=f"second start: {why}")
        spent += 1
        try:
            progress.trial_started(row.optuna_trial_number, f"{row.label} again ({why})",
                                   measured + second_starts, options.trials)
            with time_limit.trial():
                measurements = measure(model, spec, workload, _with_reach(settings, store, name), progress)
        except KeyboardInterrupt:
            store.end_trial(trial_id, "interrupted", "interrupted by the user (Ctrl-C or SIGTERM)")
            raise
        except TunerError as exc:
            log_path = getattr(exc, "log_path", None)
            store.end_trial(trial_id, NOT_MEASURED if exc.transient else "failed", str(exc),
                            str(log_path) if log_path else None)
            continue
        _store_measurements(store, trial_id, name, measurements, options.noise, options.output_rule,
                            options.near_tie_margin)
        if failed := _too_many_failed(measurements):
            store.end_trial(trial_id, "failed", failed)
        same = [r for r in store.trials(study_name=name) if r.optuna_trial_number == row.optuna_trial_number]
        for r in same[-len(measurements):]:
            progress.trial_finished(r)


def _store_pareto(store: ResultStore, run_id: int, name: str) -> None:
    rows = store.trials(study_name=name)
    fronts = {}
    for load in measured_loads(rows):
        fronts[load] = [{"trial": r.optuna_trial_number, "label": r.label, "tokens_per_s": r.tokens_per_s,
                         "tpot_p99_s": r.tpot_p99_s}
                        for r in pareto_front([r for r in rows if r.load == load and r.kind == "study"])]
    store.set_run_fields(run_id, pareto_front=fronts)


def _k_by_batch_size_record(k_by_batch_size: KByBatchSize | None, rows: list[TrialRow] | None,
                            single: list[TrialRow] | None, noise: float = DEFAULT_NOISE) -> dict | None:
    if k_by_batch_size is None:
        return None
    return {**k_by_batch_size.to_dict(),
            "measured_tokens_per_s": {r.load: r.tokens_per_s for r in rows or []},
            "k_applied": {r.load: r.k_applied for r in rows or []},
            "best_single": {"label": single[0].label, "config": single[0].config,
                            "tokens_per_s": {r.load: r.tokens_per_s for r in single}} if single else None,
            "beats_best_single": k_by_batch_size_beats_single(rows, single, noise)}


def _measure_k_by_batch_size(k_by_batch_size: KByBatchSize, name: str, model: str, workload: Workload,
                             settings: MeasureSettings, store: ResultStore, run_id: int,
                             progress: StudyProgress, measure, noise: float,
                             near_tie_margin: float = NEAR_TIE_MARGIN) -> list[TrialRow] | None:
    """The k by batch size on the real server at every load, stored as a trial of kind
    'k_by_batch_size'."""
    spec = SpecConfig.from_vllm(k_by_batch_size.config())
    label = f"{spec.method} k by batch size {k_by_batch_size.ranges}"
    trial_id = store.start_trial(run_id, -1, spec.to_vllm(), label, kind="k_by_batch_size")
    try:
        progress.trial_started(-1, label, 0, 1)
        measurements = measure(model, spec, workload, settings, progress)
    except KeyboardInterrupt:
        store.end_trial(trial_id, "interrupted", "interrupted by the user (Ctrl-C or SIGTERM)")
        raise
    except TunerError as exc:
        # A fault of the host says nothing of the schedule: not measured, as for any trial.
        store.end_trial(trial_id, NOT_MEASURED if exc.transient else "failed", str(exc),
                        getattr(exc, "log_path", None) and str(exc.log_path))
        return None
    _store_measurements(store, trial_id, name, measurements, noise, near_tie_margin=near_tie_margin)
    if failed := _too_many_failed(measurements):
        store.end_trial(trial_id, "failed", failed)  # its figures mean nothing, as for any trial
        return None
    return [r for r in store.trials(study_name=name) if r.kind == "k_by_batch_size"][-len(measurements):]


def _too_many_failed(measurements: Sequence[Measurement]) -> str | None:
    """The failure cause when some load's replay lost more than MAX_ERROR_RATE of its requests."""
    failed = [m.summary for m in measurements if m.summary.failed > MAX_ERROR_RATE * m.summary.requests]
    if not failed:
        return None
    s = failed[0]
    return f"{s.failed} of {s.requests} requests failed ({'; '.join(s.errors)})"


def _with_reach(settings: MeasureSettings, store: ResultStore, name: str) -> MeasureSettings:
    """``settings`` with, at each load, the tokens/s a config must be able to reach to still be
    chosen there: the best score measured so far less the run noise that ties configs
    (``choose``). Only with --max-repeats: without it every trial takes ``repeats`` replays."""
    if settings.max_repeats is None:
        return settings
    best: dict[str, float] = {}
    for row in store.trials(study_name=name):
        if row.status == "complete" and row.tokens_per_s and row.kind == "study":
            best[row.load] = max(best.get(row.load, 0.0), trial_stats(row).score)
    return replace(settings, out_of_reach={load: value * (1 - DEFAULT_RUN_NOISE) for load, value in best.items()})


def _run_trial(study, trial, candidate, model, workload, settings, store, run_id, progress,
               position: tuple[int, int], options: OptimizeSettings, measure,
               origins: Sequence[RunOrigin] = ()) -> list[Measurement] | None:
    config = candidate.spec.to_vllm() if candidate.spec else None
    trial.set_user_attr("config", config)
    predicted = trial.user_attrs.get("predicted_tokens_per_s")
    trial_id = store.start_trial(
        run_id, trial.number, config, candidate.label,
        predicted=(predicted, trial.user_attrs["predicted_sigma"]) if predicted is not None else None,
        reason=trial.user_attrs.get("proposal_reason"))
    try:
        progress.trial_started(trial.number, candidate.label, *position)
        measurements = measure(model, candidate.spec, workload, _with_reach(settings, store, study.study_name),
                               progress)
        # Only its server says which vLLM ran (a --server-cmd may start another than the installed one).
        check_same_vllm(origins, measurements[0].server.vllm_version if measurements else None)
        _check_not_taken_over(study, trial)
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
        _check_not_taken_over(study, trial)
        # A transient fault (tried again already) says nothing of the config: not measured,
        # and rerun by the next run. Any other failure is the config's own result.
        trial.set_user_attr(NOT_MEASURED_ATTR if exc.transient else "failure_cause", str(exc))
        if isinstance(exc, RefusedAtStart):
            trial.set_user_attr(NOT_STARTED_ATTR, True)
        study.tell(trial, state=TrialState.FAIL)
        log_path = getattr(exc, "log_path", None)
        store.end_trial(trial_id, NOT_MEASURED if exc.transient else "failed", str(exc),
                        str(log_path) if log_path else None)
        return None
    changed_output = _store_measurements(store, trial_id, study.study_name, measurements, options.noise,
                                         options.output_rule, options.near_tie_margin)
    if cause := _too_many_failed(measurements):
        trial.set_user_attr("failure_cause", cause)
        study.tell(trial, state=TrialState.FAIL)
        store.end_trial(trial_id, "failed", cause)
        return measurements
    rows = [r for r in store.trials(study_name=study.study_name) if r.optuna_trial_number == trial.number
            and r.status == "complete"]
    violations = [max(slo.violation(r) for r in rows) for slo in options.slos]
    for slo, violation in zip(options.slos, violations):
        trial.set_constraint(slo.text, violation)  # > 0: infeasible, whatever its tokens/s
    first = measurements[0]
    geomean = geometric_mean([max(m.tokens_per_s.median, 1e-9) for m in measurements])
    score = geometric_mean([max(m.tokens_per_s.score, 1e-9) for m in measurements])
    for attr, value in (("tpot_p50_s", first.summary.tpot.p50 if first.summary.tpot else None),
                        ("ttft_p50_s", first.summary.ttft.p50 if first.summary.ttft else None),
                        ("acceptance_rate", first.acceptance.acceptance_rate if first.acceptance else None),
                        ("mean_acceptance_length",
                         first.acceptance.mean_acceptance_length if first.acceptance else None),
                        ("per_position", list(first.acceptance.per_position) if first.acceptance else None),
                        ("server_log", first.server.log_path),
                        ("tokens_per_s_median", first.tokens_per_s.median),
                        ("tokens_per_s_mad", first.tokens_per_s.mad),
                        ("tokens_per_s_geomean", geomean),
                        ("tokens_per_s_by_load", {m.load: m.tokens_per_s.median for m in measurements}),
                        ("feasible", all(v <= 0 for v in violations) and not changed_output)):
        trial.set_user_attr(attr, value)
    # The conservative score the winner is chosen on (geometric mean over the loads).
    study.tell(trial, score)
    return measurements


TAKEN_OVER = ("trial {number} was finished by another worker (this worker's heartbeats looked "
              "stale) while it was measured here; its figures are dropped, and this worker takes "
              "the next trial")


def _check_not_taken_over(study: optuna.Study, trial: optuna.Trial) -> None:
    """Raises what Optuna raises on telling a finished trial if another worker failed this one
    as stale (and queued it again) while it ran here; the study loop says TAKEN_OVER."""
    if study._storage.get_trial(trial._trial_id).state.is_finished():
        raise optuna.exceptions.UpdateFinishedTrialError(f"trial {trial.number} is already finished")


def _store_measurements(store: ResultStore, trial_id: int, name: str, measurements: Sequence[Measurement],
                        noise: float, output_rule: float | None = 0.0,
                        near_tie_margin: float = NEAR_TIE_MARGIN) -> bool:
    """Store each load's figures with every run's greedy output checked against the baseline's;
    returns whether the output really changed (near-ties aside) beyond ``output_rule`` at some load."""
    changed = False
    for m in measurements:
        stored = store.baseline_outputs(name, m.load) if m.spec is not None else None
        baseline = BaselineOutputs(*stored) if stored else None
        checks = [compare_outputs(baseline, run.requests, near_tie_margin) if baseline else None
                  for run in m.runs]
        trial_check = worst(checks)
        changed |= (output_rule is not None and trial_check is not None
                    and output_changed(trial_check.change_rate, output_rule))
        store.complete_trial(trial_id, m, checks, trial_check, noise)
    return changed
