"""k by batch size under its own name: the run column and the trial kind

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02 03:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None

# The stored k-by-batch-size record (the column's JSON) has no key or value named "schedule",
# so only the column and the trial kind change.


def upgrade() -> None:
    with op.batch_alter_table('tuner_study_runs', schema=None) as batch_op:
        batch_op.alter_column('schedule', new_column_name='k_by_batch_size', existing_type=sa.JSON(),
                              existing_nullable=True)
    op.execute("UPDATE tuner_trials SET kind = 'k_by_batch_size' WHERE kind = 'schedule'")


def downgrade() -> None:
    op.execute("UPDATE tuner_trials SET kind = 'schedule' WHERE kind = 'k_by_batch_size'")
    with op.batch_alter_table('tuner_study_runs', schema=None) as batch_op:
        batch_op.alter_column('k_by_batch_size', new_column_name='schedule', existing_type=sa.JSON(),
                              existing_nullable=True)
