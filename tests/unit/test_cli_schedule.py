"""`tuner schedule` from the command line: bad input is refused before anything is stored,
a good schedule lists with its next run, run-now queues one job, remove keeps the history."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

TUNER = [sys.executable, "-m", "tuner.cli"]


@pytest.fixture
def env(tmp_path):
    workload = tmp_path / "code.jsonl"
    workload.write_text('{"prompt": "x"}\n')
    return {"db": f"sqlite:///{tmp_path / 'tuner.db'}", "workload": str(workload), "cwd": tmp_path}


def run(env, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*TUNER, *args, "--db", env["db"]], capture_output=True, text=True,
                          cwd=env["cwd"], timeout=60)


def add(env, *extra: str, name="nightly", cron="0 2 * * *") -> subprocess.CompletedProcess:
    return run(env, "schedule", "add", "--name", name, "--cron", cron, "--tz", "Europe/Berlin",
               "--workload", env["workload"], "--model", "m", *extra)


@pytest.mark.parametrize("extra,cron,message", [
    ((), "0 25 * * *", "--cron '0 25 * * *' is not a cron expression"),
    (("--k", "1-4", "--bogus", "1"), "0 2 * * *", "No such option: --bogus"),
    (("--k", "0-2"), "0 2 * * *", "--k '0-2' must name ks >= 1"),
    (("--json",), "0 2 * * *", "No such option: --json"),
    (("--gpus", "first"), "0 2 * * *", "--gpus 'first' must list GPU indices"),
])
def test_bad_schedules_are_refused_with_one_sentence(env, extra, cron, message):
    result = add(env, *extra, cron=cron)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert message in " ".join(result.stderr.split())
    assert not (env["cwd"] / "tuner.db").exists()  # a refused schedule creates no database


def test_a_bad_workload_line_is_reported_when_the_schedule_is_added(env, tmp_path):
    bad = tmp_path / "chat.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"nothing": 1}\n')
    result = run(env, "schedule", "add", "--name", "n", "--cron", "0 2 * * *", "--workload", str(bad),
                 "--model", "m")
    assert result.returncode == 2 and f"{bad}:2:" in result.stderr


def test_add_list_run_now_remove(env):
    result = add(env, "--method", "ngram", "--k", "1-4", "--gpus", "0,1")
    assert result.returncode == 0, result.stderr
    assert "02:00:00+01:00 (Europe/Berlin)" in result.stdout  # first run, in the zone's wall time
    assert add(env).returncode == 2  # the name is taken
    listed = json.loads(run(env, "schedule", "list", "--json").stdout)
    (schedule,) = listed["schedules"]
    assert schedule["request"]["space"]["methods"] == ["ngram"] and schedule["request"]["space"]["ks"] == [1, 2, 3, 4]
    assert schedule["study"].startswith("methods ngram · k 1,2,3,4")
    assert schedule["gpus"] == "0,1" and schedule["workload_type"] == "code"
    assert schedule["next_run"].endswith("T02:00:00+01:00")
    queued = run(env, "schedule", "run-now", "nightly")
    assert queued.returncode == 0 and "queued job 1" in queued.stdout
    again = run(env, "schedule", "run-now", "nightly")
    assert again.returncode == 2 and "job 1 of 'nightly' is already queued" in again.stderr
    (job,) = json.loads(run(env, "schedule", "list", "--json").stdout)["jobs"]
    assert (job["reason"], job["status"], job["gpus"]) == ("run-now", "queued", "0,1")
    assert job["request"] == {**schedule["request"], "name": job["study_name"]}
    assert run(env, "schedule", "remove", "nightly").returncode == 0
    assert run(env, "schedule", "remove", "nightly").returncode == 2
    assert json.loads(run(env, "schedule", "list", "--json").stdout) == {"schedules": [], "jobs": []}


@pytest.mark.parametrize("args,message", [
    (("--config", "missing.toml"), "missing.toml: no such config file; fix --config or TUNER_CONFIG"),
    (("--drift-margin", "1.5"), "drift margin 1.5 must be a fraction between 0 and 1"),
])
def test_serve_refuses_bad_settings_before_starting(env, args, message):
    result = subprocess.run([*TUNER, "serve", "--db", env["db"], "--port", "1", *args], capture_output=True,
                            text=True, cwd=env["cwd"], timeout=60)
    assert result.returncode == 2 and result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert message in " ".join(result.stderr.split())


def test_serve_reads_its_config_file(env, tmp_path):
    (tmp_path / "tuner.toml").write_text('[serve]\ndrift_marginn = 0.2\n')
    result = subprocess.run([*TUNER, "serve", "--db", env["db"]], capture_output=True, text=True, cwd=tmp_path,
                            timeout=60, env={**os.environ, "TUNER_CONFIG": "tuner.toml"})
    assert result.returncode == 2 and "unknown key(s) drift_marginn" in result.stderr
