"""A task's verbs over the API (``scheduler.verbs.tasks``): list, show, output, one job's
attempts, and the controls, each returning what the local verb returns.

``output`` without a host reads the task's jobs a page at a time and asks for each host's
output in turn (``GET /tasks/{id}/output?host=``): the API never answers every host's output
at once, so a 10,000-host task's output is 10,000 small answers, in the local verb's order.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from scheduler.errors import ValidationError
from scheduler.remote.client import Client
from scheduler.verbs.tasks import CONTROLS, TaskChange

if TYPE_CHECKING:
    from collections.abc import Callable

    from scheduler.reports.attempts import JobView

__all__ = ["CONTROLS", "TaskChange", "cancel", "continue_", "control", "job", "jobs", "list_",
           "output", "pause", "reprioritize", "resume", "retry_failed", "show"]


def control(stores: Client, _principal: None, task_id: int, verb: str,
            priority: str | None = None) -> TaskChange:
    """One of :data:`CONTROLS`, recorded by the server as the token's owner's."""
    body = {"priority": priority} if verb == "reprioritize" else None
    done = stores.post(f"/tasks/{task_id}/{verb}", body)
    return TaskChange(task_id=done["task_id"], verb=done["verb"], count=done["count"],
                      state=done["state"], by=done["by"], priority=done.get("priority"))


def pause(stores: Client, principal: None, task_id: int) -> TaskChange:
    return control(stores, principal, task_id, "pause")


def resume(stores: Client, principal: None, task_id: int) -> TaskChange:
    return control(stores, principal, task_id, "resume")


def cancel(stores: Client, principal: None, task_id: int) -> TaskChange:
    return control(stores, principal, task_id, "cancel")


def continue_(stores: Client, principal: None, task_id: int) -> TaskChange:
    return control(stores, principal, task_id, "continue")


def retry_failed(stores: Client, principal: None, task_id: int) -> TaskChange:
    return control(stores, principal, task_id, "retry-failed")


def reprioritize(stores: Client, principal: None, task_id: int, priority: str) -> TaskChange:
    return control(stores, principal, task_id, "reprioritize", priority)


def list_(stores: Client, *, state: str | None = None, operator: str | None = None,
          action: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """Tasks, newest first: the first ``limit`` of ``GET /tasks``' pages."""
    return stores.pages("/tasks", state=state, operator=operator, action=action, limit=limit)


def show(stores: Client, task_id: int, *, events: bool = False,
         note: Callable[[str], None] | None = None) -> dict[str, Any]:
    """One task as the server's ``tasks.show`` describes it; its warning lines go to ``note``."""
    info = stores.get(f"/tasks/{task_id}", events="true" if events else None)
    for line in info.pop("notes", []):
        if note is not None:
            note(line)
    if "events" in info:  # the trail's times, as the local verb has them
        info["events"] = [{**e, "ts": datetime.fromisoformat(e["ts"]) if e.get("ts") else None}
                          for e in info["events"]]
    return info


def jobs(stores: Client, task_id: int, *, state: str | None = None, limit: int = 100,
         offset: int = 0) -> list[dict[str, Any]]:
    page = stores.get(f"/tasks/{task_id}/jobs", state=state, limit=limit, offset=offset)
    return page["items"]


def _host_output(stores: Client, task_id: int, host: str, grep: str | None) -> list[dict[str, Any]]:
    return stores.get(f"/tasks/{task_id}/output", host=host, grep=grep)["jobs"]


def output(stores: Client, task_id: int, *, host: str | None = None, failed: bool = False,
           grep: str | None = None) -> list[dict[str, Any]]:
    """Every job's output of its last attempt (see the module docstring)."""
    if grep is not None:
        try:
            re.compile(grep)
        except re.error as exc:
            raise ValidationError(f"--grep {grep!r} is not a regular expression: {exc}") from None
    if host is not None:
        rows = _host_output(stores, task_id, host, grep)
        return [r for r in rows if r["state"] in ("failed", "lost")] if failed else rows
    out: list[dict[str, Any]] = []
    for row in stores.pages(f"/tasks/{task_id}/jobs"):
        if failed and row["state"] not in ("failed", "lost"):
            continue
        out += _host_output(stores, task_id, row["host"], grep)
    return out


def job(stores: Client, job_id: str) -> JobView:
    """Job ``job_id``'s attempts, rebuilt with their times as the local verb has them."""
    from scheduler.reports.attempts import Attempt, JobView

    view = stores.get(f"/jobs/{quote(job_id, safe='')}")
    attempts = [Attempt(**{k: (datetime.fromisoformat(v) if k in ("started", "ended",
                                                                     "lease_expired") and v
                               else v) for k, v in a.items()})
                for a in view["attempts"]]
    return JobView(job=view["job"], task=view["task"], host=view["host"], state=view["state"],
                   attempts=attempts, late=view["late"], lost_note=view.get("lost_note"))
