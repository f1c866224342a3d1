"""The Alembic migrations create exactly the schema the SQLAlchemy models describe."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect, text

from tuner.errors import UsageError
from tuner.store import open_database
from tuner.store.db import VERSION_TABLE, head_revision
from tuner.store.models import Base

ROOT = Path(__file__).resolve().parents[2]


def _insert_model_and_workload(c) -> None:
    """The model and workload rows (id 1) that an old schema's study run points to."""
    c.execute(text("INSERT INTO tuner_models (id, name, created_at) VALUES (1, 'm', '2026-11-01')"))
    c.execute(text("INSERT INTO tuner_workloads (id, type, file_name, content_hash, request_count, "
                   "created_at) VALUES (1, 'code', 'code.jsonl', 'h', 3, '2026-11-01')"))


def test_alembic_upgrade_head_matches_the_models(db_url):
    url = db_url
    subprocess.run([sys.executable, "-m", "alembic", "upgrade", "head"], cwd=ROOT, check=True,
                   env={**os.environ, "TUNER_DB": url}, capture_output=True)
    engine = create_engine(url)
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        assert context.get_current_revision() == head_revision()
        assert compare_metadata(context, Base.metadata) == []
    tables = set(inspect(engine).get_table_names()) - {VERSION_TABLE}
    assert tables == set(Base.metadata.tables)


def test_new_database_is_created_and_uses_wal(tmp_path):
    engine = open_database(f"sqlite:///{tmp_path / 'new.db'}")
    with engine.connect() as connection:
        assert connection.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert connection.execute(text("PRAGMA busy_timeout")).scalar() == 30000


def test_out_of_date_schema_is_refused_with_the_fix(db_url):
    url = db_url
    open_database(url)
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '0000'"))
    with pytest.raises(UsageError, match="run `tuner db upgrade --db"):
        open_database(url)


def test_upgrade_from_0002_keeps_the_figures_and_files_them_under_the_run_load(db_url):
    from alembic import command

    from tuner.store import ResultStore
    from tuner.store.db import alembic_config, upgrade

    url = db_url
    command.upgrade(alembic_config(url), "0002")
    engine = create_engine(url)
    with engine.begin() as c:
        _insert_model_and_workload(c)
        c.execute(text("INSERT INTO tuner_study_runs (id, study_name, model_id, workload_id, space, load, "
                       "server_args, host, status, started_at) VALUES (1, 's', 1, 1, '{}', "
                       "'concurrency 2', '[]', 'h', 'finished', '2026-11-01')"))
        c.execute(text("INSERT INTO tuner_trials (id, study_run_id, optuna_trial_number, config, label, "
                       "status, started_at) VALUES (1, 1, 0, 'null', 'baseline', 'complete', '2026-11-01')"))
        c.execute(text("INSERT INTO tuner_trial_metrics (id, trial_id, output_tokens_per_s, requests_per_s, "
                       "requests, failed_requests, output_tokens, errors, server_generation_tokens, repeats) "
                       "VALUES (1, 1, 123.5, 1.0, 3, 0, 100, '[]', 100, 2)"))
        for repeat, tps in ((0, 120.0), (1, 127.0)):
            c.execute(text("INSERT INTO tuner_trial_runs (trial_id, repeat, output_tokens_per_s, "
                           "failed_requests, server_generation_tokens, output_digests) "
                           f"VALUES (1, {repeat}, {tps}, 0, 50, '{{}}')"))
    upgrade(url)
    store = ResultStore(open_database(url))
    (row,) = store.trials()
    assert (row.load, row.tokens_per_s, row.kind, row.predicted_tokens_per_s) == (
        "concurrency 2", 123.5, "study", None)
    assert store.run_tokens_per_s("s") == {(0, "concurrency 2"): [120.0, 127.0]}
    command.downgrade(alembic_config(url), "0002")  # and back, for a rollback
    with engine.connect() as c:
        assert c.execute(text("SELECT output_tokens_per_s FROM tuner_trial_metrics")).scalar() == 123.5


def test_upgrade_from_0005_renames_the_k_by_batch_size_column_and_trial_kind(db_url):
    from alembic import command

    from tuner.store import ResultStore
    from tuner.store.db import alembic_config, upgrade

    url = db_url
    command.upgrade(alembic_config(url), "0005")
    record = {"config": {"method": "ngram", "num_speculative_tokens": 3,
                         "num_speculative_tokens_per_batch_size": [[1, 2, 3], [3, 4, 2]]},
              "beats_best_single": True}
    engine = create_engine(url)
    with engine.begin() as c:
        _insert_model_and_workload(c)
        c.execute(text("INSERT INTO tuner_study_runs (id, study_name, model_id, workload_id, space, load, "
                       "server_args, host, status, started_at, schedule) VALUES (1, 's', 1, 1, '{}', "
                       "'concurrency 1,4', '[]', 'h', 'finished', '2026-11-01', :record)"),
                  {"record": json.dumps(record)})
        for trial_id, number, kind in ((1, 0, "study"), (2, -1, "schedule")):
            c.execute(text("INSERT INTO tuner_trials (id, study_run_id, optuna_trial_number, config, label, "
                           "kind, status, started_at) VALUES (:id, 1, :number, 'null', 'x', :kind, "
                           "'complete', '2026-11-01')"), {"id": trial_id, "number": number, "kind": kind})
    upgrade(url)
    store = ResultStore(open_database(url))
    assert store.study_rules()["s"]["k_by_batch_size"] == record
    assert {row.optuna_trial_number: row.kind for row in store.trials()} == {0: "study", -1: "k_by_batch_size"}
    command.downgrade(alembic_config(url), "0005")  # and back, for a rollback
    with engine.connect() as c:
        stored = c.execute(text("SELECT schedule FROM tuner_study_runs")).scalar()
        assert (json.loads(stored) if isinstance(stored, str) else stored) == record  # PostgreSQL parses it
        assert sorted(c.execute(text("SELECT kind FROM tuner_trials")).scalars()) == ["schedule", "study"]


