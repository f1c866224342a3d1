"""schedules, jobs of `tuner serve`, drift events

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 16:40:00
"""
from alembic import op
import sqlalchemy as sa


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'tuner_schedules',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('name', sa.String(length=200), nullable=False),
        sa.Column('cron', sa.String(length=100), nullable=False),
        sa.Column('timezone', sa.String(length=64), nullable=False),
        sa.Column('model', sa.String(length=500), nullable=False),
        sa.Column('workload', sa.String(length=1000), nullable=False),
        sa.Column('workload_type', sa.String(length=100), nullable=False),
        sa.Column('optimize_args', sa.JSON(), nullable=False),
        sa.Column('gpus', sa.String(length=100), nullable=True),
        sa.Column('live_model_name', sa.String(length=500), nullable=True),
        sa.Column('enabled', sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('last_fired_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id'),
        sa.UniqueConstraint('name'),
    )
    op.create_table(
        'tuner_jobs',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('schedule_id', sa.Integer(), nullable=True),
        sa.Column('schedule_name', sa.String(length=200), nullable=False),
        sa.Column('reason', sa.String(length=20), nullable=False),
        sa.Column('detail', sa.Text(), nullable=True),
        sa.Column('model', sa.String(length=500), nullable=False),
        sa.Column('study_name', sa.String(length=500), nullable=False),
        sa.Column('argv', sa.JSON(), nullable=False),
        sa.Column('gpus', sa.String(length=100), nullable=True),
        sa.Column('status', sa.String(length=20), nullable=False),
        sa.Column('attempts', sa.Integer(), server_default='0', nullable=False),
        sa.Column('pid', sa.Integer(), nullable=True),
        sa.Column('exit_code', sa.Integer(), nullable=True),
        sa.Column('log_path', sa.String(length=1000), nullable=True),
        sa.Column('outcome', sa.String(length=20), nullable=True),
        sa.Column('outcome_detail', sa.Text(), nullable=True),
        sa.Column('due_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(['schedule_id'], ['tuner_schedules.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
    )
    op.create_index('ix_tuner_jobs_schedule_id', 'tuner_jobs', ['schedule_id'])
    op.create_index('ix_tuner_jobs_status', 'tuner_jobs', ['status'])
    op.create_table(
        'tuner_drift_events',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('model', sa.String(length=500), nullable=False),
        sa.Column('live_model_name', sa.String(length=500), nullable=False),
        sa.Column('live_acceptance_rate', sa.Float(), nullable=True),
        sa.Column('live_acceptance_length', sa.Float(), nullable=True),
        sa.Column('tuned_acceptance_rate', sa.Float(), nullable=True),
        sa.Column('tuned_acceptance_length', sa.Float(), nullable=True),
        sa.Column('tuned_study', sa.String(length=500), nullable=False),
        sa.Column('margin', sa.Float(), nullable=False),
        sa.Column('held_s', sa.Float(), nullable=False),
        sa.Column('job_id', sa.Integer(), nullable=True),
        sa.Column('note', sa.Text(), nullable=False),
        sa.Column('detected_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['job_id'], ['tuner_jobs.id'], ondelete='SET NULL'),
        sa.PrimaryKeyConstraint('id'),
    )


def downgrade() -> None:
    op.drop_table('tuner_drift_events')
    op.drop_index('ix_tuner_jobs_status', table_name='tuner_jobs')
    op.drop_index('ix_tuner_jobs_schedule_id', table_name='tuner_jobs')
    op.drop_table('tuner_jobs')
    op.drop_table('tuner_schedules')
