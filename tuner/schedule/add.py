"""`tuner schedule add`: check everything a job will need before storing the schedule, so a
nightly run does not fail at 02:00 on a typo."""

from __future__ import annotations

from collections.abc import Callable

from tuner.errors import UsageError
from tuner.plan.request import StudyRequest
from tuner.plan.study_plan import check_request
from tuner.schedule.cron import check_cron
from tuner.store import JobStore, ScheduleRow


def add_schedule(open_jobs: Callable[[], JobStore], *, name: str, cron: str, tz: str,
                 request: StudyRequest, gpus: str | None, live_model_name: str | None) -> ScheduleRow:
    """``request``: the study each job runs (each job names it after the schedule and the time);
    ``open_jobs`` opens the database once all is checked, so a refused schedule creates none."""
    if not name.strip():
        raise UsageError("--name must not be empty")
    check_cron(cron, tz)
    if gpus is not None and not all(g.strip().isdigit() for g in gpus.split(",")):
        raise UsageError(f"--gpus {gpus!r} must list GPU indices like 0 or 0,1")
    loaded = check_request(request)  # a bad workload line or option is reported now, not at night
    return open_jobs().add_schedule(name=name, cron=cron, timezone=tz, model=request.model,
                                    workload=request.workload, workload_type=loaded.type,
                                    request=request.model_copy(update={"name": None}).to_json(),
                                    gpus=gpus.replace(" ", "") if gpus else None, live_model_name=live_model_name)