def test_the_migrations_live_in_alembic_and_the_package_reaches_them():
    """The design's top-level alembic/ holds the migrations; the package reaches them through
    tuner/store/migrations (a link in the checkout; the wheel holds the files, which
    tests/integration/test_wheel_install.py checks), and alembic.ini points at alembic/."""
    import configparser
    from pathlib import Path

    from tuner.store.db import MIGRATIONS_DIR

    root = Path(__file__).resolve().parents[2]
    versions = root / "alembic" / "versions"
    assert versions.is_dir() and not (root / "alembic").is_symlink()
    assert sorted(p.name for p in versions.glob("0001_*.py")) == ["0001_results_schema.py"]
    assert MIGRATIONS_DIR.resolve() == (root / "alembic").resolve()
    ini = configparser.RawConfigParser()
    ini.read(root / "alembic.ini")
    assert ini["alembic"]["script_location"] == "%(here)s/alembic"


def test_a_read_only_open_of_a_missing_database_refuses_and_creates_nothing(tmp_path):
    from tuner.store import Database

    url = f"sqlite:///{tmp_path / 'missing.db'}"
    with pytest.raises(UsageError, match="there is no results database at sqlite:///"):
        Database.open(url, read_only=True)
    with pytest.raises(UsageError, match="there is no results database"):
        Database.open(url, create=False)
    assert list(tmp_path.iterdir()) == []  # no file, no -wal or -shm beside it
    # An empty file (a database without our schema) is no results database either, and stays empty.
    (tmp_path / "missing.db").touch()
    with pytest.raises(UsageError, match="there is no results database"):
        Database.open(url, read_only=True)
    assert (tmp_path / "missing.db").stat().st_size == 0


def test_one_database_object_gives_the_stores_and_optuna_storage(db_url):
    from tuner.store import Database, JobStore, ResultStore

    database = Database.open(db_url)
    try:
        assert database.url == db_url.replace("postgresql://", "postgresql+psycopg://")
        assert isinstance(database.results, ResultStore) and isinstance(database.jobs, JobStore)
        # One engine under both stores; each store made once.
        assert database.results.engine is database.jobs.engine is database.engine
        assert database.results is database.results and database.jobs is database.jobs
        # Optuna builds its own engine from the URL (RDBStorage takes none): the same database.
        storage = database.optuna()
        assert storage is database.optuna(30) and storage.heartbeat_interval == 30
        assert database.optuna(5) is not storage and database.optuna(5).heartbeat_interval == 5
        assert storage.engine.url.render_as_string(hide_password=False) == \
            database.engine.url.render_as_string(hide_password=False)
    finally:
        database.dispose()


def test_a_read_only_database_refuses_writes(tmp_path):
    from tuner.store import Database

    url = f"sqlite:///{tmp_path / 'tuner.db'}"
    Database.open(url).dispose()  # created
    database = Database.open(url, read_only=True)
    assert database.jobs.schedules() == []
    with pytest.raises(Exception, match="readonly|read-only|read only"):
        database.jobs.add_schedule(name="a", cron="0 2 * * *", timezone="UTC", model="m",
                                   workload="/w/code.jsonl", workload_type="code", request={})
    database.dispose()


def test_upgrade_from_0009_keeps_old_schedule_options_and_refuses_to_run_them(db_url, tmp_path):
    """A schedule and a job stored as `tuner optimize` arguments, before study requests: the
    upgrade keeps the arguments (inside the request), the schedule list says to add it again, and
    the service fails such a job with that sentence instead of starting anything."""
    from alembic import command

    from tuner.plan.request import summary
    from tuner.schedule.runner import JobRunner
    from tuner.store import Database
    from tuner.store.db import alembic_config, upgrade

    command.upgrade(alembic_config(db_url), "0009")
    with create_engine(db_url).begin() as c:
        c.execute(text("INSERT INTO tuner_schedules (id, name, cron, timezone, model, workload, workload_type, "
                       "optimize_args, enabled, created_at) VALUES (1, 'nightly', '0 2 * * *', 'UTC', 'm', "
                       "'/w/code.jsonl', 'code', :args, true, '2026-11-01')"), {"args": json.dumps(["--k", "1-4"])})
        c.execute(text("INSERT INTO tuner_jobs (id, schedule_id, schedule_name, reason, model, study_name, argv, "
                       "status, attempts, due_at) VALUES (1, 1, 'nightly', 'schedule', 'm', 'nightly 1', :argv, "
                       "'queued', 0, '2026-11-01')"), {"argv": json.dumps(["--name", "nightly 1", "--k", "1-4"])})
    upgrade(db_url)
    database = Database.open(db_url)
    (schedule,) = database.jobs.schedules()
    assert schedule.request == {"before_requests": ["--k", "1-4"]}
    assert summary(schedule.request) == ("stored by an older tuner (optimize options: --k 1-4); remove the "
                                         "schedule and add it again")
    runner = JobRunner(database, tmp_path)
    assert runner.start_ready() == [] and runner.running == {}
    job = database.jobs.job(1)
    assert job.status == "failed" and job.outcome_detail == (
        "job 1 of 'nightly' was stored by an older tuner as `tuner optimize --name nightly 1 --k 1-4`; "
        "remove the schedule and add it again with those options")
    database.dispose()
