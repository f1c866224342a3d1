"""Shared fixtures: paths of the repository, its workloads and the tiny models."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine_layout import default_to_in_process, one_core_per_worker

one_core_per_worker()  # before reference_study reads the environment its commands get
from reference_study import ReferenceStudy, make_reference_study  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
MODELS = Path(os.environ.get("TUNER_TINY_MODELS", ROOT / ".models"))

default_to_in_process()  # see tests/engine_layout.py
# What the tuner learns about the installed vLLM (tuner/engine/installed.py) is kept for this run
# only, shared by every tuner process the tests start: the first asks vLLM, the others read it.
if "TUNER_CACHE_DIR" not in os.environ:
    os.environ["TUNER_CACHE_DIR"] = tempfile.mkdtemp(prefix="tuner-test-cache-")
    atexit.register(shutil.rmtree, os.environ["TUNER_CACHE_DIR"], True)


def pytest_collection_modifyitems(config, items):
    """A test that reads the reference study runs where the study is made: in `make test`'s session
    of tests that run one at a time (marker ``solo``). Made again in a session beside other tests,
    it would cost its 7 starts twice and measure at half speed."""
    for item in items:
        if "reference_study" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.solo)


@pytest.fixture(scope="session")
def tiny_models() -> Path:
    """The models made by scripts/make_tiny_models.py (`make models`)."""
    if not (MODELS / "STAMP").exists():
        pytest.fail(f"no tiny models in {MODELS}: run `make models` (make test does it first)")
    return MODELS


@pytest.fixture(scope="session")
def reference_study(tmp_path_factory, tiny_models) -> ReferenceStudy:
    """ONE real study over every method (tests/reference_study.py), read by the tests of
    optimize, the methods, repeats, failed starts and the dashboard."""
    return make_reference_study(tmp_path_factory.mktemp("reference-study"), tiny_models)


# The store's tests run against both databases the tuner supports: SQLite (the default) and the
# real PostgreSQL of this machine (CI's too), each test on a database of its own.
POSTGRES_ADMIN = os.environ.get("TUNER_TEST_POSTGRES", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


@contextlib.contextmanager
def postgres_database() -> Iterator[str]:
    """A new, empty database on the PostgreSQL server, dropped afterwards."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.exc import OperationalError

    admin = create_engine(POSTGRES_ADMIN, isolation_level="AUTOCOMMIT")
    name = f"tuner_test_{uuid.uuid4().hex[:12]}"
    try:
        with admin.connect() as connection:
            connection.execute(text(f"CREATE DATABASE {name}"))
    except OperationalError as exc:
        pytest.fail(f"no PostgreSQL at {POSTGRES_ADMIN} ({exc.orig}); start it or set TUNER_TEST_POSTGRES")
    try:
        yield POSTGRES_ADMIN.rsplit("/", 1)[0] + "/" + name
    finally:
        with admin.connect() as connection:
            connection.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with postgres_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'tuner.db'}"
        return
    with postgres_database() as url:
        yield url
