"""API tokens: made, stored hashed, listed, revoked, and checked on every request.

1. A token is ``fst_<lookup>_<secret>``: ``fst_`` so secret scanners can find a leaked one,
   ``lookup`` (12 hex digits) to find its row, ``secret`` 32 random bytes (``secrets``).
2. The record keeps ``lookup`` and the SHA-256 of the whole token, never the token: it is shown
   once, by ``create_token``'s caller.
3. ``authenticate`` runs on every request: unknown, malformed, expired and revoked tokens all
   get the same one line, so a caller learns nothing of which; revocation holds at once.
   ``refused`` tells them apart for the audit record only (``auth_fail`` events).
4. Creating and revoking a token are audit events (``token_create``, ``token_revoke``) naming
   the token's id, never its value.
5. A create retried after a lost reply must not mint a second live token: a name is held by
   at most one live (unrevoked, unexpired) token per owner, and a second create of it is a
   ``ConflictError`` saying how to revoke the first.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.access.roles import CUSTOMER_ROLES, ROLES
from scheduler.errors import ConflictError, NotFoundError, UnauthenticatedError, ValidationError
from scheduler.principal import Principal
from scheduler.record.audit import record_event
from scheduler.record.models import ApiToken
from scheduler.record.types import utcnow

__all__ = ["PREFIX", "Authenticated", "authenticate", "create_token", "is_live", "list_tokens",
           "refused",
           "revoke_token"]

PREFIX = "fst_"
_SHAPE = re.compile(r"^fst_([0-9a-f]{12})_([A-Za-z0-9_-]{20,100})$")
# last_used_at is written at most this often per token: a busy client must not turn every
# read into a write of the record.
LAST_USED_EVERY = timedelta(seconds=60)
LIST_COLUMNS = ("id", "name", "owner", "role", "tenant", "prefix", "created_at", "expires_at",
                "last_used_at", "revoked_at")


@dataclass(frozen=True)
class Authenticated:
    """The principal a valid token stands for."""

    token_id: int
    owner: str
    role: str
    tenant: str | None


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_token(session: Session, *, name: str, owner: str, role: str, tenant: str | None,
                 expires_at: datetime | None, created_by: Principal | str) -> tuple[int, str]:
    """Store a new token; returns its id and the token itself (to be shown once)."""
    if role not in ROLES:
        raise ValidationError(f"--role {role!r} must be one of {', '.join(ROLES)}")
    if role in CUSTOMER_ROLES and not tenant:
        raise ValidationError(f"role {role} needs a tenant", hint="add --tenant CUSTOMER")
    if not name.strip():
        raise ValidationError("a token needs a name")
    _refuse_a_live_twin(session, name, owner)
    lookup = secrets.token_hex(6)
    token = f"{PREFIX}{lookup}_{secrets.token_urlsafe(32)}"
    row = ApiToken(name=name, owner=owner, role=role, tenant=tenant, lookup=lookup,
                   hash=_digest(token), created_by=str(created_by), expires_at=expires_at)
    session.add(row)
    session.flush()
    record_event(session, "token_create", operator=created_by, data={
        "token_id": row.id, "name": name, "owner": owner, "role": role, "tenant": tenant,
        "expires_at": expires_at.isoformat() if expires_at else None})
    return row.id, token


def _refuse_a_live_twin(session: Session, name: str, owner: str) -> None:
    """``ConflictError`` when ``owner`` holds a live token named ``name`` (the first create's
    reply may have been lost: its token cannot be shown again, only revoked)."""
    now = utcnow()
    live = session.scalar(sa.select(ApiToken.id).where(
        ApiToken.name == name, ApiToken.owner == owner, ApiToken.revoked_at.is_(None),
        sa.or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > now)).limit(1))
    if live is not None:
        raise ConflictError(f"{owner} already has a live token named {name!r} (id {live}); "
                            "nothing was created",
                            hint=f"if its token was lost, revoke it (`fleetsched tokens revoke "
                                 f"{live}`) and create it again")


def is_live(session: Session, token_id: int) -> bool:
    """Whether token ``token_id`` is neither revoked nor expired (a console session opened with
    it ends when it does)."""
    now = utcnow()
    return session.scalar(sa.select(ApiToken.id).where(
        ApiToken.id == token_id, ApiToken.revoked_at.is_(None),
        sa.or_(ApiToken.expires_at.is_(None), ApiToken.expires_at > now))) is not None


def _row(t: ApiToken) -> dict[str, Any]:
    return {"id": t.id, "name": t.name, "owner": t.owner, "role": t.role, "tenant": t.tenant,
            "prefix": f"{PREFIX}{t.lookup}", "created_at": t.created_at,
            "expires_at": t.expires_at, "last_used_at": t.last_used_at,
            "revoked_at": t.revoked_at}


def list_tokens(session: Session) -> list[dict[str, Any]]:
    """Every token, oldest first, without its secret (which the record does not have)."""
    return [_row(t) for t in session.scalars(sa.select(ApiToken).order_by(ApiToken.id))]


def revoke_token(session: Session, token_id: int, *, by: Principal | str) -> dict[str, Any]:
    """Revoke token ``token_id`` now (again: a no-op that keeps the first time)."""
    row = session.get(ApiToken, token_id)
    if row is None:
        raise NotFoundError(f"no API token with id {token_id}", hint="see `fleetsched tokens list`")
    if row.revoked_at is None:
        row.revoked_at = utcnow()
        record_event(session, "token_revoke", operator=by,
                     data={"token_id": row.id, "name": row.name, "owner": row.owner})
    return _row(row)


def refused(session: Session, token: str, *, now: datetime | None = None) -> dict[str, Any]:
    """Why ``token`` is refused, for the audit record (never the token): ``why`` (malformed,
    unknown, wrong secret, revoked, expired) and the id of the token its lookup names; with
    ``owner``, ``role`` and ``tenant`` only when the secret matched (it was that token)."""
    shape = _SHAPE.match(token)
    if shape is None:
        return {"why": "malformed"}
    row = session.scalars(sa.select(ApiToken).where(ApiToken.lookup == shape.group(1))).first()
    if row is None:
        return {"why": "unknown"}
    if not hmac.compare_digest(row.hash, _digest(token)):
        return {"why": "wrong secret", "token_id": row.id}
    now = now or utcnow()
    why = ("revoked" if row.revoked_at is not None else
           "expired" if row.expires_at is not None and row.expires_at <= now else "valid")
    return {"why": why, "token_id": row.id, "owner": row.owner, "role": row.role,
            "tenant": row.tenant}


def authenticate(session: Session, token: str, *, now: datetime | None = None) -> Authenticated:
    """The principal of ``token``, or ``UnauthenticatedError`` (one message for every reason)."""
    refused = UnauthenticatedError("the API token is missing, unknown, expired or revoked",
                                   hint="send `Authorization: Bearer fst_...` with a valid "
                                        "token (fleetsched tokens create)")
    shape = _SHAPE.match(token)
    if shape is None:
        raise refused
    row = session.scalars(sa.select(ApiToken).where(ApiToken.lookup == shape.group(1))).first()
    if row is None or not hmac.compare_digest(row.hash, _digest(token)):
        raise refused
    now = now or utcnow()
    if row.revoked_at is not None or (row.expires_at is not None and row.expires_at <= now):
        raise refused
    if row.last_used_at is None or now - row.last_used_at >= LAST_USED_EVERY:
        row.last_used_at = now
    return Authenticated(token_id=row.id, owner=row.owner, role=row.role, tenant=row.tenant)
