"""API tokens' verbs: create (the token shown once), list, revoke (effective at once).

The rules (the token's shape, its hash, the audit events) live in ``scheduler.access.tokens``;
the roles in ``scheduler.access.roles``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scheduler.principal import Principal
from scheduler.verbs.stores import Stores

__all__ = ["CreatedToken", "create", "list_", "revoke"]


@dataclass(frozen=True)
class CreatedToken:
    """A new token: ``token`` is its only copy; the record keeps a hash."""

    id: int
    name: str
    owner: str
    role: str
    tenant: str | None
    expires_at: datetime | None
    token: str


def create(stores: Stores, principal: Principal, name: str, *, role: str,
           owner: str | None = None, tenant: str | None = None,
           expires: timedelta | None = None) -> CreatedToken:
    """A token acting as ``owner`` (default: ``principal``) with ``role`` (and ``tenant``),
    valid for ``expires`` (None: until revoked)."""
    from scheduler.access.roles import check_role
    from scheduler.access.tokens import create_token
    from scheduler.record.session import transaction
    from scheduler.record.types import utcnow

    check_role(principal, "tokens.create")
    owner = owner or principal.name
    expires_at = utcnow() + expires if expires is not None else None
    with stores.database() as engine, transaction(engine) as session:
        token_id, token = create_token(session, name=name, owner=owner, role=role,
                                       tenant=tenant, expires_at=expires_at,
                                       created_by=principal)
    return CreatedToken(id=token_id, name=name, owner=owner, role=role, tenant=tenant,
                        expires_at=expires_at, token=token)


def list_(stores: Stores, principal: Principal) -> list[dict[str, Any]]:
    """Every token, without secrets: id, name, owner, role, tenant, prefix and times."""
    from scheduler.access.roles import check_role
    from scheduler.access.tokens import list_tokens

    check_role(principal, "tokens.list")
    with stores.reading() as session:
        return list_tokens(session)


def revoke(stores: Stores, principal: Principal, token_id: int) -> dict[str, Any]:
    """Revoke token ``token_id``: the next request that shows it is refused."""
    from scheduler.access.roles import check_role
    from scheduler.access.tokens import revoke_token
    from scheduler.record.session import transaction

    check_role(principal, "tokens.revoke")
    with stores.database() as engine, transaction(engine) as session:
        return revoke_token(session, token_id, by=principal)
