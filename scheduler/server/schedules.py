"""``/api/v1/schedules``: list, show, and the controls pause and resume."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.verbs import schedules

__all__ = ["router"]

router = APIRouter(prefix="/schedules", tags=["schedules"])


@router.get("", summary="Every schedule with its last and next occurrence")
def list_schedules(request: Request,
                   who: Annotated[Principal, Depends(allowed("schedules.list"))]
                   ) -> dict[str, Any]:
    return {"items": schedules.list_(stores_of(request))}


@router.get("/{name}", summary="One schedule: definition, options, latest tasks and misses")
def show_schedule(request: Request, name: str,
                  who: Annotated[Principal, Depends(allowed("schedules.show"))]
                  ) -> dict[str, Any]:
    return schedules.show(stores_of(request), name)


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
