"""``/ui/tasks/{id}``: one task's page, and ``/ui/tasks/{id}/live``, its changing parts.

1. The plan as recorded (``tasks.show``): action, parameters (a secret one is its ``@env:`` or
   ``@file:`` reference, never its value), target, policy, waves, windows, origin;
2. the summary (``<section id="summary">``): the jobs by state and, for a rollout in waves,
   each wave's jobs by state (``tasks.waves``: one query of the task's job states, whatever
   its size);
3. the hosts (``<section id="hosts">``): one page of ``PAGE_SIZE`` jobs filtered on the server
   by state, exit code and text in their error or output (``tasks.jobs``), each linking to
   its job's page;
4. the controls the viewer's role allows and the task's state makes sense of
   (``task_controls.offered``);
5. the live stream sends the summary and the same page of hosts (only the rows in view) every
   second, and ends once the task has finished and the record has caught up.

A customer sees the task over its own jobs only (``tenant=``): its counts, its hosts, no wave
sizes and no target; another customer's task is not found.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from scheduler.errors import ValidationError
from scheduler.record.models import JOB_STATES, TASK_FINAL_STATES
from scheduler.server.auth import stores_of
from scheduler.server.console import stream
from scheduler.server.console.task_controls import offered
from scheduler.server.console.web import PREFIX, Viewer, page_viewer, render, templates
from scheduler.server.ids import TaskId
from scheduler.verbs import tasks

__all__ = ["PAGE_SIZE", "HostFilter", "router"]

router = APIRouter()
PAGE_SIZE = 50
TEXT_MAX = 200  # characters of the text filter


@dataclass(frozen=True)
class HostFilter:
    """The host table's filters and page, as the query string gives them."""

    state: str = ""
    exit: str = ""
    text: str = ""
    offset: int = 0

    @classmethod
    def of(cls, state: str, exit: str, text: str, offset: int) -> HostFilter:
        shown = cls(state.strip(), exit.strip(), text.strip(), offset)
        if shown.exit and not re.fullmatch(r"-?[0-9]{1,10}", shown.exit):
            raise ValidationError(f"exit code {shown.exit!r} is not a whole number")
        if shown.exit and not -2**31 <= int(shown.exit) < 2**31:
            raise ValidationError(f"exit code {shown.exit} is out of range")
        if len(shown.text) > TEXT_MAX:
            raise ValidationError(f"the text to find is longer than {TEXT_MAX} characters")
        if not 0 <= offset < 2**62:
            raise ValidationError(f"offset {offset} must be 0 or more")
        return shown

    def args(self) -> str:
        """The filters set, as ``&name=value`` for the pager's links."""
        kept = {k: v for k, v in asdict(self).items() if v and k != "offset"}
        return f"&{urlencode(kept)}" if kept else ""

    def query(self) -> str:
        """The filters and page as a query string (the live stream's)."""
        kept = {k: v for k, v in asdict(self).items() if v}
        return urlencode(kept)


def task_context(request: Request, seen: Viewer, task_id: int,
                 hosts: HostFilter) -> dict[str, Any]:
    """What the page and its live parts draw: the task, its waves, one page of its hosts."""
    stores = stores_of(request)
    notes: list[str] = []
    info = tasks.show(stores, task_id, note=notes.append, tenant=seen.customer)
    rows = tasks.jobs(stores, task_id, state=hosts.state or None,
                      exit_code=int(hosts.exit) if hosts.exit else None,
                      text=hosts.text or None, limit=PAGE_SIZE + 1, offset=hosts.offset,
                      tenant=seen.customer)
    waves = None if seen.customer else tasks.waves(stores, task_id)
    return {"task": info, "notes": notes, "waves": waves, "hosts": rows[:PAGE_SIZE],
            "more": len(rows) > PAGE_SIZE, "filters": hosts, "limit": PAGE_SIZE,
            "controls": offered(seen, info, waves), "job_states": JOB_STATES}


def finished(info: dict[str, Any]) -> bool:
    """Whether nothing more will change on the page: every job ended (or the task was
    cancelled or aborted and nothing runs) and the record holds every result."""
    return (info["state"] in TASK_FINAL_STATES and not info.get("running")
            and not info.get("record_behind"))


@router.get("/tasks/{task_id}", include_in_schema=False)
def task_view(request: Request, task_id: TaskId,
              seen: Annotated[Viewer, Depends(page_viewer("tasks.show"))],
              state: str = "", exit: str = "", text: str = "", offset: int = 0) -> Response:
    hosts = HostFilter.of(state, exit, text, offset)
    context = task_context(request, seen, task_id, hosts)
    live = f"{PREFIX}/tasks/{task_id}/live" + (f"?{hosts.query()}" if hosts.query() else "")
    return render(request, seen, "task.html", live=live,
                  ended=finished(context["task"]), **context)


@router.get("/tasks/{task_id}/live", include_in_schema=False)
def task_live(request: Request, task_id: TaskId,
              seen: Annotated[Viewer, Depends(page_viewer("tasks.show"))],
              state: str = "", exit: str = "", text: str = "", offset: int = 0) -> Response:
    hosts = HostFilter.of(state, exit, text, offset)
    task_context(request, seen, task_id, hosts)  # not found or refused: an error, not a stream

    def read() -> stream.Frame:
        context = task_context(request, seen, task_id, hosts)
        parts = {name: templates.get_template(f"task_{name}.html").render(
            viewer=seen, prefix=PREFIX, **context) for name in ("summary", "hosts")}
        return parts, finished(context["task"])

    return stream.fragments(request, read)
