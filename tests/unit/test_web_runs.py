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


def test_the_token_starts_a_real_tuner_optimize(db: str, tmp_path: Path) -> None:
    with TestClient(create_app(db, token="s3cret", run_log_dir=tmp_path / "runs")) as client:
        started = client.post("/api/runs", json=RUN, headers={"Authorization": "Bearer s3cret"})
        assert started.status_code == 202, started.text
        run = started.json()
        assert run["argv"][2:5] == ["tuner.cli", "optimize", "--workload"] and db in run["argv"]
        deadline = time.monotonic() + 60
        while client.get("/api/runs").json()[0]["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        # The CLI's own check of the workload ended it: exit code 2 and its sentence in the log.
        assert client.get("/api/runs").json()[0]["exit_code"] == 2
        assert "no/such/workload.jsonl: no such file" in Path(run["log"]).read_text()


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
        run = client.post("/api/runs", json=request, headers={"Authorization": "Bearer s3cret"}).json()
        assert run["argv"][-6:] == ["--method", "eagle3", "--draft", str(plain), "--k", "1-3"]
        deadline = time.monotonic() + 60
        while client.get("/api/runs").json()[0]["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert client.get("/api/runs").json()[0]["exit_code"] == 2
        assert "is a plain model (LlamaForCausalLM), not an eagle3 drafter" in Path(run["log"]).read_text()
