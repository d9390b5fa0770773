"""``/api/v1/tasks``: submit, list (paged), show, and the controls cancel, pause, resume.

A submission's body is a task file's keys as JSON (``scheduler.submission.request.KEYS``:
``action``, ``target``, ``params``, ``max_concurrency`` ...), mapped to a request by the one
mapping the CLI and task files use; a refused value names its key as a task file would.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Request

from scheduler.errors import ValidationError
from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.server.paging import Limit, Offset, page
from scheduler.verbs import submit as submit_verb
from scheduler.verbs import tasks

__all__ = ["router"]

router = APIRouter(prefix="/tasks", tags=["tasks"])

EXAMPLE = {"action": "shell", "target": "group:web", "params": {"command": "uptime"},
           "max_concurrency": "10%", "max_failures": "2"}


@router.get("", summary="Tasks, newest first (paged)")
def list_tasks(request: Request, who: Annotated[Principal, Depends(allowed("tasks.list"))],
               limit: Limit = 100, offset: Offset = 0, state: str | None = None,
               action: str | None = None) -> dict[str, Any]:
    rows = tasks.list_(stores_of(request), state=state, action=action, limit=limit + 1,
                       offset=offset)
    return page(rows, limit=limit, offset=offset)


@router.get("/{task_id}", summary="One task: its request, progress and counters")
def show_task(request: Request, task_id: int,
              who: Annotated[Principal, Depends(allowed("tasks.show"))]) -> dict[str, Any]:
    notes: list[str] = []
    info = tasks.show(stores_of(request), task_id, note=notes.append)
    return {**info, "notes": notes}


def _request(body: dict[str, Any]) -> Any:
    from scheduler.submission.request import KEYS, task_request

    unknown = sorted(set(body) - set(KEYS) - {"dry_run"})
    if unknown:
        raise ValidationError(f"unknown key(s) {', '.join(unknown)}",
                              hint=f"a task request's keys: {', '.join(KEYS)}")
    for key in ("action", "target"):
        if not body.get(key):
            raise ValidationError(f"a task request needs {key!r}")
    return task_request(body, flag="")


@router.post("", status_code=201, summary="Submit a task (a task file's keys as JSON)")
def submit_task(request: Request, who: Annotated[Principal, Depends(allowed("tasks.submit"))],
                body: Annotated[dict[str, Any], Body(examples=[EXAMPLE])]) -> dict[str, Any]:
    done = submit_verb.submit(stores_of(request), who, _request(body),
                              dry_run=bool(body.get("dry_run")))
    plan = done.plan
    return {"task_id": done.task_id, "jobs": done.jobs, "operator": done.operator,
            "dry_run": done.task_id is None, "action": plan.action,
            "hosts": [h.name for h in plan.hosts][:1000], "host_count": len(plan.hosts)}


def _control(verb: str) -> Any:
    # A default, not an Annotated[...]: annotations are strings here, and one naming the
    # closure's ``verb`` could not be resolved by FastAPI.
    def route(request: Request, task_id: int,
              who: Principal = Depends(allowed(f"tasks.{verb}"))) -> dict[str, Any]:
        done = tasks.control(stores_of(request), who, task_id, verb)
        return {"task_id": done.task_id, "verb": done.verb, "count": done.count,
                "state": done.state, "by": done.by}

    route.__name__ = f"{verb}_task"
    return route


for _verb in ("cancel", "pause", "resume"):
    router.add_api_route(f"/{{task_id}}/{_verb}", _control(_verb), methods=["POST"],
                         summary=f"{_verb.capitalize()} a task")
