"""The results database: schema, migrations check, and the store's reads and writes.
Open it as ``Database.open(url)``; its ``.results``, ``.jobs`` and ``.optuna()`` share the URL."""

from tuner.store.database import Database
from tuner.store.db import database_url, open_database, open_read_only, optuna_storage, upgrade
from tuner.store.jobs import DriftRow, JobRow, JobStore, ScheduleRow
from tuner.store.models import NOT_MEASURED
from tuner.store.results import ResultStore, RunOrigin, TrialRow, workload_hash

__all__ = ["NOT_MEASURED", "Database", "DriftRow", "JobRow", "JobStore", "ResultStore", "RunOrigin", "ScheduleRow", "TrialRow",
           "database_url", "open_database", "open_read_only", "optuna_storage", "upgrade", "workload_hash"]
