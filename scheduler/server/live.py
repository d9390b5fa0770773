"""``GET /api/v1/tasks/{id}/progress`` and ``GET /api/v1/status/queue``: what the live views
read, one frame at a time. ``tasks watch`` and ``top`` in remote mode poll them and draw what
they draw in direct mode (``scheduler.views``); the numbers are the verbs' (``follow.progress``,
``status.snapshot``), so the frames are the same.

A task's progress for a customer counts its own jobs only (``tracking.tenant_progress``); the
queue's frame names every customer's tasks and the team's workers: the team's read.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.server.ids import TaskId
from scheduler.verbs import follow, status, tracking

__all__ = ["router"]

router = APIRouter()


@router.get("/tasks/{task_id}/progress", tags=["tasks"],
            summary="A task's numbers now, as `tasks watch` draws them (live from Redis, or "
                    "the record's for a task Redis no longer has)")
def task_progress(request: Request, task_id: TaskId,
                  who: Annotated[Principal, Depends(allowed("tasks.watch"))]) -> dict[str, Any]:
    if who.tenant is not None:  # the queue's counts are every customer's jobs: its own only
        return tracking.tenant_progress(stores_of(request), str(task_id), who.tenant).as_dict()
    return follow.progress(stores_of(request), [str(task_id)])[0].as_dict()


@router.get("/status/queue", tags=["status"],
            summary="One frame of the queue, as `top` draws it: due, overdue, running, parked, "
                    "held, dead, the tasks and the workers")
def queue_frame(request: Request,
                who: Annotated[Principal, Depends(allowed("top"))]) -> dict[str, Any]:
    return status.snapshot(stores_of(request)).as_dict()
