"""`tuner optimize`'s flags -> the study it runs, ready: planned (``tuner.plan``), its workload
loaded, its database opened, and the creator's command stored so that `tuner worker` can join."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna

from tuner.measure.trial import MeasureSettings
from tuner.plan.checks import check_loads, check_space, local_gpu_sets
from tuner.plan.settings import study_name
from tuner.plan.study_plan import RunOptions, StudyPlan, measure_settings, plan_study
from tuner.store import Database, ResultStore, database_url
from tuner.study.workers import remember_command
from tuner.workload import Workload, load_workload


@dataclass(frozen=True)
class PreparedStudy:
    """A study `tuner optimize` is ready to run: what it searches and how each trial is measured,
    where it is stored, and the GPUs of the helper workers to start beside this process."""

    plan: StudyPlan
    workload: Workload
    settings: MeasureSettings
    name: str
    db_url: str
    store: ResultStore
    storage: optuna.storages.BaseStorage
    helper_gpus: Sequence[tuple[int, ...] | None]


def prepare_study(workload_path: Path, workload_type: str | None, model: str, run: RunOptions, *,
                  db: str | None, workers: int, gpus: str | None, heartbeat: int,
                  command: list[str], cwd: str, report: Callable[[str], None],
                  allow_output_change: bool | None = None, **flags: Any) -> PreparedStudy:
    """`tuner optimize`'s flags -> the study it runs. ``flags``: those of ``plan_study``;
    ``command``: the creator's own options, stored on the study so that `tuner worker` can join
    it; ``report`` hears the warnings of the checks of the space and the loads."""
    if run.acceptance_rates and allow_output_change is None:
        allow_output_change = True  # the synthetic sampler changes greedy output by design
    plan = plan_study(allow_output_change=allow_output_change, **flags)
    workload = load_workload(workload_path, workload_type)
    url = database_url(db)
    join = plan.options.join
    gpu_sets = local_gpu_sets(url, workers, join, gpus)  # [0]: this process's, the rest: helpers'
    settings = measure_settings(run, plan.loads, plan.server_cmd, plan.server_args, gpus=gpu_sets[0])
    for warning in [*check_space(plan.space, model), *check_loads(len(workload.requests), settings.loads)]:
        report(warning)
    database = Database.open(url)
    store, storage = database.results, database.optuna(heartbeat)
    name = plan.options.name or study_name(model, workload.type, settings.loads_label)
    if not join:
        remember_command(storage, name, command, cwd)
    return PreparedStudy(plan, workload, settings, name, url, store, storage, gpu_sets[1:])
