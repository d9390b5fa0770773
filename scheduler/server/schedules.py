"""``/api/v1/schedules``: list, show, next occurrences, add, remove, and the controls pause and
resume.

A schedule's body holds ``schedules add``'s options as keys and its task as ``task``: a task
file's keys (``action``, ``target``, ``params`` ...), mapped by the one mapping the CLI, task
files and ``POST /tasks`` use; ``at`` and ``in`` are refused (the occurrence is the start).
Or, instead of ``task``, a saved ``template`` (``NAME`` or ``NAME@VERSION``) and its
``template_params``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from scheduler.errors import ValidationError

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.verbs import schedules

__all__ = ["router"]

router = APIRouter(prefix="/schedules", tags=["schedules"])


class ScheduleBody(BaseModel):
    """``schedules add``'s options, and its task as a task file's keys."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(examples=["nightly-uptime"])
    cron: str | None = Field(None, examples=["0 3 * * *"])
    every: str | None = Field(None, description="An interval instead of cron (30s, 5m).")
    tz: str = "UTC"
    catch_up: str = Field("latest", description="After downtime: skip, latest or all.")
    catch_up_window: str = "1h"
    overlap: str = Field("skip", description="skip or allow")
    task: dict[str, Any] | None = Field(None, examples=[{"action": "command",
                                                         "target": "group:web",
                                                         "params": {"cmd": "uptime"}}])
    template: str | None = Field(None, description="Or a saved template, NAME (its newest "
                                 "version at each firing) or NAME@VERSION, instead of task.")
    template_params: dict[str, Any] = Field(default_factory=dict,
                                            description="The template's parameters' values.")


@router.get("", summary="Every schedule with its last and next occurrence")
def list_schedules(request: Request,
                   who: Annotated[Principal, Depends(allowed("schedules.list"))]
                   ) -> dict[str, Any]:
    return {"items": schedules.list_(stores_of(request))}


@router.post("", status_code=201, summary="Add a schedule: its task is checked as `submit` "
                                          "would, then armed for its next occurrence")
def add_schedule(request: Request, body: ScheduleBody,
                 who: Annotated[Principal, Depends(allowed("schedules.add"))]
                 ) -> dict[str, Any]:
    from scheduler.parse import parse_duration
    from scheduler.schedules.store import ScheduleSpec
    from scheduler.submission.request import KEYS, task_request

    if (body.task is None) == (body.template is None):
        raise ValidationError("give the schedule's task or its template (one of them)")
    task = body.task or {}
    unknown = sorted(set(task) - set(KEYS) | set(task) & {"at", "in"})
    if unknown:
        raise ValidationError(f"task: unknown key(s) {', '.join(unknown)}",
                              hint="a schedule's task takes a task file's keys but at and in "
                                   "(the occurrence is the start)")
    window = parse_duration(body.catch_up_window, "catch_up_window")
    spec = ScheduleSpec(name=body.name,
                        request=None if body.task is None else task_request(task, flag=""),
                        tz=body.tz, cron=body.cron, every=body.every, catchup=body.catch_up,
                        catchup_window_s=int(window.total_seconds()), overlap=body.overlap,
                        template=body.template, template_params=body.template_params)
    done = schedules.add(stores_of(request), who, spec)
    return {**done.as_dict(), "by": done.by}


@router.delete("/{name}", summary="Remove a schedule (its tasks stay, with their record)")
def remove_schedule(request: Request, name: str,
                    who: Annotated[Principal, Depends(allowed("schedules.remove"))]
                    ) -> dict[str, Any]:
    done = schedules.remove(stores_of(request), who, name)
    return {"schedule": done.schedule, "verb": done.verb, "by": done.by}


@router.get("/{name}", summary="One schedule: definition, options, latest tasks and misses")
def show_schedule(request: Request, name: str,
                  who: Annotated[Principal, Depends(allowed("schedules.show"))]
                  ) -> dict[str, Any]:
    return schedules.show(stores_of(request), name)


@router.get("/{name}/next", summary="A schedule's next occurrences, in its zone and in UTC")
def next_occurrences(request: Request, name: str,
                     who: Annotated[Principal, Depends(allowed("schedules.next"))],
                     count: int = 5) -> dict[str, Any]:  # the verb refuses a bad count
    return {"items": schedules.next_(stores_of(request), name, count)}


def _control(verb: str) -> Any:
    # A default, not an Annotated[...]: see scheduler.server.tasks._control.
    def route(request: Request, name: str,
              who: Principal = Depends(allowed(f"schedules.{verb}"))) -> dict[str, Any]:
        call = schedules.pause if verb == "pause" else schedules.resume
        done = call(stores_of(request), who, name)
        return {"schedule": done.schedule, "verb": done.verb, "by": done.by,
                "changed": done.changed, "missed": done.missed, "next": done.next}

    route.__name__ = f"{verb}_schedule"
    return route


router.add_api_route("/{name}/pause", _control("pause"), methods=["POST"],
                     summary="Pause a schedule (occurrences meanwhile are recorded as missed)")
router.add_api_route("/{name}/resume", _control("resume"), methods=["POST"],
                     summary="Resume a schedule from its next occurrence")
