"""Several workers on one study: Optuna's heartbeats on running trials, stale ones failed and
queued again, and what the other workers are measuring right now. The worker processes
themselves are started in ``tuner.study.processes`` (this room starts no processes).

Every worker runs the same loop (`tuner.study.loop.optimize`) on the shared RDB study; Optuna
hands each waiting trial to exactly one of them. A worker that dies stops sending heartbeats;
the next worker to look fails its trial (Optuna's ``fail_stale_trials``), Optuna's
RetryHeartbeatStaleTrialCallback queues it again, and the trial is run once more.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import warnings
from collections.abc import Iterator

import optuna
from optuna.trial import TrialState

from tuner.plan.request import StudyRequest
from tuner.propose.guided import key_of
from tuner.store import ResultStore

log = logging.getLogger("tuner.study")
WAIT_S = 5.0  # between looks at the study while other workers' trials decide what comes next
STALE_CAUSE = "its worker stopped sending heartbeats (killed or cut off); the trial is queued again"


def heartbeats_on(storage: optuna.storages.BaseStorage) -> bool:
    return isinstance(storage, optuna.storages.RDBStorage) and bool(storage.get_heartbeat_interval())


@contextlib.contextmanager
def heartbeat(storage: optuna.storages.BaseStorage, trial: optuna.Trial) -> Iterator[None]:
    """Record the trial's heartbeat while it runs (Optuna only does so inside study.optimize).
    A failed beat (the database briefly out of reach) is logged and the next one tried: the
    measurement goes on, and if the beats stay away long enough another worker takes over."""
    if not heartbeats_on(storage):
        yield
        return
    interval = storage.get_heartbeat_interval()
    stop = threading.Event()

    def beat() -> None:
        failing = False
        while True:
            try:
                storage.record_heartbeat(trial._trial_id)
                failing = False
            except Exception as exc:  # noqa: BLE001 - a thread's exception would only be printed
                if not failing:
                    log.warning("could not record the heartbeat of trial %d (%s); trying again every "
                                "%d s", trial.number, str(exc).splitlines()[0], interval)
                failing = True
            if stop.wait(interval):
                return

    thread = threading.Thread(target=beat, name=f"heartbeat-{trial.number}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def fail_stale(study: optuna.Study, store: ResultStore) -> list[int]:
    """Fail trials whose worker died and record why; Optuna queues them again."""
    before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
    if not before:
        return []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    failed = [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.FAIL,))
              if t.number in before]
    for number in failed:
        store.fail_running_trial(study.study_name, number, STALE_CAUSE)
    return failed


def pending_keys(study: optuna.Study, but: int | None = None) -> set[str]:
    """Configs other workers are measuring now (``but``: this worker's own trial)."""
    return {key_of(t.params) for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            if t.number != but and t.params}


def has_waiting(study: optuna.Study) -> bool:
    """A trial queued again (or enqueued by an earlier run) is taken before anything new."""
    return bool(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))


REQUEST_ATTR = "tuner_request"  # the creator's StudyRequest, as JSON: what a joining worker runs


def remember_request(storage: optuna.storages.BaseStorage, request: StudyRequest) -> None:
    """Store the study's request on it, so that `tuner worker --study NAME` can join."""
    study = optuna.create_study(study_name=request.name, storage=storage, direction="maximize",
                                load_if_exists=True)
    study.set_user_attr(REQUEST_ATTR, request.to_json())


def stored_request(storage: optuna.storages.BaseStorage, name: str) -> StudyRequest | None:
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        return None
    stored = study.user_attrs.get(REQUEST_ATTR)
    return None if stored is None else StudyRequest.from_json(stored, f"the study {name!r}")
