"""The dashboard's Jobs page and /api/jobs over a real SQLite database with a schedule, jobs
with outcomes, and a drift event; text from the database is escaped."""

from __future__ import annotations

from datetime import datetime, timezone

from fastapi.testclient import TestClient

from fakes import stored_request
from tuner.schedule.service import enqueue_run
from tuner.store import JobStore, open_database
from tuner.web import create_app

EVIL = "<script>alert(1)</script>"


def test_jobs_page_shows_schedules_outcomes_and_drift(tmp_path, db_url):
    db = db_url
    jobs = JobStore(open_database(db))
    schedule = jobs.add_schedule(name="nightly", cron="0 2 * * *", timezone="Europe/Berlin", model=EVIL,
                                 workload="/w/code.jsonl", workload_type="code",
                                 request=stored_request(k="1-4"), gpus="0")
    done = enqueue_run(jobs, schedule, "schedule", datetime(2026, 11, 29, 1, tzinfo=timezone.utc))
    jobs.claim(done.id, str(tmp_path / "job.log"))
    (tmp_path / "job.log").write_text("trial 0: baseline\nerror: something\n")
    jobs.finish(done.id, "finished", 0, "regressed", "ngram k=3: 1.10x, below ngram k=3: 1.50x in old")
    retune = enqueue_run(jobs, schedule, "drift", datetime(2026, 11, 30, 1, tzinfo=timezone.utc),
                         detail="live acceptance fell")
    jobs.add_drift_event(model=EVIL, live_model_name=EVIL, live_acceptance_rate=0.2, live_acceptance_length=1.5,
                         tuned_acceptance_rate=0.6, tuned_acceptance_length=2.8, tuned_study="old",
                         margin=0.15, held_s=600, job_id=retune.id, note="re-tune queued as job 2")
    client = TestClient(create_app(db))

    page = client.get("/jobs")
    assert page.status_code == 200
    assert EVIL not in page.text and "&lt;script&gt;" in page.text
    assert "<strong>regressed</strong>: ngram k=3: 1.10x" in page.text
    assert "re-tune queued as job 2" in page.text and "0.20 / 1.50" in page.text
    assert "T02:00:00+01:00" in page.text  # next run, in the schedule's zone

    api = client.get("/api/jobs").json()
    assert [(j["id"], j["reason"], j["status"], j["outcome"]) for j in api["jobs"]] == [
        (retune.id, "drift", "queued", None), (done.id, "schedule", "finished", "regressed")]
    assert api["schedules"][0]["last_job"]["id"] == retune.id
    assert api["drift"][0]["job_id"] == retune.id

    job = client.get("/job", params={"id": done.id})
    assert job.status_code == 200 and "error: something" in job.text
    assert client.get("/api/job", params={"id": 99}).status_code == 404
