"""The commands of the service side: `tuner schedule` (recurring studies), `tuner serve` (runs
them, with the dashboard), `tuner dashboard` (read-only, or with an operator token) and
`tuner db upgrade`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from tuner.cli.app import app, db_app, schedule_app, user_errors
from tuner.cli.options import STUDY_OPTIONS, DbOpt, FormatOpt, JsonOpt, gathered, study_request
from tuner.errors import UsageError
from tuner.outputs import Output, chosen_format, console, err_console
from tuner.plan.request import StudyRequest
from tuner.schedule.config import serve_options


@app.command()
def dashboard(
    host: Annotated[str, typer.Option(help="Address to bind; the default is only reachable from this machine.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8080,
    db: DbOpt = None,
    token: Annotated[Optional[str], typer.Option(
        envvar="TUNER_DASHBOARD_TOKEN", show_envvar=True,
        help="Operator token that allows starting tuning runs (POST /api/runs); without it the "
             "dashboard only reads.")] = None,
    optuna_dashboard: Annotated[Optional[str], typer.Option(
        help="URL of an optuna-dashboard on the same database, linked from every page.")] = None,
) -> None:
    """Web dashboard of the best configurations per model and workload type."""
    import uvicorn

    from tuner.web import create_app

    with user_errors():
        web_app = create_app(db, token, optuna_dashboard_url=optuna_dashboard)
        err_console.print(f"dashboard on http://{host}:{port} (Ctrl-C to stop)", highlight=False)
        uvicorn.run(web_app, host=host, port=port, log_level="warning")



# A schedule's own --name names it; each job names its study after it and the time.
SCHEDULE_STUDY_OPTIONS = tuple(option for option in STUDY_OPTIONS if option[0] != "name")


@schedule_app.command("add")
@gathered("request", SCHEDULE_STUDY_OPTIONS, study_request)
def schedule_add(
    name: Annotated[str, typer.Option(help="Name of the schedule (its studies are named after it).")],
    cron: Annotated[str, typer.Option(help='When: "0 2 * * *" is 02:00 daily; a sixth field gives seconds.')],
    tz: Annotated[str, typer.Option("--tz", help="Time zone of the cron times.")] = "UTC",
    gpus: Annotated[Optional[str], typer.Option(
        help="GPUs of its jobs, like 0,1 (CUDA_VISIBLE_DEVICES); jobs on overlapping GPUs never "
             "run at once. Default: every GPU, shared with every other job.")] = None,
    live_model_name: Annotated[Optional[str], typer.Option(
        help="model_name label of this model on the production servers Prometheus scrapes "
             "(drift check); default: --model.")] = None,
    *, request: StudyRequest,
) -> None:
    """Add a recurring study: every option of `tuner optimize` (--method ngram --k 1-6 ...) says what it asks."""
    from tuner.schedule.add import add_schedule
    from tuner.schedule.cron import next_time
    from tuner.store import Database

    with user_errors():
        row = add_schedule(lambda: Database.open(request.db).jobs, name=name, cron=cron, tz=tz,
                           request=request, gpus=gpus, live_model_name=live_model_name)
        first = next_time(row.cron, row.timezone, row.created_at)
        console.print(f"schedule {row.name!r} added: first run {first.isoformat(timespec='seconds')} "
                      f"({row.timezone}), run by `tuner serve`", highlight=False, soft_wrap=True)


@schedule_app.command("list")
def schedule_list(
    db: DbOpt = None,
    fmt: FormatOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Schedules with their next run, and the latest jobs."""
    from tuner.outputs.report import schedules_table, jobs_table
    from tuner.schedule.views import schedule_views
    from tuner.store import Database

    with user_errors():
        jobs = Database.open(db, read_only=True).jobs
        views = schedule_views(jobs)
        out = Output(chosen_format(fmt, as_json))
        if not views and not out.json:
            out.note("no schedules; add one with `tuner schedule add`")
            return
        out.result(lambda: {"schedules": views, "jobs": [j.to_dict() for j in jobs.jobs(limit=50)]},
                   lambda: [schedules_table(views), jobs_table(jobs.jobs(limit=20))])


@schedule_app.command("remove")
def schedule_remove(name: Annotated[str, typer.Argument(help="Schedule name.")], db: DbOpt = None) -> None:
    """Remove a schedule and its queued jobs (finished jobs keep their record)."""
    from tuner.store import Database

    with user_errors():
        if not Database.open(db, create=False).jobs.remove_schedule(name):
            raise UsageError(f"no schedule named {name!r}; `tuner schedule list` shows them")
        console.print(f"schedule {name!r} removed", highlight=False)


@schedule_app.command("run-now")
def schedule_run_now(name: Annotated[str, typer.Argument(help="Schedule name.")], db: DbOpt = None) -> None:
    """Queue a run of the schedule now; `tuner serve` starts it once its GPUs are free."""
    from datetime import datetime, timezone

    from tuner.schedule.service import enqueue_run
    from tuner.store import Database

    with user_errors():
        jobs = Database.open(db, create=False).jobs
        schedule = jobs.schedule(name)
        if schedule is None:
            raise UsageError(f"no schedule named {name!r}; `tuner schedule list` shows them")
        if active := jobs.active_job(schedule.id):
            raise UsageError(f"job {active.id} of {name!r} is already {active.status}; "
                             "wait for it (`tuner schedule list`)")
        job = enqueue_run(jobs, schedule, "run-now", datetime.now(timezone.utc))
        console.print(f"queued job {job.id} (study {job.study_name!r}); a running `tuner serve` "
                      "starts it when its GPUs are free", highlight=False, soft_wrap=True)


@app.command()
@serve_options
def serve(**given: object) -> None:
    """Run scheduled and drift-triggered tuning jobs, and the dashboard, in one process."""
    import logging

    import uvicorn

    from tuner.schedule.config import ServeSettings
    from tuner.schedule.service import TuningService
    from tuner.store import Database
    from tuner.web import create_app

    with user_errors():
        settings = ServeSettings.load(given)  # flags over TUNER_* over the [serve] table
        database = Database.open(settings.db)  # creates or checks the schema before anything starts
        service = TuningService(settings, database)
        web_app = create_app(database.url, settings.token, service=service,
                             run_log_dir=settings.log_dir / "dashboard-runs")
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
        err_console.print(f"tuner serve: dashboard on http://{settings.host}:{settings.port}, "
                          f"database {database.url}" + (f", drift check against {settings.prometheus}"
                                                        if settings.prometheus else ""), highlight=False)
        # uvicorn turns SIGTERM and Ctrl-C into a graceful shutdown, which stops the service
        # (and a running job's server) in the app's lifespan.
        uvicorn.run(web_app, host=settings.host, port=settings.port, log_level="warning")


@db_app.command("upgrade")
def db_upgrade(db: Annotated[Optional[str], typer.Option(help="Results database URL.")] = None) -> None:
    """Create the results schema, or bring it up to date."""
    from tuner.store import database_url, upgrade

    with user_errors():
        url = database_url(db)
        upgrade(url)
        console.print(f"{url}: schema up to date")
