"""A study request -> the study, ready to run: planned, its workload loaded, its database opened,
its name settled and the request stored on it so that `tuner worker` can join."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import optuna

from tuner.engine import ServerOptions
from tuner.measure.trial import MeasureSettings
from tuner.plan.checks import check_loads, check_space, local_gpu_sets
from tuner.plan.request import StudyRequest
from tuner.plan.settings import study_name
from tuner.plan.study_plan import StudyPlan, measure_settings, study_plan
from tuner.store import Database, ResultStore
from tuner.study.workers import remember_request
from tuner.workload import Workload, load_workload
from tuner.workload.stats import left_out


@dataclass(frozen=True)
class Placement:
    """What each process decides for itself, never stored with the study: how many workers it
    starts on this host, its GPUs, its heartbeat, how long it waits for a GPU to be freed, and
    whether it joins a study that others run."""

    workers: int = 1
    gpus: str | None = None
    heartbeat: int = 30
    gpu_free_timeout: float = ServerOptions.gpu_free_timeout_s
    join: bool = False


@dataclass(frozen=True)
class PreparedStudy:
    """A study ready to run: the request with its name settled, what it searches and how each
    trial is measured, where it is stored, and the GPUs of the helper workers to start."""

    request: StudyRequest
    plan: StudyPlan
    workload: Workload
    settings: MeasureSettings
    store: ResultStore
    storage: optuna.storages.BaseStorage
    helper_gpus: Sequence[tuple[int, ...] | None]

    @property
    def name(self) -> str:
        return self.request.name or ""


def prepare_study(request: StudyRequest, place: Placement, report: Callable[[str], None]) -> PreparedStudy:
    """``report`` hears the warnings of the checks of the space and the loads."""
    plan = study_plan(request, place.join)
    workload = load_workload(request.workload, request.workload_type)
    gpu_sets = local_gpu_sets(request.db, place.workers, place.join, place.gpus)  # [0]: this process's
    settings = measure_settings(request.run, plan.loads, plan.server_cmd, plan.server_args,
                                gpus=gpu_sets[0], gpu_free_timeout=place.gpu_free_timeout)
    left = [left_out(workload.requests, settings.replayed(workload, load).requests) for load in settings.loads]
    for warning in [*check_space(plan.space, request.model), *check_loads(len(workload.requests), settings.loads),
                    *dict.fromkeys(w for w in left if w)]:
        report(warning)
    database = Database.open(request.db)
    storage = database.optuna(place.heartbeat)
    if request.name is None:
        request = request.model_copy(update={"name": study_name(request.model, workload.type, settings.loads_label)})
        plan = study_plan(request, place.join)
    if not place.join:
        remember_request(storage, request)
    return PreparedStudy(request, plan, workload, settings, database.results, storage, gpu_sets[1:])
