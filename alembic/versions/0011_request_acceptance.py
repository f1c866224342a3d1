"""Acceptance per request and by context length: each replay keeps its requests' acceptance
(tuner_trial_runs.request_acceptance), each trial the median replay's total and its acceptance
length per context-length bucket (tuner_trial_metrics.request_acceptance, acceptance_by_context)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06 06:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('tuner_trial_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('request_acceptance', sa.JSON(), nullable=True))
    with op.batch_alter_table('tuner_trial_metrics', schema=None) as batch_op:
        batch_op.add_column(sa.Column('request_acceptance', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('acceptance_by_context', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('tuner_trial_metrics', schema=None) as batch_op:
        batch_op.drop_column('acceptance_by_context')
        batch_op.drop_column('request_acceptance')
    with op.batch_alter_table('tuner_trial_runs', schema=None) as batch_op:
        batch_op.drop_column('request_acceptance')
