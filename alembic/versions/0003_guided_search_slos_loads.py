"""guided search predictions, SLOs, Pareto front, figures per load, k schedules

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 10:05:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

# SQLite's unique constraints from 0001/0002 have no name; this convention names them on
# reflection so that batch mode can drop them. PostgreSQL named them itself (<table>_<cols>_key).
CONVENTION = {"uq": "%(table_name)s_%(column_0_N_name)s_key"}
FILL_LOAD = ("UPDATE {table} SET load = (SELECT r.load FROM tuner_study_runs r JOIN tuner_trials t "
             "ON t.study_run_id = r.id WHERE t.id = {table}.trial_id)")


def upgrade() -> None:
    with op.batch_alter_table('tuner_study_runs') as batch_op:
        batch_op.add_column(sa.Column('strategy', sa.String(length=20), nullable=True))
        batch_op.add_column(sa.Column('slos', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('pareto_front', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('schedule', sa.JSON(), nullable=True))

    with op.batch_alter_table('tuner_trials') as batch_op:
        batch_op.add_column(sa.Column('kind', sa.String(length=20), server_default='study', nullable=False))
        batch_op.add_column(sa.Column('predicted_tokens_per_s', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('predicted_sigma', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('proposal_reason', sa.Text(), nullable=True))

    for table, old_unique, new_unique in (
            ('tuner_trial_metrics', ['trial_id'], ['trial_id', 'load']),
            ('tuner_trial_runs', ['trial_id', 'repeat'], ['trial_id', 'load', 'repeat'])):
        op.add_column(table, sa.Column('load', sa.String(length=200), nullable=True))
        op.execute(FILL_LOAD.format(table=table))
        with op.batch_alter_table(table, naming_convention=CONVENTION) as batch_op:
            batch_op.alter_column('load', existing_type=sa.String(length=200), nullable=False)
            batch_op.drop_constraint(f"{table}_{'_'.join(old_unique)}_key", type_='unique')
            batch_op.create_unique_constraint(f"{table}_{'_'.join(new_unique)}_key", new_unique)
    with op.batch_alter_table('tuner_trial_metrics') as batch_op:
        batch_op.create_index('ix_tuner_trial_metrics_trial_id', ['trial_id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('tuner_trial_metrics') as batch_op:
        batch_op.drop_index('ix_tuner_trial_metrics_trial_id')
    for table, old_unique, new_unique in (
            ('tuner_trial_metrics', ['trial_id'], ['trial_id', 'load']),
            ('tuner_trial_runs', ['trial_id', 'repeat'], ['trial_id', 'load', 'repeat'])):
        with op.batch_alter_table(table, naming_convention=CONVENTION) as batch_op:
            batch_op.drop_constraint(f"{table}_{'_'.join(new_unique)}_key", type_='unique')
            batch_op.create_unique_constraint(f"{table}_{'_'.join(old_unique)}_key", old_unique)
            batch_op.drop_column('load')
    with op.batch_alter_table('tuner_trials') as batch_op:
        for column in ('proposal_reason', 'predicted_sigma', 'predicted_tokens_per_s', 'kind'):
            batch_op.drop_column(column)
    with op.batch_alter_table('tuner_study_runs') as batch_op:
        for column in ('schedule', 'pareto_front', 'slos', 'strategy'):
            batch_op.drop_column(column)
