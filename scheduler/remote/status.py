"""``status`` over the API: the health findings of ``GET /status``, as ``Finding`` objects."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.remote.client import Client

if TYPE_CHECKING:
    from scheduler.health.checks import Finding

__all__ = ["status"]


def status(stores: Client) -> list[Finding]:
    """The server's health checks (``scheduler.verbs.status.status`` run there)."""
    from scheduler.health.checks import Finding

    return [Finding(**f) for f in stores.get("/status")["findings"]]
