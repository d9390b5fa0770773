"""Schedules over the API (``scheduler.verbs.schedules``): list, show, next; add, pause,
resume, remove, each answer rebuilt as the local verb's result (``ScheduleAdded``,
``ScheduleChange``). A schedule's task is sent as a task file's keys
(``scheduler.remote.submit.request_keys``), which the server maps back with the one mapping."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from scheduler.remote.client import Client
from scheduler.remote.submit import request_keys
from scheduler.verbs.schedules import ScheduleAdded, ScheduleChange

if TYPE_CHECKING:
    from scheduler.schedules.store import ScheduleSpec

__all__ = ["add", "list_", "next_", "pause", "remove", "resume", "show"]


def _path(name: str, *rest: str) -> str:
    return "/".join([f"/schedules/{quote(name, safe='')}", *rest])


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def list_(stores: Client) -> list[dict[str, Any]]:
    return stores.get("/schedules")["items"]


def show(stores: Client, name: str) -> dict[str, Any]:
    return stores.get(_path(name))


def next_(stores: Client, name: str, count: int = 5) -> list[dict[str, Any]]:
    return stores.get(_path(name, "next"), count=count)["items"]


def add(stores: Client, _principal: None, spec: ScheduleSpec) -> ScheduleAdded:
    done = stores.post("/schedules", {
        "name": spec.name, "cron": spec.cron, "every": spec.every, "tz": spec.tz,
        "catch_up": spec.catchup, "catch_up_window": f"{spec.catchup_window_s}s",
        "overlap": spec.overlap,
        **({"task": request_keys(spec.request)} if spec.request is not None else
           {"template": spec.template, "template_params": dict(spec.template_params)})})
    return ScheduleAdded(name=done["name"], cron=done["cron"], tz=done["tz"],
                         explain=done["explain"], next=_when(done["next"]),
                         hosts=done["hosts"], by=done["by"])


def _change(done: dict[str, Any]) -> ScheduleChange:
    return ScheduleChange(schedule=done["schedule"], verb=done["verb"], by=done["by"],
                          changed=done.get("changed", True), missed=done.get("missed", 0),
                          next=_when(done.get("next")))


def pause(stores: Client, _principal: None, name: str) -> ScheduleChange:
    return _change(stores.post(_path(name, "pause")))


def resume(stores: Client, _principal: None, name: str) -> ScheduleChange:
    return _change(stores.post(_path(name, "resume")))


def remove(stores: Client, _principal: None, name: str) -> ScheduleChange:
    return _change(stores.delete(_path(name)))
