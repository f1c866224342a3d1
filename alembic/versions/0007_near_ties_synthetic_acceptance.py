"""A study run records the synthetic acceptance it ran under; greedy divergences that are
numeric near-ties of the baseline's are counted apart (the baseline's top-2 logprob margins)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 09:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('tuner_study_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('synthetic_acceptance', sa.String(length=200), nullable=True))
    with op.batch_alter_table('tuner_trial_metrics', schema=None) as batch_op:
        batch_op.add_column(sa.Column('greedy_near_tie_rate', sa.Float(), nullable=True))
    with op.batch_alter_table('tuner_trial_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('output_margins', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('greedy_near_tie_rate', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('tuner_trial_runs', schema=None) as batch_op:
        batch_op.drop_column('greedy_near_tie_rate')
        batch_op.drop_column('output_margins')
    with op.batch_alter_table('tuner_trial_metrics', schema=None) as batch_op:
        batch_op.drop_column('greedy_near_tie_rate')
    with op.batch_alter_table('tuner_study_runs', schema=None) as batch_op:
        batch_op.drop_column('synthetic_acceptance')
