"""the queue's epoch: the random id its Redis holds, recorded once per queue prefix

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-27 12:40:00+00:00

``scheduler.record.epoch`` writes the row at the first worker start with the record (and
reconcile writes it back to Redis): a Redis that lost the id, or holds another, lost or
replaced its data. The migration writes no row: a queue upgraded from before this revision
gets its epoch at the next worker start, so an upgrade is never mistaken for a lost Redis.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | Sequence[str] | None = '0007'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('queue_epochs',
    sa.Column('queue', sa.String(length=64), nullable=False),
    sa.Column('epoch', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('queue', name=op.f('pk_queue_epochs'))
    )


def downgrade() -> None:
    op.drop_table('queue_epochs')
