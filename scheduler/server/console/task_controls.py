"""A task's controls in the console: cancel, pause, resume, continue and retry-failed.

1. ``offered``: the buttons of a task's page, those the viewer's role may call
   (``viewer.may("tasks.<verb>")``, the role table of the API and the CLI) and the task's
   state makes sense of;
2. ``GET /ui/tasks/{id}/{verb}``: the confirmation, naming what will happen with the task's
   numbers now, and a form that posts it with the session's CSRF token;
3. ``POST /ui/tasks/{id}/{verb}``: after the CSRF check, ``scheduler.verbs.tasks.control``
   (the API's verb, recorded with the viewer's principal), then back to the task's page; a
   change the task's state refuses is its one-line error on a 409 page.

Both refuse (403) a role that may not call the verb (no customer role may call these).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from scheduler.errors import ValidationError
from scheduler.server.auth import stores_of
from scheduler.server.console.web import (
    PREFIX,
    Viewer,
    error_page,
    form,
    page_headers,
    page_viewer,
    render,
)
from scheduler.server.ids import TaskId
from scheduler.verbs import tasks

__all__ = ["LABELS", "offered", "router", "what_happens"]

router = APIRouter()

LABELS = {"pause": "Pause", "resume": "Resume", "continue": "Continue the rollout",
          "retry-failed": "Retry failed jobs", "cancel": "Cancel"}
PHRASES = {"pause": "pause task", "resume": "resume task", "continue": "continue task",
           "retry-failed": "retry the failed jobs of task", "cancel": "cancel task"}
UNDERWAY = ("accepted", "active", "paused", "stopped")
# Each verb's role check as a dependency. A default, not an Annotated[...]: the annotations are
# strings here, and one naming the closure's ``verb`` could not be resolved by FastAPI.
MAY = {verb: Depends(page_viewer(f"tasks.{verb}")) for verb in LABELS}


def _sensible(verb: str, info: dict[str, Any]) -> bool:
    """Whether ``verb`` makes sense in the task's state (the verb still has the last word)."""
    state, rollout = info["state"], info.get("waves") or {}
    return {"cancel": state in UNDERWAY,
            "pause": state in ("active", "stopped") and info.get("recorded_state") != "paused",
            "resume": info.get("recorded_state") == "paused" or state == "paused",
            "continue": state in ("active", "paused", "stopped")
            and rollout.get("state") in ("gated", "stopped"),
            "retry-failed": bool(info.get("failed") or info.get("lost"))
            and info.get("live") is not None}[verb]


def offered(seen: Viewer, info: dict[str, Any],
            waves: list[dict[str, int]] | None) -> list[tuple[str, str]]:
    """The controls to show on the task's page: (verb, label) pairs."""
    del waves  # the confirmation counts them; the buttons need the state only
    return [(verb, label) for verb, label in LABELS.items()
            if seen.may(f"tasks.{verb}") and _sensible(verb, info)]


def _n(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else (many or one + 's')}"


def what_happens(verb: str, info: dict[str, Any], waves: list[dict[str, int]] | None) -> str:
    """The confirmation's sentence: what ``verb`` will do to the task, with its numbers now."""
    tid, pending, running = info["id"], int(info.get("pending") or 0), int(info.get("running") or 0)
    failed = int(info.get("failed") or 0) + int(info.get("lost") or 0)
    finish = f"{_n(running, 'running job')} {'finishes' if running == 1 else 'finish'}"
    if verb == "cancel":
        return (f"Cancel task {tid}: its {_n(pending, 'job')} that have not started will not "
                f"run; {finish}.")
    if verb == "pause":
        return (f"Pause task {tid}: its {_n(pending, 'job')} that have not started are held, "
                f"in their order, until it is resumed; {finish}.")
    if verb == "resume":
        return (f"Resume task {tid}: its {_n(pending, 'held job')} "
                f"{'is' if pending == 1 else 'are'} released in their order.")
    if verb == "retry-failed":
        return (f"Retry the failed jobs of task {tid}: its {_n(failed, 'failed or lost job')} "
                f"{'is' if failed == 1 else 'are'} queued again, each with a new attempt "
                "budget.")
    rollout = info.get("waves") or {}
    wave, count = rollout.get("wave") or 0, rollout.get("waves") or 0
    later = ""
    if waves and isinstance(wave, int) and wave < len(waves):
        later = f" Then wave {wave + 1} of {count} starts: {_n(sum(waves[wave].values()), 'job')}."
    elif isinstance(wave, int) and wave >= count:
        later = " It was the last wave."
    if rollout.get("state") == "gated":
        return f"Continue task {tid}: pass the gate after wave {wave} of {count}.{later}"
    why = f" ({rollout['why']})" if rollout.get("why") else ""
    return (f"Continue task {tid}: the rollout stopped at wave {wave} of {count}{why} goes on; "
            f"the wave's held jobs run.{later}")


def _confirm(verb: str) -> Any:
    def page(request: Request, task_id: TaskId,
             seen: Viewer = MAY[verb]) -> Response:
        stores = stores_of(request)
        info = tasks.show(stores, task_id, tenant=seen.customer)
        waves = None if seen.customer else tasks.waves(stores, task_id)
        return render(request, seen, "task_confirm.html", task=info, verb=verb,
                      label=LABELS[verb], phrase=PHRASES[verb], sentence=what_happens(verb, info, waves),
                      sensible=_sensible(verb, info))

    page.__name__ = f"confirm_{verb.replace('-', '_')}"
    return page


def _act(verb: str) -> Any:
    async def act(request: Request, task_id: TaskId,
                  seen: Viewer = MAY[verb]) -> Response:
        await form(request, seen)
        try:
            await run_in_threadpool(tasks.control, stores_of(request), seen.principal, task_id,
                                    verb)
        except ValidationError as exc:  # the task's state refused it: nothing changed
            return error_page(request, 409, str(exc), exc.hint)
        return RedirectResponse(f"{PREFIX}/tasks/{task_id}", status_code=303,
                                headers=page_headers())

    act.__name__ = f"{verb.replace('-', '_')}_task"
    return act


for _verb in LABELS:
    router.add_api_route(f"/tasks/{{task_id}}/{_verb}", _confirm(_verb), methods=["GET"],
                         include_in_schema=False)
    router.add_api_route(f"/tasks/{{task_id}}/{_verb}", _act(_verb), methods=["POST"],
                         include_in_schema=False)
