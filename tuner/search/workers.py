"""Several workers on one study: Optuna's heartbeats on running trials, stale ones failed and
queued again, what the other workers are measuring right now, and the worker processes
themselves (helpers started by `tuner optimize --workers`, `tuner worker` joining a study).

Every worker runs the same loop (`tuner.search.study.optimize`) on the shared RDB study; Optuna
hands each waiting trial to exactly one of them. A worker that dies stops sending heartbeats;
the next worker to look fails its trial (Optuna's ``fail_stale_trials``), Optuna's
RetryHeartbeatStaleTrialCallback queues it again, and the trial is run once more.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

import optuna
from optuna.trial import TrialState

from tuner.child_process import Child, signal_group, start_child, tuner_argv
from tuner.engine.gpus import parse_gpus, split_gpus
from tuner.errors import UsageError
from tuner.search.guided import key_of
from tuner.store import ResultStore, database_url, open_database, optuna_storage

log = logging.getLogger("tuner.search")
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


COMMAND_ATTR = "tuner_command"
# Options each worker sets for itself; the rest of the creator's command is the study's.
OWN_OPTIONS = {"--db": True, "--workers": True, "--gpus": True, "--heartbeat": True,
               "--gpu-free-timeout": True, "--name": True, "--join": False, "--json": False}


def study_options(argv: list[str]) -> list[str]:
    """`tuner optimize` arguments without the ones every worker sets for itself."""
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in OWN_OPTIONS:
            skip = OWN_OPTIONS[name] and "=" not in arg
            continue
        kept.append(arg)
    return kept


def remember_command(storage: optuna.storages.BaseStorage, name: str, argv: list[str], cwd: str) -> None:
    """Store the creator's command on the study, so that `tuner worker --study NAME` can join."""
    study = optuna.create_study(study_name=name, storage=storage, direction="maximize", load_if_exists=True)
    study.set_user_attr(COMMAND_ATTR, {"argv": study_options(argv), "cwd": cwd})


def stored_command(storage: optuna.storages.BaseStorage, name: str) -> dict | None:
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        return None
    return study.user_attrs.get(COMMAND_ATTR)


def join_study(study: str, db: str, gpus: str | None, gpu_free_timeout: float, heartbeat: int,
               report: Callable[[str], None]) -> NoReturn:
    """`tuner worker`: become the study creator's `tuner optimize`, joined to its study."""
    url = database_url(db)
    if url.startswith("sqlite"):
        raise UsageError("a worker shares its study with other processes, which SQLite cannot "
                         "do safely; keep the study on PostgreSQL (--db postgresql://USER@HOST/DB)")
    open_database(url)
    command = stored_command(optuna_storage(url, heartbeat), study)
    if command is None:
        raise UsageError(f"no study {study!r} started by `tuner optimize` in {url}; start it there "
                         "first (tuner optimize ... --db URL), then join it")
    if Path(command["cwd"]).is_dir():
        os.chdir(command["cwd"])  # its workload and study file paths may be relative
    argv = tuner_argv("optimize", *command["argv"], "--name", study, "--db", url, "--join",
                      "--heartbeat", str(heartbeat), "--gpu-free-timeout", str(gpu_free_timeout))
    if gpus:
        argv += ["--gpus", gpus]
    report(f"worker joins {study!r}")
    os.execv(sys.executable, argv)  # the same process (and process group), now the study's loop


def local_gpu_sets(url: str, workers: int, join: bool, gpus: str | None) -> Sequence[tuple[int, ...] | None]:
    """The GPUs of each of this host's ``workers`` (None: the host's), once the study's database
    is one they can share."""
    if (workers > 1 or join) and url.startswith("sqlite"):
        raise UsageError("several workers on one study need a database they can share: SQLite "
                         "is one file on one host and locks under concurrent writers; pass "
                         "--db postgresql://USER@HOST/DB")
    if workers < 1:
        raise UsageError(f"--workers must be >= 1, got {workers}")
    owned = parse_gpus(gpus)
    return split_gpus(owned, workers) if owned else [None] * workers


@contextlib.contextmanager
def helper_workers(name: str, url: str, gpu_sets: Sequence[Sequence[int] | None], heartbeat: int,
                   gpu_free_timeout: float, log_dir: Path,
                   report: Callable[[str], None]) -> Iterator[Callable[[], None]]:
    """`tuner optimize --workers N`: yields what starts the N-1 helpers (the study calls it once
    the study exists, so they find it); on leaving, waits for them to finish their trials."""
    helpers: list[Child] = []
    try:
        yield lambda: helpers.extend(start_workers(name, url, gpu_sets, heartbeat, gpu_free_timeout,
                                                   log_dir, report))
    finally:
        wait_for_workers(helpers)


def start_workers(name: str, url: str, gpu_sets: Sequence[Sequence[int] | None], heartbeat: int,
                  gpu_free_timeout: float, log_dir: Path, report: Callable[[str], None]) -> list[Child]:
    """`tuner worker` processes beside this one, each in its own process group with its log."""
    helpers: list[Child] = []
    if not gpu_sets:
        return helpers
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create the log folder {log_dir} ({exc.strerror}); "
                         "pass a writable --log-dir") from None
    for i, gpus in enumerate(gpu_sets, start=1):
        argv = tuner_argv("worker", "--study", name, "--db", url, "--heartbeat", str(heartbeat),
                          "--gpu-free-timeout", str(gpu_free_timeout))
        if gpus:
            argv += ["--gpus", ",".join(map(str, gpus))]
        log_path = log_dir / f"worker-{i}-{os.getpid()}.log"
        helpers.append(start_child(argv, log_path))
        report(f"worker {i} started (pid {helpers[-1].pid}, log {log_path})")
    return helpers


def wait_for_workers(helpers: Sequence[Child]) -> None:
    """Wait for the workers to finish their trials; on Ctrl-C, interrupt them (they resume).
    No SIGKILL: a worker's interrupt stops its server and stores its trial, then it exits."""
    try:
        for helper in helpers:
            helper.wait()
    except KeyboardInterrupt:
        for helper in helpers:
            if helper.poll() is None:
                signal_group(helper.pid, signal.SIGINT)
        for helper in helpers:
            helper.wait()
        raise
