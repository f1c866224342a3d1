"""`tuner dashboard`: FastAPI routes over tuner.web.views; read-only by construction.

Pages are Jinja2 templates with autoescaping, so text from the database (model names, failure
causes, logs) is always escaped. The only markup inserted as is comes from tuner.web.charts,
which escapes its own labels. CSS and JavaScript are files of this package.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from tuner.errors import UsageError
from tuner.store import ResultStore, database_url, open_read_only
from tuner.web import views

HERE = Path(__file__).resolve().parent


def _fmt(value: Any, digits: int = 1, scale: float = 1.0, suffix: str = "") -> str:
    if value is None:
        return "–"
    return f"{value * scale:.{digits}f}{suffix}"


def create_app(db_url: str | None = None) -> FastAPI:
    url = database_url(db_url)
    store = ResultStore(open_read_only(url))
    app = FastAPI(title="specdec tuner", description="Best speculative-decoding configurations "
                  "per model and workload type, from the tuner's results database (read-only).")
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.filters["fmt"] = _fmt
    optuna_dashboard = (f"optuna-dashboard {url}" if shutil.which("optuna-dashboard") else None)

    @app.exception_handler(UsageError)
    async def not_found(request: Request, exc: UsageError):
        if request.url.path.startswith("/api/"):
            return JSONResponse({"detail": str(exc)}, status_code=404)
        return templates.TemplateResponse(request, "error.html", {"message": str(exc)}, status_code=404)

    def page(request: Request, name: str, **context: Any) -> HTMLResponse:
        return templates.TemplateResponse(request, name, {"db": url, "optuna_dashboard": optuna_dashboard,
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

    @app.get("/api/best", summary="Best configuration per (model, workload type)")
    def api_best() -> list[dict[str, Any]]:
        return views.overview(store)["cells"]

    @app.get("/api/model", summary="A model and workload type: winner, history, schedule, charts as SVG")
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

    return app
