"""Schedules over the API: list and show (``scheduler.verbs.schedules``' read verbs)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from scheduler.remote.client import Client

__all__ = ["list_", "show"]


def list_(stores: Client) -> list[dict[str, Any]]:
    return stores.get("/schedules")["items"]


def show(stores: Client, name: str) -> dict[str, Any]:
    return stores.get(f"/schedules/{quote(name, safe='')}")
