"""Safety of the dashboard on the real study's database: text from the database is escaped,
nothing can be written through it, and it refuses a database it would have to create."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tuner.errors import UsageError
from tuner.web import create_app

from .conftest import Dashboard

pytestmark = pytest.mark.integration

EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'


def test_html_in_a_model_name_is_shown_escaped(dashboard: Dashboard, tmp_path: Path) -> None:
    copy = tmp_path / "evil.db"
    shutil.copy(dashboard.db_url.removeprefix("sqlite:///"), copy)
    with sqlite3.connect(copy) as db:
        db.execute("UPDATE tuner_models SET name = ?", (EVIL,))
    client = TestClient(create_app(f"sqlite:///{copy}"))
    overview = client.get("/")
    assert overview.status_code == 200
    assert EVIL not in overview.text and "<script>alert" not in overview.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in overview.text
    model = client.get("/model", params={"model": EVIL, "type": "code"})
    assert model.status_code == 200 and "<script>alert" not in model.text
    assert client.get("/api/best").json()[0]["model"] == EVIL  # JSON carries it as data


def test_nothing_can_be_written(dashboard: Dashboard) -> None:
    client = TestClient(create_app(dashboard.db_url))
    for method in ("post", "put", "delete", "patch"):
        assert getattr(client, method)("/api/best").status_code == 405
    # Even the dashboard's own connection cannot write: SQLite answers query_only.
    from tuner.store import open_read_only
    with open_read_only(dashboard.db_url).connect() as connection:
        with pytest.raises(Exception, match="readonly|query_only|attempt to write"):
            connection.exec_driver_sql("DELETE FROM tuner_trials")


def test_a_missing_database_is_refused_not_created(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="no results database"):
        create_app(f"sqlite:///{tmp_path / 'nope.db'}")
    assert not (tmp_path / "nope.db").exists()
