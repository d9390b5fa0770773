"""Customers' settings over the API (``scheduler.verbs.tenants``): list, and set whether their
windows need their approval and whom to tell."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from scheduler.remote.client import Client

__all__ = ["list_", "set_"]


def list_(stores: Client) -> list[dict[str, Any]]:
    return stores.get("/tenants")["items"]


def set_(stores: Client, _principal: None, name: str, *, approval_required: bool | None = None,
         contacts: Sequence[str] | None = None) -> dict[str, Any]:
    body = {"approval_required": approval_required,
            "contacts": None if contacts is None else list(contacts)}
    return stores.post(f"/tenants/{quote(name, safe='')}",
                       {k: v for k, v in body.items() if v is not None})
