"""`tuner schedule add`: check everything a job will need before storing the schedule, so a
nightly run does not fail at 02:00 on a typo."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from tuner.errors import UsageError
from tuner.schedule.cron import check_cron
from tuner.store import JobStore, ScheduleRow
from tuner.workload import load_workload

# Set by the schedule itself (or per run), so not accepted among the optimize options.
RESERVED = ("--workload", "--model", "--name", "--db", "--type", "--json")


def add_schedule(open_jobs: Callable[[], JobStore], *, name: str, cron: str, tz: str, workload: Path,
                 model: str, workload_type: str | None, optimize_args: Sequence[str], gpus: str | None,
                 live_model_name: str | None, check_options: Callable[[list[str]], None]) -> ScheduleRow:
    """``check_options`` checks the optimize options as `tuner optimize` would (raises UsageError);
    ``open_jobs`` opens the database once all is checked, so a refused schedule creates none."""
    if not name.strip():
        raise UsageError("--name must not be empty")
    check_cron(cron, tz)
    for arg in optimize_args:
        if arg.split("=", 1)[0] in RESERVED:
            raise UsageError(f"{arg.split('=', 1)[0]} is set for each job, by `tuner schedule add` "
                             "(--workload, --model, --type) or by the service (--name, --db, --json); "
                             "leave it out of the optimize options")
    if gpus is not None and not all(g.strip().isdigit() for g in gpus.split(",")):
        raise UsageError(f"--gpus {gpus!r} must list GPU indices like 0 or 0,1")
    loaded = load_workload(workload, workload_type)  # its bad lines are reported now, not at night
    path = str(workload.resolve())
    check_options(["--workload", path, "--model", model, *optimize_args])
    return open_jobs().add_schedule(name=name, cron=cron, timezone=tz, model=model, workload=path,
                                    workload_type=loaded.type, optimize_args=list(optimize_args),
                                    gpus=gpus.replace(" ", "") if gpus else None, live_model_name=live_model_name)
