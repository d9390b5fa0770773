"""tasks.waves, wave, wave_state, wave_why: rollout in waves

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25 06:00:00+00:00

Tasks recorded before this revision were not rolled out in waves: every column is NULL.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | Sequence[str] | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('waves', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('wave', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('wave_state', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('wave_why', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.drop_column('wave_why')
        batch_op.drop_column('wave_state')
        batch_op.drop_column('wave')
        batch_op.drop_column('waves')
