"""`tuner serve` running scheduled jobs on the REAL vLLM server (CPU build, tiny models).

Two schedules fall due seconds after the service starts and want the same (the only) GPU set:
the second waits for the first. The second is then interrupted by SIGTERM mid-job: no server
process may outlive the service, and its completed trial must survive; a new service resumes
the job without measuring that trial again, and records how the run compares with the first.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from tuner.store import JobStore, ResultStore, open_database

from .serve_process import ServeProcess, small_workload, wait_for
from reference_study import ENV, SERVER_ARGS

pytestmark = pytest.mark.integration

JOB_OPTIONS = ["--method", "ngram", "--k", "2", "--concurrency", "2", "--warmup", "1",
               *SERVER_ARGS]


def once_at(when: datetime) -> str:
    """A cron expression (seconds last) that names one moment a year."""
    when = when.astimezone(timezone.utc)
    return f"{when.minute} {when.hour} {when.day} {when.month} * {when.second}"


def add_schedule(db: str, name: str, cron: str, workload: Path, model: Path, *options: str) -> None:
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-m", "tuner.cli", "schedule", "add", "--name", name, "--cron", cron,
                             "--workload", str(workload), "--model", str(model), "--db", db, *JOB_OPTIONS, *options],
                            capture_output=True, text=True, env=ENV, timeout=120)
    assert result.returncode == 0, result.stderr
    assert f"schedule {name!r} added" in result.stdout


def test_serve_runs_due_jobs_one_at_a_time_and_resumes_after_sigterm(tmp_path, tiny_models):
    db = f"sqlite:///{tmp_path / 'tuner.db'}"
    workload = small_workload(tmp_path)
    due = datetime.now(timezone.utc) + timedelta(seconds=20)
    add_schedule(db, "first", once_at(due), workload, tiny_models / "target", "--trials", "1")
    # The second job measures its whole (two-config) space: warm-started, it would stop after the
    # baseline whenever the first job found ngram k=2 no faster (greedy 32-token replays on two
    # noisy cores often do), and there would be no second trial to interrupt. The warm start
    # itself is tested in test_optimize_real.py.
    add_schedule(db, "second", once_at(due + timedelta(seconds=1)), workload, tiny_models / "target",
                 "--trials", "2", "--strategy", "grid")
    engine = open_database(db)
    jobs, results = JobStore(engine), ResultStore(engine)

    def job_of(name: str):
        found = [j for j in jobs.jobs() if j.schedule_name == name]
        return found[0] if found else None

    serve = ServeProcess(db, tmp_path / "jobs")
    try:
        first = wait_for("the first job to start", lambda: (j := job_of("first")) and j.status == "running" and j,
                         90, serve.process)
        # Both were due; the second wants the same GPUs, so it waits in the queue.
        second = wait_for("the second job to be queued", lambda: job_of("second"), 30, serve.process)
        assert second.status == "queued"
        first = wait_for("the first job to end", lambda: (j := job_of("first")).finished_at and j, 420,
                         serve.process)
        assert first.status == "finished", serve.log + Path(first.log_path).read_text()
        assert first.outcome == "first", first.outcome_detail
        assert [t.status for t in results.trials(study_name=first.study_name)] == ["complete"]
        second = wait_for("the second job to start", lambda: (j := job_of("second")).started_at and j, 30,
                          serve.process)
        assert second.started_at >= first.finished_at

        # SIGTERM once the second job has a completed trial and its next trial is under way.
        def mid_job():
            trials = results.trials(study_name=second.study_name)
            return len(trials) == 2 and trials[0].status == "complete" and trials[1].status == "running"

        wait_for("the second job's second trial", mid_job, 300, serve.process)
        children = serve.descendants()
        assert any("vllm" in " ".join(p.cmdline()) for p in children), [p.cmdline() for p in children]
        assert serve.terminate() == 0, serve.log
        alive = [p for p in children if p.is_running() and p.status() != "zombie"]
        assert alive == [], f"left running after SIGTERM: {[p.cmdline() for p in alive]}"
        interrupted = jobs.job(second.id)
        assert interrupted.status == "interrupted", serve.log
        kept = [t for t in results.trials(study_name=second.study_name) if t.status == "complete"]
        assert len(kept) == 1
    finally:
        if serve.process.poll() is None:
            serve.kill_everything()

    serve = ServeProcess(db, tmp_path / "jobs")
    try:
        resumed = wait_for("the interrupted job to finish", lambda: (j := jobs.job(second.id)).status in (
            "finished", "failed") and j, 420, serve.process)
        assert resumed.status == "finished", Path(resumed.log_path).read_text()
        assert resumed.attempts == 2
        trials = results.trials(study_name=second.study_name)
        # The interrupted trial stays on record; the resumed run measured only what was missing.
        assert [t.status for t in trials] == ["complete", "interrupted", "complete"]
        assert trials[0].optuna_trial_number == kept[0].optuna_trial_number  # not measured again
        assert trials[0].finished_at == kept[0].finished_at
        assert trials[2].config == trials[1].config
        assert resumed.outcome in ("unchanged", "new best", "regressed")
        assert first.study_name in resumed.outcome_detail  # compared with the first job's study
        page = serve.get("/jobs")
        assert page.status_code == 200 and resumed.outcome in page.text
        api = serve.get("/api/jobs").json()
        assert {j["id"]: j["outcome"] for j in api["jobs"]} == {first.id: "first", second.id: resumed.outcome}
        assert serve.terminate() == 0
    finally:
        if serve.process.poll() is None:
            serve.kill_everything()
