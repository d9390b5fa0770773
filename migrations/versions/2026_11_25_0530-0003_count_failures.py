"""tasks.count_failures: what max_failures counts (hosts that failed an attempt, or jobs failed
for good)

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 05:30:00+00:00

Tasks recorded before this revision were counted by final failures: they get 'final'.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | Sequence[str] | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('count_failures', sa.String(length=8),
                                      server_default='final', nullable=False))


def downgrade() -> None:
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.drop_column('count_failures')
