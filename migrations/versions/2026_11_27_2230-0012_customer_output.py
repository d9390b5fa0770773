"""tasks.customer_output: whether a customer reads the output of its own hosts' jobs

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27 22:30:00+00:00

A customer principal (``customer-viewer``, ``customer-approver``) is shown its jobs' states and
exit codes; their output (stdout, stderr, the error lines that quote them) only where the task
was submitted with ``--customer-output`` (``customer_output: true`` in a task file).
Tasks recorded before this revision: false (no task said so).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0012'
down_revision: str | Sequence[str] | None = '0011'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('customer_output', sa.Boolean(),
                                      server_default=sa.false(), nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.drop_column('customer_output')
