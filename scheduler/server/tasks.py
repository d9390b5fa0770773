"""``/api/v1/tasks``: submit, list (paged), show, one host's output, and the controls cancel,
pause, resume, continue, retry-failed and reprioritize; ``/api/v1/jobs/{job_id}``: one job's
attempts.

A submission's body is a task file's keys as JSON (``scheduler.submission.request.KEYS``:
``action``, ``target``, ``params``, ``max_concurrency`` ...), mapped to a request by the one
mapping the CLI and task files use; a refused value names its key as a task file would.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Query, Request, Response

from scheduler.errors import ValidationError
from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.server.ids import TaskId
from scheduler.server.paging import Limit, Offset, page
from scheduler.server.read_cache import cached
from scheduler.verbs import submit as submit_verb
from scheduler.verbs import tasks

__all__ = ["jobs", "request_of_body", "router", "submission_answer"]

router = APIRouter(prefix="/tasks", tags=["tasks"])
jobs = APIRouter(prefix="/jobs", tags=["tasks"])

EXAMPLE = {"action": "shell", "target": "group:web", "params": {"command": "uptime"},
           "max_concurrency": "10%", "max_failures": "2"}


@router.get("", summary="Tasks, newest first (paged)")
def list_tasks(request: Request, who: Annotated[Principal, Depends(allowed("tasks.list"))],
               limit: Limit = 100, offset: Offset = 0, state: str | None = None,
               action: str | None = None, operator: str | None = None) -> dict[str, Any]:
    def compute() -> dict[str, Any]:
        rows = tasks.list_(stores_of(request), state=state, action=action, operator=operator,
                           limit=limit + 1, offset=offset, tenant=who.tenant)
        return page(rows, limit=limit, offset=offset)

    return cached(request, who, compute)  # type: ignore[return-value]


@router.get("/{task_id}", summary="One task: its request, progress and counters")
def show_task(request: Request, task_id: TaskId,
              who: Annotated[Principal, Depends(allowed("tasks.show"))],
              events: Annotated[bool, Query(description="Also the task's event trail (every "
                                            "job's claims, results, retries).")] = False
              ) -> dict[str, Any]:
    def compute() -> dict[str, Any]:
        notes: list[str] = []
        info = tasks.show(stores_of(request), task_id, events=events, note=notes.append,
                          tenant=who.tenant)
        return {**info, "notes": notes}

    return cached(request, who, compute)  # type: ignore[return-value]


def request_of_body(body: dict[str, Any]) -> Any:
    """The task request of a JSON body (or a form's fields mapped to its keys: the console's
    submit form), refused in one line naming the key."""
    from scheduler.submission.request import KEYS, task_request

    unknown = sorted(set(body) - set(KEYS) - {"dry_run"})
    if unknown:
        raise ValidationError(f"unknown key(s) {', '.join(unknown)}",
                              hint=f"a task request's keys: {', '.join(KEYS)}")
    for key in ("action", "target"):
        if not body.get(key):
            raise ValidationError(f"a task request needs {key!r}")
    return task_request(body, flag="")


@router.post("", status_code=201, summary="Submit a task (a task file's keys as JSON)",
             responses={200: {"description": "A repeat: this Idempotency-Key's first task "
                                             "(`repeat: true`); nothing was queued again"}})
def submit_task(request: Request, response: Response,
                who: Annotated[Principal, Depends(allowed("tasks.submit"))],
                body: Annotated[dict[str, Any], Body(examples=[EXAMPLE])],
                idempotency_key: Annotated[str | None, Header(
                    alias="Idempotency-Key", description="Send the same key again after a lost "
                    "reply: the first task comes back instead of a second.")] = None
                ) -> dict[str, Any]:
    done = submit_verb.submit(stores_of(request), who, request_of_body(body),
                              dry_run=bool(body.get("dry_run")), request_key=idempotency_key)
    return submission_answer(done, response)


def submission_answer(done: submit_verb.Submission, response: Response) -> dict[str, Any]:
    """A submission as ``POST /tasks`` answers it (a template's run answers the same): a
    repeat (200), a dry run's plan, or the task submitted."""
    if done.repeat is not None:
        response.status_code = 200
        first = done.repeat
        return {"task_id": first.task_id, "jobs": first.jobs, "operator": done.operator,
                "dry_run": False, "repeat": True, "state": first.state, "action": first.action,
                "host_count": first.jobs}
    plan = done.plan
    assert plan is not None
    from scheduler.submission.plan_view import blast_radius, view_of

    # A dry run answers the plan as `submit --dry-run` shows it (the CLI in remote mode prints
    # it as in direct mode); a submitted task what `submit` says of it.
    shown = ({"plan": view_of(plan).as_dict()} if done.task_id is None
             else {"groups": len(plan.groups), "blast_radius": blast_radius(plan),
                   "fleet_wide": plan.fleet_wide})
    return {"task_id": done.task_id, "jobs": done.jobs, "operator": done.operator,
            "dry_run": done.task_id is None, "repeat": False, "action": plan.action,
            "hosts": [h.name for h in plan.hosts][:1000], "host_count": len(plan.hosts),
            **shown}


@router.get("/{task_id}/output", summary="One host's output: its job's last attempt")
def task_output(request: Request, task_id: TaskId,
                who: Annotated[Principal, Depends(allowed("tasks.output"))],
                host: Annotated[str, Query(min_length=1, description="The host.")],
                grep: Annotated[str | None, Query(description="Only lines matching this "
                                                  "regular expression.")] = None
                ) -> dict[str, Any]:
    rows = tasks.output(stores_of(request), task_id, host=host, grep=grep, tenant=who.tenant)
    return {"task_id": task_id, "host": host, "jobs": rows}


@jobs.get("/{job_id}", summary="One job (<task>.<n>): every attempt, its steps and output")
def show_job(request: Request, job_id: str,
             who: Annotated[Principal, Depends(allowed("jobs.show"))]) -> dict[str, Any]:
    return tasks.job(stores_of(request), job_id, tenant=who.tenant).as_dict()


def _change(done: tasks.TaskChange) -> dict[str, Any]:
    return {"task_id": done.task_id, "verb": done.verb, "count": done.count,
            "state": done.state, "by": done.by, "priority": done.priority}


def _control(verb: str) -> Any:
    # A default, not an Annotated[...]: annotations are strings here, and one naming the
    # closure's ``verb`` could not be resolved by FastAPI.
    def route(request: Request, task_id: TaskId,
              who: Principal = Depends(allowed(f"tasks.{verb}"))) -> dict[str, Any]:
        return _change(tasks.control(stores_of(request), who, task_id, verb))

    route.__name__ = f"{verb.replace('-', '_')}_task"
    return route


SUMMARIES = {"cancel": "Cancel a task's jobs that have not started",
             "pause": "Pause a task (its pending jobs are held)",
             "resume": "Resume a paused task",
             "continue": "Pass a rollout's gate, or go on with a stopped rollout",
             "retry-failed": "Queue a task's failed jobs again"}
for _verb, _summary in SUMMARIES.items():
    router.add_api_route(f"/{{task_id}}/{_verb}", _control(_verb), methods=["POST"],
                         summary=_summary)


@router.post("/{task_id}/reprioritize", summary="Move a task's pending jobs to another class")
def reprioritize_task(request: Request, task_id: TaskId,
                      who: Annotated[Principal, Depends(allowed("tasks.reprioritize"))],
                      priority: Annotated[str, Body(embed=True, examples=["urgent"],
                                                    description="urgent, normal or bulk")]
                      ) -> dict[str, Any]:
    return _change(tasks.reprioritize(stores_of(request), who, task_id, priority))
