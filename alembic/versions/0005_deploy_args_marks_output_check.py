"""deploy arguments, output-change rules, marks of untrusted figures, first diverging token

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01 15:00:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('tuner_study_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('deploy_args', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('max_output_change', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('allow_output_change', sa.Boolean(), nullable=True))

    with op.batch_alter_table('tuner_trial_metrics', schema=None) as batch_op:
        batch_op.add_column(sa.Column('first_divergence', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('marks', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('server_ttft_mean_s', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('server_tpot_mean_s', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('server_e2e_mean_s', sa.Float(), nullable=True))

    with op.batch_alter_table('tuner_trial_runs', schema=None) as batch_op:
        batch_op.add_column(sa.Column('output_token_ids', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('greedy_match_rate', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('first_divergence', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('marks', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('remeasured', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('server_tpot_mean_s', sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('tuner_trial_runs', schema=None) as batch_op:
        for name in ('server_tpot_mean_s', 'remeasured', 'marks', 'first_divergence',
                     'greedy_match_rate', 'output_token_ids'):
            batch_op.drop_column(name)

    with op.batch_alter_table('tuner_trial_metrics', schema=None) as batch_op:
        for name in ('server_e2e_mean_s', 'server_tpot_mean_s', 'server_ttft_mean_s', 'marks',
                     'first_divergence'):
            batch_op.drop_column(name)

    with op.batch_alter_table('tuner_study_runs', schema=None) as batch_op:
        for name in ('allow_output_change', 'max_output_change', 'deploy_args'):
            batch_op.drop_column(name)
