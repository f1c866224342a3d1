"""`tuner dashboard`: FastAPI routes over tuner.web.views; read-only by construction.

Pages are Jinja2 templates with autoescaping, so text from the database (model names, failure
causes, logs) is always escaped. The only markup inserted as is comes from tuner.web.charts,
which escapes its own labels. CSS and JavaScript are files of this package.
"""

from __future__ import annotations

import asyncio
import hmac
import shutil
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from tuner.errors import UsageError
from tuner.store import Database
from tuner.web import views
from tuner.web.runs import RunLauncher, RunRequest

HERE = Path(__file__).resolve().parent


def _fmt(value: Any, digits: int = 1, scale: float = 1.0, suffix: str = "") -> str:
    if value is None:
        return "–"
    return f"{value * scale:.{digits}f}{suffix}"


def create_app(db_url: str | None = None, token: str | None = None,
               run_log_dir: Path = Path(".tuner/runs"), optuna_dashboard_url: str | None = None,
               service=None) -> FastAPI:
    """The dashboard. Pages and GET /api/ only read. The one action, starting a tuning run
    (POST /api/runs), needs ``token`` as a bearer token; without a token it is refused.
    ``service`` (`tuner serve`'s TuningService) starts and stops with the app."""
    database = Database.open(db_url, read_only=True)
    url, store, jobs = database.url, database.results, database.jobs
    launcher = RunLauncher(url, run_log_dir)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        if service is not None:
            service.start()
        yield
        launcher.stop_all()  # runs this dashboard started end with it (a study can be resumed)
        if service is not None:
            await asyncio.to_thread(service.stop)  # a running job's server goes down first

    app = FastAPI(title="specdec tuner", lifespan=lifespan,
                  description="Best speculative-decoding configurations per model and workload "
                  "type, from the tuner's results database. Reads need nothing; starting a run "
                  "needs the operator's token (Authorization: Bearer TOKEN).")
    bearer = HTTPBearer(auto_error=False)

    def operator(credentials: HTTPAuthorizationCredentials | None = Depends(bearer)) -> None:
        if not token:
            raise HTTPException(403, "this dashboard is read-only: start it with --token "
                                     "(or TUNER_DASHBOARD_TOKEN) to allow starting runs")
        if credentials is None or not hmac.compare_digest(credentials.credentials.encode(), token.encode()):
            raise HTTPException(401, "a valid operator token is needed: Authorization: Bearer TOKEN",
                                headers={"WWW-Authenticate": "Bearer"})
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.filters["fmt"] = _fmt
    # The raw Optuna studies are optuna-dashboard's job: a link where one runs, else how to run it.
    optuna_dashboard = (f"optuna-dashboard {url}" if shutil.which("optuna-dashboard") else None)

    @app.exception_handler(UsageError)
    async def not_found(request: Request, exc: UsageError):
        if request.url.path.startswith("/api/"):
            return JSONResponse({"detail": str(exc)}, status_code=404)
        return templates.TemplateResponse(request, "error.html", {"message": str(exc)}, status_code=404)

    def page(request: Request, name: str, **context: Any) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {
            "db": url, "optuna_dashboard": optuna_dashboard, "optuna_dashboard_url": optuna_dashboard_url,
            **context})

    @app.get("/", response_class=HTMLResponse)
    def overview_page(request: Request):
        data = views.overview(store)
        cells = {(c["model"], c["workload_type"]): c for c in data["cells"]}
        return page(request, "overview.html", data=data, cells=cells, studies=views.studies(store))

    @app.get("/model", response_class=HTMLResponse)
    def model_view(request: Request, model: str, type: str):
        return page(request, "model.html", data=views.model_page(store, model, type))

    @app.get("/study", response_class=HTMLResponse)
    def study_view(request: Request, name: str):
        return page(request, "study.html", data=views.study_page(store, name))

    @app.get("/trial", response_class=HTMLResponse)
    def trial_view(request: Request, study: str, number: int):
        return page(request, "trial.html", data=views.trial_page(store, study, number))

    @app.get("/jobs", response_class=HTMLResponse)
    def jobs_view(request: Request):
        return page(request, "jobs.html", data=views.jobs_page(jobs))

    @app.get("/job", response_class=HTMLResponse)
    def job_view(request: Request, id: int):
        return page(request, "job.html", data=views.job_page(jobs, id))

    @app.get("/api/best", summary="Best configuration per (model, workload type)")
    def api_best() -> list[dict[str, Any]]:
        return views.overview(store)["cells"]

    @app.get("/api/model", summary="A model and workload type: winner, history, k by batch size, charts as SVG")
    def api_model(model: str, type: str) -> dict[str, Any]:
        return views.model_page(store, model, type)

    @app.get("/api/studies", summary="Every study, newest first")
    def api_studies() -> list[dict[str, Any]]:
        return views.studies(store)

    @app.get("/api/study", summary="One study's runs and trials")
    def api_study(name: str) -> dict[str, Any]:
        return views.study_page(store, name)

    @app.get("/api/trial", summary="One trial: config, figures per load, predicted vs measured, log tail")
    def api_trial(study: str, number: int) -> dict[str, Any]:
        return views.trial_page(store, study, number)

    @app.get("/api/jobs", summary="Schedules of `tuner serve`, its latest jobs with their outcome, drift events")
    def api_jobs() -> dict[str, Any]:
        return views.jobs_page(jobs)

    @app.get("/api/job", summary="One job: its command, status, outcome and log tail")
    def api_job(id: int) -> dict[str, Any]:
        return views.job_page(jobs, id)

    @app.get("/api/runs", summary="Tuning runs started from this dashboard")
    def api_runs() -> list[dict[str, Any]]:
        return [run.view() for run in launcher.runs]

    @app.post("/api/runs", status_code=202, dependencies=[Depends(operator)],
              summary="Start a study on this host, as `tuner optimize` would (operator token needed)")
    def api_start_run(request: RunRequest) -> dict[str, Any]:
        try:
            return launcher.start(request).view()
        except UsageError as exc:  # refused before anything starts, in the CLI's words
            raise HTTPException(422, str(exc)) from None

    return app
