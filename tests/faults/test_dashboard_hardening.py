"""Dashboard hardening: HTML and script payloads in every text that comes from the database or a
request are shown escaped on every page; nothing is written without the operator's token; no
route serves a file outside the package's static folder; the default bind address is loopback.

The study is made by the real study loop on a real SQLite database, with a stand-in for the
measurement (this is a test of the web room; the dashboard on a real study is tests/browser)."""

from __future__ import annotations

import typer
from fastapi.testclient import TestClient

from fakes import Quiet, fake_measurement, stored_request
from tuner.cli import app as cli_app
from tuner.errors import TunerError
from tuner.schedule.config import ServeSettings
from tuner.schedule.service import enqueue_run
from tuner.study.loop import OptimizeSettings, optimize
from tuner.plan.space import SearchSpace
from tuner.study import loop as study_module
from tuner.store import JobStore, ResultStore, open_database, optuna_storage
from tuner.measure.trial import MeasureSettings
from tuner.web import create_app
from tuner.workload import Request, Workload

EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'
ESCAPED = "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;"


def evil_database(tmp_path, monkeypatch) -> str:
    url = f"sqlite:///{tmp_path / 'evil.db'}"
    path = tmp_path / "code.jsonl"
    path.write_text('{"prompt": "x"}\n')
    workload = Workload(path=path, type=f"code{EVIL}", requests=(Request(line=1, prompt="x"),))

    def measure(model, spec, workload, settings, progress):
        if spec is not None and spec.k == 2:
            raise TunerError(f"server died: {EVIL}")  # a failure cause holding markup
        return [fake_measurement(spec, 100.0 + (spec.k * 10 if spec else 0), per_position=[0.8] * spec.k
                                 if spec else None)]

    monkeypatch.setattr(study_module, "measure_config_at_loads", measure)
    store = ResultStore(open_database(url))
    optimize(EVIL, workload, SearchSpace(methods=("ngram",), ks=(1, 2, 3)), MeasureSettings(), store,
             optuna_storage(url), OptimizeSettings(trials=4, strategy="grid", name=f"study {EVIL}"), Quiet())
    jobs = JobStore(open_database(url))
    schedule = jobs.add_schedule(name=f"nightly{EVIL}", cron="0 2 * * *", timezone="UTC", model=EVIL,
                                 workload=str(path), workload_type=workload.type,
                                 request={**(stored := stored_request()), "space": {**stored["space"], "methods": [EVIL]}})
    job = enqueue_run(jobs, schedule, "drift", schedule.created_at, detail=EVIL)
    jobs.add_drift_event(model=EVIL, live_model_name=EVIL, live_acceptance_rate=0.1, live_acceptance_length=1.2,
                         tuned_acceptance_rate=0.8, tuned_acceptance_length=3.0, tuned_study=EVIL, margin=0.1,
                         held_s=60, job_id=job.id, note=EVIL)
    return url


def test_every_page_shows_database_text_escaped(tmp_path, monkeypatch):
    client = TestClient(create_app(evil_database(tmp_path, monkeypatch)))
    study = client.get("/api/studies").json()[0]
    assert study["name"] == f"study {EVIL}"  # the API carries the text as data
    pages = {
        "/": {}, "/jobs": {}, "/job": {"id": 1},
        "/model": {"model": EVIL, "type": f"code{EVIL}"},
        "/study": {"name": f"study {EVIL}"},
        "/trial": {"study": f"study {EVIL}", "number": 2},  # the failed trial with the cause
    }
    for path, params in pages.items():
        page = client.get(path, params=params)
        assert page.status_code == 200, path
        assert "<script>alert" not in page.text and "<img src=x" not in page.text, path
        assert ESCAPED in page.text, path
    # A payload in the request itself (a name that does not exist) is escaped in the error page.
    missing = client.get("/study", params={"name": EVIL})
    assert missing.status_code == 404 and "<script>alert" not in missing.text


def test_nothing_is_written_without_the_token(tmp_path, monkeypatch):
    url = evil_database(tmp_path, monkeypatch)
    before = (tmp_path / "evil.db").read_bytes()
    for token in (None, "secret"):
        client = TestClient(create_app(url, token=token, run_log_dir=tmp_path / "runs"))
        paths = {route.path for route in client.app.routes if hasattr(route, "methods")}
        for path in paths:
            for method in ("POST", "PUT", "DELETE", "PATCH"):
                response = client.request(method, path, json={"workload": "w", "model": "m"})
                assert response.status_code in (401, 403, 405), (method, path, response.status_code)
        wrong = client.post("/api/runs", json={"workload": "w", "model": "m"},
                            headers={"Authorization": "Bearer wrong"})
        assert wrong.status_code == (403 if token is None else 401)
    assert not (tmp_path / "runs").exists()
    assert (tmp_path / "evil.db").read_bytes() == before


def test_no_route_serves_files_outside_the_static_folder(tmp_path, monkeypatch):
    client = TestClient(create_app(evil_database(tmp_path, monkeypatch)))
    assert client.get("/static/app.js").status_code == 200
    for path in ("/static/../app.py", "/static/%2e%2e/app.py", "/static/..%2fapp.py", "/static/%2e%2e%2fviews.py",
                 "/static//etc/passwd", "/static/..%2f..%2f..%2fpyproject.toml", "/../pyproject.toml"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "def create_app" not in response.text and "[project]" not in response.text


def test_the_default_bind_address_is_loopback():
    commands = typer.main.get_command(cli_app).commands
    host = next(p for p in commands["dashboard"].params if p.name == "host")
    assert host.default == "127.0.0.1"
    assert ServeSettings.model_fields["host"].default == "127.0.0.1"  # tuner serve, when nothing sets it
