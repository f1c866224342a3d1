"""The schedule room on a real SQLite database: cron, no pile-up of missed runs, GPU queues,
outcomes, drift bookkeeping and the serve settings. Jobs here are never started (a leftover of a
dead service is a stand-in process); the real `tuner serve` runs are in
tests/integration/test_serve_real.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from fakes import stored_request
from tuner.errors import UsageError
from tuner.schedule.config import ServeSettings, load_config
from tuner.schedule.cron import check_cron, next_time
from tuner.metrics.prometheus import LiveAcceptance, queries
from tuner.schedule.drift import DriftWatch, Reference
from tuner.schedule.outcome import compare, study_outcome
from tuner.schedule.runner import JobRunner, overlaps
from tuner.schedule.service import TuningService, enqueue_run
from tuner.decide.verdict import study_verdict
from tuner.store import Database, JobStore, TrialRow

UTC = timezone.utc
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


@pytest.fixture
def database(db_url):
    database = Database.open(db_url)
    yield database
    database.dispose()


@pytest.fixture
def jobs(database):
    return database.jobs


def add(jobs: JobStore, name: str, cron: str = "0 2 * * *", gpus: str | None = None, created=T0):
    row = jobs.add_schedule(name=name, cron=cron, timezone="UTC", model="m", workload="/w/code.jsonl",
                            workload_type="code", request=stored_request(k="1-4"), gpus=gpus)
    jobs.set_fired(row.id, created)  # as if created at T0
    return jobs.schedule(name)


def test_cron_times_are_wall_clock_times_of_the_zone():
    after = datetime(2026, 6, 30, 12, 0, tzinfo=UTC)
    berlin = next_time("0 2 * * *", "Europe/Berlin", after)
    assert berlin.astimezone(UTC) == datetime(2026, 7, 1, 0, 0, tzinfo=UTC)  # 02:00 CEST = 00:00 UTC
    assert next_time("0 2 * * 0", "UTC", after).weekday() == 6  # cron's 0 is Sunday
    assert next_time("* * * * * */20", "UTC", after) == after + timedelta(seconds=20)


@pytest.mark.parametrize("cron,tz,cause", [("61 * * * *", "UTC", "not a cron expression"),
                                            ("0 2 * *", "UTC", "not a cron expression"),
                                            ("0 2 * * *", "Mars/Olympus", "not a time zone")])
def test_bad_cron_or_zone_is_one_sentence(cron, tz, cause):
    with pytest.raises(UsageError, match=cause):
        check_cron(cron, tz)


def test_runs_missed_while_down_make_one_job_not_a_pile(jobs, database, tmp_path):
    schedule = add(jobs, "nightly", cron="0 2 * * *")
    service = TuningService(ServeSettings(log_dir=tmp_path), database)
    assert service.fire_due(T0 + timedelta(hours=13)) == []  # 01:00 the next day: not yet
    three_days_later = T0 + timedelta(days=3)  # 3 nightly times missed
    queued = service.fire_due(three_days_later)
    assert [j.schedule_name for j in queued] == ["nightly"]
    assert service.fire_due(three_days_later + timedelta(minutes=1)) == []
    assert jobs.schedule("nightly").last_fired_at == three_days_later
    # Due again the next night, but the first job has not run yet: still one job.
    assert service.fire_due(three_days_later + timedelta(days=1)) == []
    assert len(jobs.jobs(schedule_id=schedule.id)) == 1


def test_each_run_is_a_new_study_with_the_schedule_options(jobs):
    schedule = add(jobs, "nightly")
    job = enqueue_run(jobs, schedule, "run-now", T0)
    assert job.study_name == "nightly 2026-11-30 12:00:00"
    assert job.request == {**schedule.request, "name": job.study_name}
    assert job.request["space"]["ks"] == [1, 2, 3, 4] and job.request["workload"] == "/w/code.jsonl"


def test_gpu_sets_overlap():
    assert overlaps("0", "0,1") and not overlaps("0", "1")
    assert overlaps(None, "3") and overlaps(None, None)  # no set = every GPU


def test_jobs_wait_for_their_gpus_in_queue_order(jobs, database, tmp_path, monkeypatch):
    runner = JobRunner(database, tmp_path)
    started = []
    monkeypatch.setattr(runner, "_start", lambda job: started.append(job.schedule_name) or True)
    on_0 = add(jobs, "a", gpus="0")
    on_01 = add(jobs, "b", gpus="0,1")
    on_1 = add(jobs, "c", gpus="1")
    on_2 = add(jobs, "d", gpus="2")
    for i, s in enumerate((on_0, on_01, on_1, on_2)):
        enqueue_run(jobs, s, "schedule", T0 + timedelta(seconds=i))
    runner.running = {}
    # Nothing runs: a starts; b waits for GPU 0; c would fit on GPU 1 but b is ahead of it.
    runner.start_ready()
    assert started == ["a", "d"]


def test_claiming_a_job_twice_fails(jobs):
    job = enqueue_run(jobs, add(jobs, "a"), "schedule", T0)
    assert jobs.claim(job.id, "/tmp/a.log")
    assert not jobs.claim(job.id, "/tmp/b.log")
    jobs.finish(job.id, "interrupted", 130)
    assert [j.id for j in jobs.requeue_unfinished()] == [job.id]
    assert jobs.job(job.id).status == "queued"


def test_removing_a_schedule_drops_its_queue_but_keeps_its_history(jobs):
    schedule = add(jobs, "a")
    done = enqueue_run(jobs, schedule, "schedule", T0)
    jobs.claim(done.id, "/tmp/a.log")
    jobs.finish(done.id, "finished", 0, "first", "x")
    enqueue_run(jobs, schedule, "schedule", T0 + timedelta(days=1))
    assert jobs.remove_schedule("a")
    assert [(j.id, j.schedule_id, j.schedule_name) for j in jobs.jobs()] == [(done.id, None, "a")]


def row(study, config, tokens_per_s, minutes, rate=None, length=None):
    return TrialRow(study_name=study, model="m", workload_type="code", load="concurrency 1",
                    optuna_trial_number=0, config=config, label="baseline" if config is None else str(config),
                    status="complete", failure_cause=None, server_log_path=None, tokens_per_s=tokens_per_s,
                    tpot_p50_s=0.01, ttft_p50_s=0.1, acceptance_rate=rate, mean_acceptance_length=length,
                    per_position=None, finished_at=T0 + timedelta(minutes=minutes), vllm_version="0.32.0",
                    host="h", server_args=[])


NGRAM3 = {"method": "ngram", "num_speculative_tokens": 3}
NGRAM5 = {"method": "ngram", "num_speculative_tokens": 5}


def test_outcomes_against_the_study_before():
    before = [row("old", None, 100, 0), row("old", NGRAM3, 150, 1)]
    assert study_outcome("old", before, 0.05).kind == "first"

    def outcome(new_config, new_tokens_per_s):
        new = [row("new", None, 100, 10), row("new", new_config, new_tokens_per_s, 11)]
        return study_outcome("new", before + new, 0.05)

    assert outcome(NGRAM3, 148).kind == "unchanged"  # 1.48x vs 1.50x: within the noise
    assert outcome(NGRAM5, 160).kind == "new best"
    regressed = outcome(NGRAM3, 130)  # 1.30x vs 1.50x
    assert regressed.kind == "regressed" and "1.50x in old" in regressed.detail
    # Speculation no longer pays: the recommendation is the baseline, 1.00x.
    assert outcome(NGRAM3, 102).kind == "regressed"


def test_compare_ranks_regression_over_change():
    old = study_verdict([row("old", None, 100, 0), row("old", NGRAM3, 150, 1)])
    new = study_verdict([row("new", None, 100, 10), row("new", NGRAM5, 120, 11)])
    assert compare(old, new, 0.05).kind == "regressed"
    assert compare(None, new, 0.05).kind == "first"


def reference(rate=0.6, length=2.8):
    from tuner.store import ScheduleRow
    schedule = ScheduleRow(1, "a", "0 2 * * *", "UTC", "m", "/w", "code", [], None, "live-m", True, T0, None)
    return Reference(schedule, "old", "ngram k=3", rate, length)


def test_drift_needs_both_figures_low_for_the_whole_hold_time():
    watch = DriftWatch(margin=0.2, hold_s=60)
    ref = reference()
    low = {"live-m": {"": LiveAcceptance(rate=0.3, length=1.9)}}
    assert watch.check(T0, [ref], low) == []
    assert watch.check(T0 + timedelta(seconds=30), [ref], low) == []
    # Longer drafts in production: a lower rate but a longer length is not drift.
    assert watch.check(T0 + timedelta(seconds=45), [ref], {"live-m": {"": LiveAcceptance(0.3, 3.0)}}) == []
    assert watch.check(T0 + timedelta(seconds=90), [ref], low) == []  # the clock restarted at 90 s
    found = watch.check(T0 + timedelta(seconds=150), [ref], low)
    assert len(found) == 1 and found[0].held_s == 60
    assert "stayed below the tuned ngram k=3" in found[0].text
    # No traffic (no series) restarts the clock too.
    assert watch.check(T0 + timedelta(seconds=151), [ref], {}) == []
    assert watch.below_since == {}


def test_drift_queries_sum_per_model_and_type_over_the_window():
    q = queries(300)
    by = "sum by (model_name, workload_type)"
    assert q["rate"] == (f"{by} (increase(vllm:spec_decode_num_accepted_tokens_total[300s])) / "
                         f"{by} (increase(vllm:spec_decode_num_draft_tokens_total[300s]))")
    assert q["length"].startswith("1 + ") and "vllm:spec_decode_num_drafts_total[300s]" in q["length"]


@pytest.fixture
def no_serve_env(monkeypatch):
    for key in [k for k in os.environ if k.startswith("TUNER_")]:
        monkeypatch.delenv(key)
    return monkeypatch


def test_serve_settings_flag_over_config_over_default(tmp_path: Path, no_serve_env):
    config = tmp_path / "tuner.toml"
    config.write_text('[serve]\nport = 9000\ndrift_margin = 0.3\nprometheus = "http://p:9090"\n')
    settings = ServeSettings.load({"config": config, "port": 8123, "drift_margin": None})
    assert settings.port == 8123 and settings.drift_margin == 0.3
    assert settings.prometheus == "http://p:9090" and settings.drift_for == 600.0
    config.write_text('[serve]\nprot = 9000\n')
    with pytest.raises(UsageError, match="unknown key.*prot"):
        load_config(config)
    with pytest.raises(UsageError, match="between 0 and 1"):
        ServeSettings.load({"drift_margin": 1.5})
    with pytest.raises(UsageError, match="port = 'abc' must be a number"):
        ServeSettings.load({"port": "abc"})


def test_serve_settings_environment_over_config_file(tmp_path: Path, no_serve_env):
    config = tmp_path / "tuner.toml"
    config.write_text('[serve]\nport = 9000\ntoken = "from-file"\nprometheus = "http://file:9090"\n'
                      'log_dir = "/file/jobs"\n')
    no_serve_env.setenv("TUNER_CONFIG", str(config))
    no_serve_env.setenv("TUNER_PORT", "9100")
    no_serve_env.setenv("TUNER_DASHBOARD_TOKEN", "from-env")  # the documented names, not TUNER_TOKEN
    no_serve_env.setenv("TUNER_PROMETHEUS_URL", "")  # empty: unset
    settings = ServeSettings.load({})
    assert (settings.port, settings.token, settings.prometheus) == (9100, "from-env", "http://file:9090")
    assert settings.log_dir == Path("/file/jobs") and settings.host == "127.0.0.1"
    flagged = ServeSettings.load({"port": 8123, "token": "from-flag", "prometheus": None})
    assert (flagged.port, flagged.token) == (8123, "from-flag")
    with pytest.raises(UsageError, match="port = 70000"):
        ServeSettings.load({"port": 70000})


def fake_leftover(job_id: int, ignore_sigint: bool) -> subprocess.Popen:
    """A process that looks like a job's `tuner run-request` (its argv names the job's request), in a session
    of its own, as a dead service would have left it; a thread reaps it, as its new parent would."""
    # Not ignoring: Python's own SIGINT handler, as tuner.cli.main installs it (a process started in
    # the background of a non-interactive shell, as a test run may be, inherits SIGINT ignored).
    handler = "signal.SIG_IGN" if ignore_sigint else "signal.default_int_handler"
    code = ("import signal, sys, time\n"
            + f"signal.signal(signal.SIGINT, {handler})\n"
            + "print('ready', flush=True)\ntime.sleep(60)\n")
    process = subprocess.Popen([sys.executable, "-c", code, "run-request", f"/jobs/job-{job_id}.request.json"],
                               start_new_session=True,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert process.stdout.readline() == b"ready\n"  # its SIGINT handling is in place
    threading.Thread(target=process.wait, daemon=True).start()
    return process


@pytest.mark.parametrize("ignore_sigint,ended_by", [(False, signal.SIGINT), (True, signal.SIGKILL)],
                         ids=["stops-on-sigint", "killed-after-grace"])
def test_a_job_the_dead_service_left_running_is_interrupted_then_killed(jobs, database, tmp_path,
                                                                        ignore_sigint, ended_by):
    job = enqueue_run(jobs, add(jobs, "nightly"), "schedule", T0)
    assert jobs.claim(job.id, str(tmp_path / "job.log"))
    process = fake_leftover(job.id, ignore_sigint)
    jobs.set_pid(job.id, process.pid)
    # A grace of 5 s: Python's exit on SIGINT took over 1 s on the loaded CI host (killed instead).
    JobRunner(database, tmp_path).stop_leftovers(grace_s=5.0)
    assert process.wait(timeout=15) == -ended_by
