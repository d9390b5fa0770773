"""``/api/v1/tasks/{id}/jobs``: a task's jobs a page at a time, in host order, optionally in one
job state (``?state=failed``), with one exit code (``?exit=3``) or with a text in their error or
output (``?text=refused``), paged and filtered in SQL: a 10,000-host task's detail is never one
response of everything (``GET /tasks/{id}`` says the counts, the jobs by state and the first failures;
``GET /tasks/{id}/output?host=`` one host's output)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.server.ids import TaskId
from scheduler.server.paging import Limit, Offset, page
from scheduler.server.read_cache import cached
from scheduler.verbs import tasks

__all__ = ["router"]

router = APIRouter(prefix="/tasks", tags=["tasks"])


@router.get("/{task_id}/jobs", summary="A task's jobs in host order (paged; `state`, `exit`, `text`)")
def task_jobs(request: Request, task_id: TaskId,
              who: Annotated[Principal, Depends(allowed("tasks.jobs"))],
              limit: Limit = 100, offset: Offset = 0,
              state: Annotated[str | None, Query(description=(
                  "Only jobs in this state (pending, running, succeeded, failed, lost, "
                  "cancelled ...)."))] = None,
              exit: Annotated[int | None, Query(ge=-2**31, le=2**31 - 1, description=(
                  "Only jobs that ended with this exit code."))] = None,
              text: Annotated[str | None, Query(max_length=200, description=(
                  "Only jobs whose error or output's tail holds this text (any case)."))] = None
              ) -> dict[str, Any]:
    def compute() -> dict[str, Any]:
        rows = tasks.jobs(stores_of(request), task_id, state=state, limit=limit + 1,
                          offset=offset, tenant=who.tenant, exit_code=exit, text=text or None)
        return {"task_id": task_id, **page(rows, limit=limit, offset=offset)}

    return cached(request, who, compute)  # type: ignore[return-value]
