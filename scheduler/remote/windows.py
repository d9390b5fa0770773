"""Service windows over the API (``scheduler.verbs.windows``): list, show, next; add, freeze,
edit, assign, unassign, remove; the decisions approve, deny and revoke. Each answer is rebuilt
as the local verb's result (``WindowAdded``, ``WindowChange``, ``Approval``). ``sync`` stays
direct only: it repairs the Redis copies, an administrator's job at the deployment."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from scheduler.remote.client import Client
from scheduler.verbs.windows import Approval, WindowAdded, WindowChange

if TYPE_CHECKING:
    from scheduler.windows.store import WindowSpec

__all__ = ["add", "approve", "assign", "deny", "edit", "freeze", "list_", "next_", "remove",
           "revoke", "show", "unassign"]


def _path(name: str, *rest: str) -> str:
    return "/".join([f"/windows/{quote(name, safe='')}", *rest])


def list_(stores: Client) -> list[dict[str, Any]]:
    return stores.get("/windows")["items"]


def show(stores: Client, name: str) -> dict[str, Any]:
    return stores.get(_path(name))


def next_(stores: Client, name: str, count: int = 5) -> list[dict[str, Any]]:
    return stores.get(_path(name, "next"), count=count)["items"]


def _added(done: dict[str, Any]) -> WindowAdded:
    nxt = done["next_open_utc"]
    return WindowAdded(name=done["name"], kind=done["kind"],
                       next_open_utc=datetime.fromisoformat(nxt) if nxt else None,
                       requires_approval=bool(done.get("requires_approval")), by=done["by"],
                       notes=list(done.get("notes") or []))


def _change(done: dict[str, Any], verb: str) -> WindowChange:
    return WindowChange(window=done["window"], verb=verb, by=done["by"],
                        count=int(done.get("count") or 0), notes=list(done.get("notes") or []))


def add(stores: Client, _principal: None, spec: WindowSpec) -> WindowAdded:
    return _added(stores.post("/windows", dataclasses.asdict(spec)))


def freeze(stores: Client, _principal: None, name: str, *, start: str, end: str,
           tz: str = "UTC", hosts: list[str] | None = None, groups: list[str] | None = None,
           description: str | None = None) -> WindowAdded:
    return _added(stores.post("/windows/freezes", {
        "name": name, "start": start, "end": end, "tz": tz, "hosts": hosts or [],
        "groups": groups or [], "description": description}))


def edit(stores: Client, _principal: None, name: str, *, version: int | None = None,
         **changes: Any) -> WindowChange:
    body = {k: v for k, v in {**changes, "version": version}.items() if v is not None}
    return _change(stores.patch(_path(name), body), "edit")


def assign(stores: Client, _principal: None, name: str, *, hosts: list[str] | None = None,
           groups: list[str] | None = None) -> WindowChange:
    return _change(stores.post(_path(name, "assign"), {"hosts": hosts or [],
                                                       "groups": groups or []}), "assign")


def unassign(stores: Client, _principal: None, name: str, *,
             hosts: list[str] | None = None, groups: list[str] | None = None) -> WindowChange:
    return _change(stores.post(_path(name, "unassign"), {"hosts": hosts or [],
                                                         "groups": groups or []}), "unassign")


def remove(stores: Client, _principal: None, name: str) -> WindowChange:
    return _change(stores.delete(_path(name)), "remove")


def _approval(done: dict[str, Any]) -> Approval:
    return Approval(window=done["window"], by=done["by"], at=datetime.fromisoformat(done["at"]),
                    decision=done["decision"], party=done.get("party"),
                    version=done["version"], approval=done.get("approval", ""),
                    notes=list(done.get("notes") or []))


def _decide(stores: Client, name: str, verb: str, body: dict[str, Any] | None) -> Approval:
    sent = None if body is None else {k: v for k, v in body.items() if v is not None}
    return _approval(stores.post(_path(name, verb), sent))


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
