"""``/ui/tasks``: the task list, paged and filtered on the server (state, operator, action, a
group the target names, creation time), newest first, each task with its progress bar.

``router`` also carries the pages of one task (``task_page``: its plan, progress and hosts,
live), of one job (``job_page``) and the task's controls (``task_controls``), so the console
installs the task pages as one.

1. The list is ``tasks.list`` (``scheduler.verbs.tasks.list_``), fetched a row more than the
   page shows to know whether there is a next page;
2. a customer sees its own tasks only, counted over its own jobs (``tenant=``), and is not
   offered the group filter (the target may name other customers' groups).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from scheduler.errors import ValidationError
from scheduler.parse import parse_ago
from scheduler.server.auth import stores_of
from scheduler.server.console import job_page, task_controls, task_page
from scheduler.server.console.web import Viewer, page_viewer, render
from scheduler.submission.taskinfo import LIST_STATES
from scheduler.verbs import tasks

__all__ = ["PAGE_SIZE", "router"]

router = APIRouter()
PAGE_SIZE = 50  # tasks per page, unless the query asks for another ``limit``
MAX_LIMIT = 500


@dataclass(frozen=True)
class ListFilter:
    """The list's filters as the query string gives them ('' when not set)."""

    state: str = ""
    operator: str = ""
    action: str = ""
    group: str = ""
    since: str = ""
    until: str = ""

    def args(self) -> str:
        """The filters set, as ``&name=value`` for the pager's links."""
        kept = {k: v for k, v in asdict(self).items() if v}
        return f"&{urlencode(kept)}" if kept else ""


def _time(text: str, what: str) -> datetime | None:
    return parse_ago(text, what) if text else None


@router.get("/tasks", include_in_schema=False)
def task_list(request: Request, seen: Annotated[Viewer, Depends(page_viewer("tasks.list"))],
              state: str = "", operator: str = "", action: str = "", group: str = "",
              since: str = "", until: str = "", offset: int = 0,
              limit: int = PAGE_SIZE) -> Response:
    shown = ListFilter(state.strip(), operator.strip(), action.strip(), group.strip(),
                       since.strip(), until.strip())
    if not 0 <= offset < 2**62:
        raise ValidationError(f"offset {offset} must be 0 or more")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"limit {limit} must be from 1 to {MAX_LIMIT}")
    rows = tasks.list_(stores_of(request), state=shown.state or None,
                       operator=shown.operator or None, action=shown.action or None,
                       group=shown.group or None, since=_time(shown.since, "since"),
                       until=_time(shown.until, "until"), limit=limit + 1, offset=offset,
                       tenant=seen.customer)
    kept = shown.args() + (f"&limit={limit}" if limit != PAGE_SIZE else "")
    return render(request, seen, "tasks.html", rows=rows[:limit], more=len(rows) > limit,
                  offset=offset, limit=limit, filters=shown, kept=kept, states=LIST_STATES)


for _module in (task_controls, task_page, job_page):
    router.include_router(_module.router)
