"""The dashboard's one write action, starting a tuning run, needs the operator's token."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tuner.store import upgrade
from tuner.web import create_app


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    upgrade(url)  # an empty, current results database
    return url


RUN = {"workload": "no/such/workload.jsonl", "model": "m"}


def test_without_a_configured_token_nothing_can_be_started(db: str, tmp_path: Path) -> None:
    client = TestClient(create_app(db, run_log_dir=tmp_path / "runs"))
    refused = client.post("/api/runs", json=RUN, headers={"Authorization": "Bearer anything"})
    assert refused.status_code == 403 and "read-only" in refused.json()["detail"]
    assert client.get("/api/runs").json() == [] and not (tmp_path / "runs").exists()


def test_a_wrong_or_missing_token_is_refused(db: str, tmp_path: Path) -> None:
    client = TestClient(create_app(db, token="s3cret", run_log_dir=tmp_path / "runs"))
    assert client.post("/api/runs", json=RUN).status_code == 401
    assert client.post("/api/runs", json=RUN, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.get("/api/runs").json() == []


def test_a_request_the_cli_would_refuse_starts_nothing(db: str, tmp_path: Path) -> None:
    """The form becomes a study request in the dashboard, checked as `tuner optimize` checks it:
    a refusal is the CLI's sentence in a 422, and no process starts."""
    with TestClient(create_app(db, token="s3cret", run_log_dir=tmp_path / "runs")) as client:
        refused = client.post("/api/runs", json=RUN, headers={"Authorization": "Bearer s3cret"})
        assert refused.status_code == 422, refused.text
        assert "no/such/workload.jsonl: no such file" in refused.json()["detail"]
        assert client.get("/api/runs").json() == []


def test_the_token_starts_the_study_it_asked(db: str, tmp_path: Path) -> None:
    """A real run: `tuner run-request` in a child reads the request the dashboard wrote and runs the
    study on it (here its server command fails at once, so no vLLM is needed), and the study's run
    stores that request."""
    from tuner.store import Database

    workload = tmp_path / "code.jsonl"
    workload.write_text('{"prompt": "def f():", "max_tokens": 8}\n')
    study = tmp_path / "study.toml"
    study.write_text('trials = 2\n[server]\ncmd = "python3 -c \'raise SystemExit(3)\' {model}"\n'
                     '[space]\nk = [2]\n')
    request = {"workload": str(workload), "model": "hub-org/model", "study": str(study), "name": "from-web",
               "methods": ["ngram"]}
    with TestClient(create_app(db, token="s3cret", run_log_dir=tmp_path / "runs")) as client:
        started = client.post("/api/runs", json=request, headers={"Authorization": "Bearer s3cret"})
        assert started.status_code == 202, started.text
        run = started.json()
        assert run["request"]["space"]["ks"] == [2] and run["request"]["db"] == db
        deadline = time.monotonic() + 120
        while client.get("/api/runs").json()[0]["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.5)
    log = Path(run["log"]).read_text()
    assert "baseline" in log, log
    (stored,) = Database.open(db, read_only=True).results.study_runs("from-web")
    assert stored["request"] == {**run["request"], "name": "from-web"}


def test_pages_link_to_a_given_optuna_dashboard(db: str, tmp_path: Path) -> None:
    client = TestClient(create_app(db, optuna_dashboard_url="http://127.0.0.1:8081/"))
    page = client.get("/")
    assert page.status_code == 200 and 'id="empty"' in page.text  # no study yet, said so
    assert 'href="http://127.0.0.1:8081/"' in page.text


def test_a_run_names_its_methods_and_drafts_and_the_cli_checks_them(db: str, tmp_path: Path) -> None:
    workload = tmp_path / "code.jsonl"
    workload.write_text('{"prompt": "def f():", "max_tokens": 8}\n')
    plain = tmp_path / "plain-model"
    plain.mkdir()
    (plain / "config.json").write_text('{"architectures": ["LlamaForCausalLM"], "vocab_size": 8}')
    request = {"workload": str(workload), "model": str(plain), "methods": ["eagle3"], "drafts": [str(plain)],
               "k": "1-3"}
    with TestClient(create_app(db, token="s3cret", run_log_dir=tmp_path / "runs")) as client:
        refused = client.post("/api/runs", json=request, headers={"Authorization": "Bearer s3cret"})
        assert refused.status_code == 422
        assert "is a plain model (LlamaForCausalLM), not an eagle3 drafter" in refused.json()["detail"]
        assert client.get("/api/runs").json() == []
