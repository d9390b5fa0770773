"""tasks.ignore_windows and tasks.break_glass: windows and freezes by default

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27 13:00:00+00:00

An action that requires service windows runs in them unless the operator submits it with
``--ignore-windows`` (recorded as ``ignore_windows``); freezes hold every job unless it was
submitted with ``--break-glass REASON`` (the reason, recorded as ``break_glass``). Tasks
recorded before this revision: false and NULL (they ran under the old rules: no freeze check
without ``--in-window``).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0009'
down_revision: str | Sequence[str] | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.add_column(sa.Column('ignore_windows', sa.Boolean(), server_default=sa.false(),
                                      nullable=False))
        batch_op.add_column(sa.Column('break_glass', sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('tasks', schema=None) as batch_op:
        batch_op.drop_column('break_glass')
        batch_op.drop_column('ignore_windows')
