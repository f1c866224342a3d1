"""The Alembic migrations create exactly the schema the SQLAlchemy models describe."""

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


def test_alembic_upgrade_head_matches_the_models(tmp_path):
    url = f"sqlite:///{tmp_path / 'empty.db'}"
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


def test_out_of_date_schema_is_refused_with_the_fix(tmp_path):
    url = f"sqlite:///{tmp_path / 'old.db'}"
    open_database(url)
    engine = create_engine(url)
    with engine.begin() as connection:
        connection.execute(text(f"UPDATE {VERSION_TABLE} SET version_num = '0000'"))
    with pytest.raises(UsageError, match="run `tuner db upgrade --db"):
        open_database(url)
