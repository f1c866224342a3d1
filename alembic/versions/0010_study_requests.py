"""A study's request (tuner/plan/request.py) is stored as JSON on its runs, its schedule and its
jobs, in place of `tuner optimize` arguments. A schedule or job stored before keeps its old
arguments inside its request as {"before_requests": [...]}: it cannot run (the service says to add
the schedule again with those options), and nothing it held is lost.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06 05:40:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None

OLD_COLUMN = {'tuner_schedules': 'optimize_args', 'tuner_jobs': 'argv'}


def upgrade() -> None:
    with op.batch_alter_table('tuner_study_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('request', sa.JSON(), nullable=True))
    for table, old in OLD_COLUMN.items():
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('request', sa.JSON(), nullable=True))
        rows = sa.table(table, sa.column('id', sa.Integer), sa.column(old, sa.JSON),
                        sa.column('request', sa.JSON))
        bind = op.get_bind()
        for row_id, args in bind.execute(sa.select(rows.c.id, rows.c[old])).all():
            bind.execute(rows.update().where(rows.c.id == row_id).values(request={'before_requests': args}))
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column(old)


def downgrade() -> None:
    for table, old in OLD_COLUMN.items():
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column(old, sa.JSON(), nullable=False, server_default='[]'))
            batch_op.drop_column('request')
    with op.batch_alter_table('tuner_study_runs', schema=None) as batch_op:
        batch_op.drop_column('request')
