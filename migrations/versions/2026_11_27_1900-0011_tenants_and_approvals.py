"""tenants and approvals: hosts and jobs name their customer, windows carry a version that
customers approve, submissions carry an idempotency key (issue 28 sections 3 and 4)

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-27 19:00:00+00:00

Every new column is nullable or has a default, so an upgraded record reads as before: no host
belongs to a customer, every window is at version 1 with no customer decision, and no task
carries a key.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = '0011'
down_revision: str | Sequence[str] | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('hosts') as batch:
        batch.add_column(sa.Column('tenant', sa.String(length=255), nullable=True))
        batch.create_index(batch.f('ix_hosts_tenant'), ['tenant'], unique=False)
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('tenant', sa.String(length=255), nullable=True))
        batch.create_index('ix_jobs_tenant_task_id', ['tenant', 'task_id'], unique=False)
    with op.batch_alter_table('tasks') as batch:
        batch.add_column(sa.Column('request_key', sa.String(length=160), nullable=True))
        batch.create_unique_constraint(batch.f('uq_tasks_operator_request_key'),
                                       ['operator', 'request_key'])
    with op.batch_alter_table('windows') as batch:
        batch.add_column(sa.Column('version', sa.Integer(), server_default='1', nullable=False))
        batch.add_column(sa.Column('changed_by', sa.String(length=255), nullable=True))
    op.create_table(
        'window_approvals',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('window_id', sa.Integer(), nullable=False),
        sa.Column('tenant', sa.String(length=255), nullable=True),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('decision', sa.String(length=8), nullable=False),
        sa.Column('occurrence', sa.DateTime(timezone=True), nullable=True),
        sa.Column('comment', sa.Text(), nullable=True),
        sa.Column('decided_by', sa.String(length=255), nullable=False),
        sa.Column('via', sa.String(length=64), nullable=True),
        sa.Column('source', sa.String(length=64), nullable=True),
        sa.Column('decided_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('revoked_by', sa.String(length=255), nullable=True),
        sa.CheckConstraint("decision IN ('approved', 'denied')",
                           name=op.f('ck_window_approvals_decision')),
        sa.ForeignKeyConstraint(['window_id'], ['windows.id'],
                                name=op.f('fk_window_approvals_window_id_windows'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_window_approvals')),
    )
    op.create_index('ix_window_approvals_window_id_tenant', 'window_approvals',
                    ['window_id', 'tenant'], unique=False)
    op.create_table(
        'tenants',
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('approval_required', sa.Boolean(), nullable=False),
        sa.Column('contacts', sa.JSON(), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('name', name=op.f('pk_tenants')),
    )


def downgrade() -> None:
    op.drop_table('tenants')
    op.drop_index('ix_window_approvals_window_id_tenant', table_name='window_approvals')
    op.drop_table('window_approvals')
    with op.batch_alter_table('windows') as batch:
        batch.drop_column('changed_by')
        batch.drop_column('version')
    with op.batch_alter_table('tasks') as batch:
        batch.drop_constraint(batch.f('uq_tasks_operator_request_key'), type_='unique')
        batch.drop_column('request_key')
    with op.batch_alter_table('jobs') as batch:
        batch.drop_index('ix_jobs_tenant_task_id')
        batch.drop_column('tenant')
    with op.batch_alter_table('hosts') as batch:
        batch.drop_index(batch.f('ix_hosts_tenant'))
        batch.drop_column('tenant')
