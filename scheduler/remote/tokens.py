"""API tokens over the API (``scheduler.verbs.tokens``): create (the new token is in the
server's answer only), list (never a secret) and revoke, with the local verbs' results."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from scheduler.remote.client import Client
from scheduler.verbs.tokens import CreatedToken

__all__ = ["CreatedToken", "create", "list_", "revoke"]

_TIMES = ("created_at", "expires_at", "last_used_at", "revoked_at")


def _row(row: dict[str, Any]) -> dict[str, Any]:
    """A token's row with its times as the local verb has them."""
    return {k: datetime.fromisoformat(v) if k in _TIMES and v else v for k, v in row.items()}


def create(stores: Client, _principal: None, name: str, *, role: str,
           owner: str | None = None, tenant: str | None = None,
           expires: timedelta | None = None) -> CreatedToken:
    body = {"name": name, "role": role, "owner": owner, "tenant": tenant,
            "expires": None if expires is None else f"{expires.total_seconds()}s"}
    made = _row(stores.post("/tokens", {k: v for k, v in body.items() if v is not None}))
    return CreatedToken(id=made["id"], name=made["name"], owner=made["owner"],
                        role=made["role"], tenant=made["tenant"],
                        expires_at=made["expires_at"], token=made["token"])


def list_(stores: Client, _principal: None) -> list[dict[str, Any]]:
    return [_row(r) for r in stores.get("/tokens")["items"]]


def revoke(stores: Client, _principal: None, token_id: int) -> dict[str, Any]:
    return _row(stores.delete(f"/tokens/{token_id}"))
