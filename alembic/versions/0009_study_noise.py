"""A study run records its --noise, so that every later verdict of the study uses the rule the
run printed its answer under

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-04 14:20:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('tuner_study_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('noise', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('tuner_study_runs', schema=None) as batch_op:
        batch_op.drop_column('noise')
