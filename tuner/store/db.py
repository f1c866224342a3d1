"""Opening the results database: URL, SQLite settings, and the schema version check."""

from __future__ import annotations

import os
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, event, inspect
from sqlalchemy.exc import SQLAlchemyError

from tuner.errors import TunerError, UsageError

DB_ENV = "TUNER_DB"
DEFAULT_DB = "sqlite:///tuner.db"
VERSION_TABLE = "tuner_alembic_version"  # Optuna keeps its own alembic_version in the same database
# Shipped inside the package (package data), so a regular install or a wheel finds them too.
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


def database_url(url: str | None = None) -> str:
    """The URL given, else $TUNER_DB, else SQLite in the working folder. A bare postgresql://
    URL means psycopg 3 (a dependency), not SQLAlchemy's default driver psycopg2."""
    url = url or os.environ.get(DB_ENV) or DEFAULT_DB
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    # WAL lets a reader (the dashboard) read while a study writes; the busy timeout makes a
    # writer wait for a lock instead of failing at once.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()
    _sqlite_lock_pragmas(dbapi_connection, _record)


def _sqlite_read_pragmas(dbapi_connection, _record) -> None:
    # A reader never sets the journal mode (a write; WAL stays set in a file we created), and
    # SQLite itself refuses any write on this connection.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA query_only=ON")
    cursor.close()
    _sqlite_lock_pragmas(dbapi_connection, _record)


def _sqlite_lock_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _first_line(exc: BaseException) -> str:
    """A driver's message can run to several lines (URL forms, connection attempts): its first."""
    return str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]


def make_engine(url: str, read_only: bool = False) -> Engine:
    """An engine for ``url``, or one sentence on what is wrong with the URL: its kind, a driver
    that is not installed, the folder of a SQLite file that does not exist. ``read_only``: the
    database refuses writes on this engine."""
    try:
        engine = create_engine(url)
    except ImportError as exc:
        raise UsageError(f"the database URL {url!r} needs the Python module {exc.name!r}, which is not "
                         "installed; install it or use sqlite:///tuner.db or postgresql://user@host/db") from None
    except (SQLAlchemyError, ValueError) as exc:
        raise UsageError(f"cannot use the database URL {url!r} ({_first_line(exc)}); "
                         "write it like sqlite:///tuner.db or postgresql://user@host/db") from None
    file = _sqlite_file(engine)
    if file is not None and not file.parent.is_dir():
        raise UsageError(f"the folder {file.parent} of the database {url} does not exist; create it "
                         "or pass another --db")
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_read_pragmas if read_only else _sqlite_pragmas)
    elif read_only and engine.dialect.name == "postgresql":
        engine = engine.execution_options(postgresql_readonly=True)
    return engine


def _sqlite_file(engine: Engine) -> Path | None:
    """The file of a SQLite engine (None: another database, or SQLite in memory)."""
    name = engine.url.database if engine.dialect.name == "sqlite" else None
    return Path(name) if name and name != ":memory:" and not name.startswith("file:") else None


def no_database(url: str) -> UsageError:
    return UsageError(f"there is no results database at {url}; pass the --db of an existing one, "
                      f"or create it with `tuner optimize --db {url}`")


def _existing(url: str, read_only: bool = False) -> Engine:
    """An engine on a database that is already there: SQLite would create a missing file."""
    engine = make_engine(url, read_only)
    file = _sqlite_file(engine)
    if file is not None and not file.exists():
        raise no_database(url)
    return engine


def open_read_only(url: str | None = None) -> Engine:
    """An engine that can only read (the dashboard): nothing is created or upgraded, and the
    database refuses writes, so a running study is never blocked by a lock of ours."""
    return open_database(url, read_only=True)


HEARTBEAT_S = 30  # a running trial's heartbeat; after 3 missed ones another worker reruns it


def optuna_storage(url: str, heartbeat_s: int = HEARTBEAT_S, *, create_tables: bool = True):
    """Optuna's RDB storage on the same database; SQLite waits for locks like our own engine.
    ``create_tables=False``: Optuna's tables are not created where missing (a read-only open).

    Running trials send heartbeats. A trial whose worker died (no heartbeat for three intervals)
    is failed by the next worker that looks, and Optuna queues it again
    (RetryHeartbeatStaleTrialCallback), so another worker reruns it."""
    import optuna

    url = database_url(url)
    kwargs = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {}
    return optuna.storages.RDBStorage(
        url, engine_kwargs=kwargs, heartbeat_interval=heartbeat_s, grace_period=3 * heartbeat_s,
        heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=2),
        skip_table_creation=not create_tables)


def alembic_config(url: str) -> Config:
    url = database_url(url)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str:
    return ScriptDirectory.from_config(alembic_config(DEFAULT_DB)).get_current_head()


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()


def upgrade(url: str) -> None:
    """Bring the schema to the newest revision (``tuner db upgrade`` / ``alembic upgrade head``)."""
    make_engine(database_url(url)).dispose()  # a bad URL is refused in one sentence, not by Alembic
    try:
        command.upgrade(alembic_config(url), "head")
    except SQLAlchemyError as exc:
        raise TunerError(f"upgrading the database {url} failed: {exc}") from None


def open_database(url: str | None = None, *, create: bool = True, read_only: bool = False) -> Engine:
    """An engine on an up-to-date schema. A new database is created, unless ``create`` is False
    (commands that only read it, or change what is there, never create one); an old one is refused.
    ``read_only``: nothing is created or upgraded, and the database refuses writes on this engine.
    Most code opens it as ``tuner.store.Database.open``."""
    url = database_url(url)
    create = create and not read_only
    engine = make_engine(url) if create else _existing(url, read_only)
    try:
        revision = current_revision(engine)
        tuner_tables = [t for t in inspect(engine).get_table_names() if t.startswith("tuner_")]
    except SQLAlchemyError as exc:
        raise UsageError(f"cannot open the database {url} ({exc.__class__.__name__}: {_first_line(exc)}); "
                         "check the URL and that the database server is up") from None
    if revision is None and not tuner_tables:
        if not create:
            raise no_database(url)
        upgrade(url)
    elif revision != head_revision():
        raise UsageError(f"the database {url} has schema revision {revision}, this tuner needs "
                         f"{head_revision()}; run `tuner db upgrade --db {url}` first")
    return engine
