"""Hosts and groups over the API: list, show, history (``scheduler.verbs.inventory``'s read
verbs), rows as the local verbs return them."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from scheduler.remote.client import Client

__all__ = ["host_history", "list_groups", "list_hosts", "show_host"]


def list_hosts(stores: Client, *, group: str | None = None, match: str | None = None,
               limit: int | None = None) -> list[dict[str, Any]]:
    """Hosts by name, every page of ``GET /hosts``."""
    return stores.pages("/hosts", group=group, match=match, limit=limit)


def show_host(stores: Client, name: str) -> dict[str, Any]:
    return stores.get(f"/hosts/{quote(name, safe='')}")


def host_history(stores: Client, name: str, *, limit: int = 1000) -> list[dict[str, Any]]:
    """The newest ``limit`` events, oldest first as the local verb answers (the API pages them
    newest first)."""
    rows = stores.pages(f"/hosts/{quote(name, safe='')}/history", limit=limit)
    return [{**r, "ts": datetime.fromisoformat(r["ts"]) if r.get("ts") else None}
            for r in rows[::-1]]


def list_groups(stores: Client) -> list[dict[str, Any]]:
    return stores.get("/groups")["items"]
