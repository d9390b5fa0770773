"""initial schema: hosts, groups, windows, schedules, tasks, jobs, events

Revision ID: 0001
Revises: 
Create Date: 2026-11-21 11:09:31.945197+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0001'
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('events',
    sa.Column('id', sa.String(length=40), nullable=False),
    sa.Column('ts', sa.DateTime(timezone=True), nullable=False),
    sa.Column('kind', sa.String(length=24), nullable=False),
    sa.Column('task_id', sa.String(length=64), nullable=True),
    sa.Column('job_id', sa.String(length=80), nullable=True),
    sa.Column('host', sa.String(length=255), nullable=True),
    sa.Column('worker', sa.String(length=255), nullable=True),
    sa.Column('operator', sa.String(length=255), nullable=True),
    sa.Column('data', sa.JSON(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_events'))
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index('ix_events_host_ts', ['host', 'ts'], unique=False)
        batch_op.create_index('ix_events_task_id_ts', ['task_id', 'ts'], unique=False)
        batch_op.create_index(batch_op.f('ix_events_ts'), ['ts'], unique=False)

    op.create_table('groups',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('vars', sa.JSON(), nullable=False),
    sa.Column('source', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_groups')),
    sa.UniqueConstraint('name', name=op.f('uq_groups_name'))
    )
    op.create_table('hosts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('address', sa.String(length=255), nullable=True),
    sa.Column('port', sa.Integer(), nullable=False),
    sa.Column('user', sa.String(length=64), nullable=True),
    sa.Column('vars', sa.JSON(), nullable=False),
    sa.Column('source', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_hosts')),
    sa.UniqueConstraint('name', name=op.f('uq_hosts_name'))
    )
    op.create_table('schedules',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('cron', sa.String(length=255), nullable=False),
    sa.Column('tz', sa.String(length=64), nullable=False),
    sa.Column('action', sa.String(length=64), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('target', sa.Text(), nullable=False),
    sa.Column('options', sa.JSON(), nullable=False),
    sa.Column('catchup', sa.String(length=8), nullable=False),
    sa.Column('catchup_window_s', sa.Integer(), nullable=False),
    sa.Column('overlap', sa.String(length=8), nullable=False),
    sa.Column('paused', sa.Boolean(), nullable=False),
    sa.Column('created_by', sa.String(length=255), nullable=True),
    sa.Column('last_occurrence', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("catchup IN ('skip', 'latest', 'all')", name=op.f('ck_schedules_catchup')),
    sa.CheckConstraint("overlap IN ('skip', 'allow')", name=op.f('ck_schedules_overlap')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_schedules')),
    sa.UniqueConstraint('name', name=op.f('uq_schedules_name'))
    )
    op.create_table('windows',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('rrule', sa.Text(), nullable=True),
    sa.Column('cron', sa.String(length=255), nullable=True),
    sa.Column('duration_s', sa.Integer(), nullable=True),
    sa.Column('end_time', sa.String(length=8), nullable=True),
    sa.Column('tz', sa.String(length=64), nullable=False),
    sa.Column('starts_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('ends_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('requires_approval', sa.Boolean(), nullable=False),
    sa.Column('approved_by', sa.String(length=255), nullable=True),
    sa.Column('approved_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_by', sa.String(length=255), nullable=True),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.CheckConstraint("kind IN ('recurring', 'oneoff', 'freeze')", name=op.f('ck_windows_kind')),
    sa.CheckConstraint('rrule IS NULL OR cron IS NULL', name=op.f('ck_windows_one_rule')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_windows')),
    sa.UniqueConstraint('name', name=op.f('uq_windows_name'))
    )
    op.create_table('group_children',
    sa.Column('parent_id', sa.Integer(), nullable=False),
    sa.Column('child_id', sa.Integer(), nullable=False),
    sa.CheckConstraint('parent_id <> child_id', name=op.f('ck_group_children_not_self')),
    sa.ForeignKeyConstraint(['child_id'], ['groups.id'], name=op.f('fk_group_children_child_id_groups'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['parent_id'], ['groups.id'], name=op.f('fk_group_children_parent_id_groups'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('parent_id', 'child_id', name=op.f('pk_group_children'))
    )
    with op.batch_alter_table('group_children', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_group_children_child_id'), ['child_id'], unique=False)

    op.create_table('group_hosts',
    sa.Column('group_id', sa.Integer(), nullable=False),
    sa.Column('host_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['group_id'], ['groups.id'], name=op.f('fk_group_hosts_group_id_groups'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['host_id'], ['hosts.id'], name=op.f('fk_group_hosts_host_id_hosts'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('group_id', 'host_id', name=op.f('pk_group_hosts'))
    )
    with op.batch_alter_table('group_hosts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_group_hosts_host_id'), ['host_id'], unique=False)

    op.create_table('tasks',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=255), nullable=True),
    sa.Column('action', sa.String(length=64), nullable=False),
    sa.Column('params', sa.JSON(), nullable=False),
    sa.Column('executor', sa.String(length=32), nullable=True),
    sa.Column('target', sa.Text(), nullable=False),
    sa.Column('operator', sa.String(length=255), nullable=False),
    sa.Column('priority', sa.String(length=8), nullable=False),
    sa.Column('share', sa.String(length=255), nullable=True),
    sa.Column('max_running', sa.Integer(), nullable=False),
    sa.Column('max_failures', sa.Integer(), nullable=False),
    sa.Column('max_attempts', sa.Integer(), nullable=False),
    sa.Column('backoff_ms', sa.Integer(), nullable=False),
    sa.Column('timeout_s', sa.Integer(), nullable=False),
    sa.Column('idempotent', sa.Boolean(), nullable=False),
    sa.Column('in_window', sa.Boolean(), nullable=False),
    sa.Column('start_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('schedule_id', sa.Integer(), nullable=True),
    sa.Column('occurrence', sa.DateTime(timezone=True), nullable=True),
    sa.Column('total', sa.Integer(), nullable=False),
    sa.Column('running', sa.Integer(), nullable=False),
    sa.Column('succeeded', sa.Integer(), nullable=False),
    sa.Column('failed', sa.Integer(), nullable=False),
    sa.Column('lost', sa.Integer(), nullable=False),
    sa.Column('cancelled', sa.Integer(), nullable=False),
    sa.Column('last_event_pos', sa.BigInteger(), nullable=True),
    sa.CheckConstraint("priority IN ('urgent', 'normal', 'bulk')", name=op.f('ck_tasks_priority')),
    sa.CheckConstraint("state IN ('accepted', 'active', 'paused', 'succeeded', 'failed', 'cancelled', 'aborted')", name=op.f('ck_tasks_state')),
    sa.ForeignKeyConstraint(['schedule_id'], ['schedules.id'], name=op.f('fk_tasks_schedule_id_schedules'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tasks')),
    sa.UniqueConstraint('schedule_id', 'occurrence', name=op.f('uq_tasks_schedule_id_occurrence'))
    )
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_tasks_operator'), ['operator'], unique=False)
        batch_op.create_index('ix_tasks_state_created_at', ['state', 'created_at'], unique=False)

    op.create_table('window_assignments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('window_id', sa.Integer(), nullable=False),
    sa.Column('host_id', sa.Integer(), nullable=True),
    sa.Column('group_id', sa.Integer(), nullable=True),
    sa.CheckConstraint('(host_id IS NULL) <> (group_id IS NULL)', name=op.f('ck_window_assignments_host_xor_group')),
    sa.ForeignKeyConstraint(['group_id'], ['groups.id'], name=op.f('fk_window_assignments_group_id_groups'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['host_id'], ['hosts.id'], name=op.f('fk_window_assignments_host_id_hosts'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['window_id'], ['windows.id'], name=op.f('fk_window_assignments_window_id_windows'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_window_assignments')),
    sa.UniqueConstraint('window_id', 'group_id', name=op.f('uq_window_assignments_window_id_group_id')),
    sa.UniqueConstraint('window_id', 'host_id', name=op.f('uq_window_assignments_window_id_host_id'))
    )
    with op.batch_alter_table('window_assignments', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_window_assignments_group_id'), ['group_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_window_assignments_host_id'), ['host_id'], unique=False)

    op.create_table('jobs',
    sa.Column('id', sa.String(length=80), nullable=False),
    sa.Column('task_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('due_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('window', sa.String(length=255), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('worker', sa.String(length=255), nullable=True),
    sa.Column('token', sa.BigInteger(), nullable=True),
    sa.Column('exit_code', sa.Integer(), nullable=True),
    sa.Column('duration_ms', sa.Integer(), nullable=True),
    sa.Column('output_tail', sa.Text(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('last_event_pos', sa.BigInteger(), nullable=True),
    sa.CheckConstraint("state IN ('accepted', 'pending', 'running', 'parked', 'held', 'succeeded', 'failed', 'lost', 'cancelled')", name=op.f('ck_jobs_state')),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_jobs_task_id_tasks'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_jobs')),
    sa.UniqueConstraint('task_id', 'seq', name=op.f('uq_jobs_task_id_seq'))
    )
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.create_index('ix_jobs_host_finished_at', ['host', 'finished_at'], unique=False)
        batch_op.create_index('ix_jobs_state_finished_at', ['state', 'finished_at'], unique=False)
        batch_op.create_index('ix_jobs_task_id_state', ['task_id', 'state'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('jobs', schema=None) as batch_op:
        batch_op.drop_index('ix_jobs_task_id_state')
        batch_op.drop_index('ix_jobs_state_finished_at')
        batch_op.drop_index('ix_jobs_host_finished_at')

    op.drop_table('jobs')
    with op.batch_alter_table('window_assignments', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_window_assignments_host_id'))
        batch_op.drop_index(batch_op.f('ix_window_assignments_group_id'))

    op.drop_table('window_assignments')
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.drop_index('ix_tasks_state_created_at')
        batch_op.drop_index(batch_op.f('ix_tasks_operator'))

    op.drop_table('tasks')
    with op.batch_alter_table('group_hosts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_group_hosts_host_id'))

    op.drop_table('group_hosts')
    with op.batch_alter_table('group_children', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_group_children_child_id'))

    op.drop_table('group_children')
    op.drop_table('windows')
    op.drop_table('schedules')
    op.drop_table('hosts')
    op.drop_table('groups')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_events_ts'))
        batch_op.drop_index('ix_events_task_id_ts')
        batch_op.drop_index('ix_events_host_ts')

    op.drop_table('events')
