"""api_tokens: the HTTP API's bearer tokens (issue 28 section 2)

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-27 17:00:00+00:00

A token is shown once when created; the record keeps its lookup prefix and the SHA-256 of the
whole token, never the token. ``revoked_at`` is checked on every request.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0010'
down_revision: str | Sequence[str] | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'api_tokens',
        sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
        sa.Column('name', sa.String(length=255), nullable=False),
        sa.Column('owner', sa.String(length=255), nullable=False),
        sa.Column('role', sa.String(length=32), nullable=False),
        sa.Column('tenant', sa.String(length=255), nullable=True),
        sa.Column('lookup', sa.String(length=32), nullable=False),
        sa.Column('hash', sa.String(length=64), nullable=False),
        sa.Column('created_by', sa.String(length=255), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('expires_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
        sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_api_tokens')),
        sa.UniqueConstraint('lookup', name=op.f('uq_api_tokens_lookup')),
    )


def downgrade() -> None:
    op.drop_table('api_tokens')
