"""Alembic environment for the tuner's own tables (Optuna migrates its tables itself)."""

from alembic import context

from tuner.store.db import VERSION_TABLE, database_url, make_engine
from tuner.store.models import Base

config = context.config
target_metadata = Base.metadata


def include_object(obj, name, type_, reflected, compare_to):
    # Only the tuner's tables: Optuna's share the database but are not ours to migrate.
    if type_ == "table":
        return name.startswith("tuner_")
    return True


def run_migrations_online() -> None:
    url = config.get_main_option("sqlalchemy.url") or database_url()
    engine = make_engine(url)
    with engine.connect() as connection:
        if connection.dialect.name == "sqlite":
            # Batch mode rebuilds a table by copy, drop and rename; SQLite would refuse to drop a
            # table other tables point at while foreign keys are enforced (outside a transaction
            # only, hence before it begins).
            connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            connection.commit()
        context.configure(connection=connection, target_metadata=target_metadata,
                          version_table=VERSION_TABLE, include_object=include_object,
                          render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


run_migrations_online()
