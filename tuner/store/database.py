"""One results database: its URL, one engine, the stores over it and Optuna's storage on it.

Every part of the tuner that touches the database opens it here, ``Database.open(url)``, and
reads ``.results``, ``.jobs`` and ``.optuna(heartbeat)``; nothing else assembles
URL -> engine -> stores -> Optuna storage itself.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from sqlalchemy import Engine

from tuner.store.db import HEARTBEAT_S, database_url, open_database, optuna_storage
from tuner.store.jobs import JobStore
from tuner.store.results import ResultStore

if TYPE_CHECKING:
    import optuna


class Database:
    """An open results database on an up-to-date schema. Open it with ``Database.open``."""

    def __init__(self, url: str, engine: Engine, read_only: bool):
        self._url, self._engine, self._read_only = url, engine, read_only
        self._optuna: dict[int, optuna.storages.RDBStorage] = {}

    @classmethod
    def open(cls, url: str | None = None, read_only: bool = False, *, create: bool = True) -> Database:
        """The database at ``url`` (else $TUNER_DB, else sqlite:///tuner.db), its schema created
        or checked. ``read_only``: nothing is created (a missing database is refused in one
        sentence) and the database itself refuses our writes (the dashboard, `tuner best`).
        ``create=False``: writes are allowed, but a missing database is refused, never created
        (commands that change what is there, like `tuner schedule remove`)."""
        url = database_url(url)
        return cls(url, open_database(url, create=create, read_only=read_only), read_only)

    @property
    def url(self) -> str:
        return self._url

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def read_only(self) -> bool:
        return self._read_only

    @cached_property
    def results(self) -> ResultStore:
        return ResultStore(self._engine)

    @cached_property
    def jobs(self) -> JobStore:
        return JobStore(self._engine)

    def optuna(self, heartbeat: int | None = None) -> optuna.storages.RDBStorage:
        """Optuna's RDB storage on this database, running trials sending a heartbeat every
        ``heartbeat`` seconds (default 30); one per heartbeat value. Optuna builds its engine
        from the URL itself (RDBStorage takes no engine), with the same SQLite lock wait."""
        heartbeat = HEARTBEAT_S if heartbeat is None else heartbeat
        if heartbeat not in self._optuna:
            self._optuna[heartbeat] = optuna_storage(self._url, heartbeat, create_tables=not self._read_only)
        return self._optuna[heartbeat]

    def dispose(self) -> None:
        """Close the pooled connections (ours and Optuna's)."""
        for storage in self._optuna.values():
            storage.engine.dispose()
        self._engine.dispose()

    def __repr__(self) -> str:
        return f"Database({self._url!r}{', read_only=True' if self._read_only else ''})"
