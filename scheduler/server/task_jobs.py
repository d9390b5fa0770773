"""``/api/v1/tasks/{id}/jobs``: a task's jobs a page at a time, in host order, optionally in one
job state (``?state=failed``), paged in SQL: a 10,000-host task's detail is never one response
of everything (``GET /tasks/{id}`` says the counts, the jobs by state and the first failures;
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


@router.get("/{task_id}/jobs", summary="A task's jobs in host order (paged; `state`)")
def task_jobs(request: Request, task_id: TaskId,
              who: Annotated[Principal, Depends(allowed("tasks.jobs"))],
              limit: Limit = 100, offset: Offset = 0,
              state: Annotated[str | None, Query(description=(
                  "Only jobs in this state (pending, running, succeeded, failed, lost, "
                  "cancelled ...)."))] = None) -> dict[str, Any]:
    def compute() -> dict[str, Any]:
        rows = tasks.jobs(stores_of(request), task_id, state=state, limit=limit + 1,
                          offset=offset, tenant=who.tenant)
        return {"task_id": task_id, **page(rows, limit=limit, offset=offset)}

    return cached(request, who, compute)  # type: ignore[return-value]
