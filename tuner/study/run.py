"""``run_study``: the one way a study runs, whoever launched it: `tuner optimize`, a `tuner worker`
joining it, a nightly job of `tuner serve` and a run started from the dashboard all call it with
a ``StudyRequest`` (tuner/plan/request.py) and their own ``Placement``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tuner.errors import UsageError
from tuner.plan.request import StudyRequest
from tuner.store import Database, TrialRow, database_url
from tuner.study.loop import StudyOutcome, StudyProgress, optimize
from tuner.study.prepare import Placement, prepare_study
from tuner.study.processes import helper_workers
from tuner.study.workers import stored_request


@dataclass(frozen=True)
class StudyResult:
    """What a run of a study found, with what its report shows beside the answer."""

    request: StudyRequest
    outcome: StudyOutcome
    rows: list[TrialRow]
    candidates: int  # configurations in the space, baseline included


def run_study(request: StudyRequest, place: Placement, *, report: Callable[[str], None],
              progress: StudyProgress, began: float | None = None) -> StudyResult:
    """Prepare the study, start this host's helper workers once it exists, run the loop until its
    answer; leaving waits for the helpers' trials. ``began``: when the command started
    (``time.monotonic``): --time-limit counts from there."""
    began = time.monotonic() if began is None else began
    study = prepare_study(request, place, report)
    run = study.settings.server
    with helper_workers(study.name, study.request.db, study.helper_gpus, place.heartbeat,
                        run.gpu_free_timeout_s, run.log_dir, report=report) as start_helpers:
        outcome = optimize(study.request.model, study.workload, study.plan.space, study.settings,
                           study.store, study.storage, study.plan.options, progress,
                           on_ready=start_helpers, began=began, request=study.request.to_json())
    return StudyResult(study.request, outcome, study.store.trials(study_name=outcome.study_name),
                       len(study.plan.space.candidates()))


def join_study(name: str, db: str, place: Placement, *, report: Callable[[str], None],
               progress: StudyProgress) -> StudyResult:
    """`tuner worker`: run the study ``name`` as its creator asked it, beside the other workers."""
    url = database_url(db)
    if url.startswith("sqlite"):
        raise UsageError("a worker shares its study with other processes, which SQLite cannot "
                         "do safely; keep the study on PostgreSQL (--db postgresql://USER@HOST/DB)")
    request = stored_request(Database.open(url).optuna(place.heartbeat), name)
    if request is None:
        raise UsageError(f"no study {name!r} started by `tuner optimize` in {url}; start it there "
                         "first (tuner optimize ... --db URL), then join it")
    report(f"worker joins {name!r}")
    # The worker's own --db reaches the same database (perhaps by another address).
    return run_study(request.model_copy(update={"db": url}), place, report=report, progress=progress)


def read_request_file(path: Path) -> StudyRequest:
    """A request written by `tuner serve` for a job or by the dashboard for a run."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read the study request {path} ({exc.strerror})") from None
    return StudyRequest.from_json(text, str(path))
