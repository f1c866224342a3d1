"""A trial records the precision its replays reached: half the 95 % interval of its tokens/s,
relative (replays go on until --precision or --max-repeats)

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 14:10:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('tuner_trial_metrics', schema=None) as batch_op:
        batch_op.add_column(sa.Column('tokens_per_s_precision', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('tuner_trial_metrics', schema=None) as batch_op:
        batch_op.drop_column('tokens_per_s_precision')
