"""templates, template_versions and tasks.template: saved job templates (issue 30)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28 09:00:00+00:00

A template is a named task file with typed parameters (``scheduler.templates``); each changed
file is a new row of ``template_versions``. A task run from one names it and its version
(``tasks.template``, ``tasks.template_version``; ``ix_tasks_template_id`` finds its last runs).
Tasks recorded before this revision: None (none was run from a template).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0013'
down_revision: str | Sequence[str] | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'templates',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('name', sa.String(length=64), nullable=False),
        sa.Column('tenant', sa.String(length=255), nullable=True),
        sa.Column('run_roles', sa.JSON(), nullable=False),
        sa.Column('description', sa.Text(), nullable=True),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('created_by', sa.String(length=255), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_templates')),
        sa.UniqueConstraint('name', name=op.f('uq_templates_name')),
    )
    op.create_index(op.f('ix_templates_tenant'), 'templates', ['tenant'], unique=False)
    op.create_table(
        'template_versions',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('template_id', sa.Integer(), nullable=False),
        sa.Column('version', sa.Integer(), nullable=False),
        sa.Column('text', sa.Text(), nullable=False),
        sa.Column('parameters', sa.JSON(), nullable=False),
        sa.Column('digest', sa.String(length=64), nullable=False),
        sa.Column('created_by', sa.String(length=255), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(['template_id'], ['templates.id'],
                                name=op.f('fk_template_versions_template_id_templates'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_template_versions')),
        sa.UniqueConstraint('template_id', 'version',
                            name=op.f('uq_template_versions_template_id_version')),
    )
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('template', sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column('template_version', sa.Integer(), nullable=True))
        batch_op.create_index('ix_tasks_template_id', ['template', 'id'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.drop_index('ix_tasks_template_id')
        batch_op.drop_column('template_version')
        batch_op.drop_column('template')
    op.drop_table('template_versions')
    op.drop_index(op.f('ix_templates_tenant'), table_name='templates')
    op.drop_table('templates')
