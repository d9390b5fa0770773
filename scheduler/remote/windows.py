"""Service windows over the API: list, show, and the decisions approve, deny and revoke
(``scheduler.verbs.windows``), a decision rebuilt as the local verb's ``Approval``."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from scheduler.remote.client import Client
from scheduler.verbs.windows import Approval

__all__ = ["approve", "deny", "list_", "revoke", "show"]


def list_(stores: Client) -> list[dict[str, Any]]:
    return stores.get("/windows")["items"]


def show(stores: Client, name: str) -> dict[str, Any]:
    return stores.get(f"/windows/{quote(name, safe='')}")


def _approval(done: dict[str, Any]) -> Approval:
    return Approval(window=done["window"], by=done["by"], at=datetime.fromisoformat(done["at"]),
                    decision=done["decision"], party=done.get("party"),
                    version=done["version"], approval=done.get("approval", ""),
                    notes=list(done.get("notes") or []))


def _decide(stores: Client, name: str, verb: str, body: dict[str, Any] | None) -> Approval:
    sent = None if body is None else {k: v for k, v in body.items() if v is not None}
    return _approval(stores.post(f"/windows/{quote(name, safe='')}/{verb}", sent))


def approve(stores: Client, _principal: None, name: str, *, comment: str | None = None,
            occurrence: str | None = None, expires: str | None = None,
            version: int | None = None) -> Approval:
    return _decide(stores, name, "approve", {"comment": comment, "occurrence": occurrence,
                                             "expires": expires, "version": version})


def deny(stores: Client, _principal: None, name: str, *, comment: str,
         occurrence: str | None = None, version: int | None = None) -> Approval:
    return _decide(stores, name, "deny", {"comment": comment, "occurrence": occurrence,
                                          "version": version})


def revoke(stores: Client, _principal: None, name: str) -> Approval:
    return _decide(stores, name, "revoke", None)
