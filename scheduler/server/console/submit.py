"""``/ui/submit``: submitting a task from the browser, in three steps.

1. ``GET /ui/submit``: two forms, the common options (the keys of a task request the API's
   ``POST /tasks`` takes, ``scheduler.submission.request.KEYS``) and a saved task file's text
   (``fleetsched submit --file``'s YAML, read by ``submission.taskfile.parse_task_text``);
   the Parameters, one ``name=value`` a line, are parsed by the CLI's ``-p`` parser
   (``submission.request.pairs``).
2. ``POST /ui/submit/plan``: the verb ``submit`` as a dry run, its plan shown as
   ``submit --dry-run`` shows it (``plan_view.view_of``: hosts, waves, windows, when each job
   may run; the first ``SHOWN_JOBS`` jobs of a big plan), and a confirmation form carrying
   the same request in hidden fields, the random wave draw it showed (``wave_seed``), and an
   idempotency key made for this plan.
3. ``POST /ui/submit``: the verb ``submit`` with that key (``request_key``), so a double click
   or a form posted again gives the first task back, never a second; then to the task's page.

Bad input (an unknown action, a bad parameter, target or task file) shows the form again with
the verb's one line and the input kept (400); nothing is written.
"""

from __future__ import annotations

import secrets
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from scheduler.errors import NotFoundError, ValidationError
from scheduler.server.auth import stores_of
from scheduler.server.console.web import PREFIX, Viewer, form, page_viewer, render
from scheduler.verbs import submit as submit_verb

if TYPE_CHECKING:
    from scheduler.submission.submit import TaskRequest

__all__ = ["router"]

router = APIRouter()

VERB = "tasks.submit"
SHOWN_JOBS = 50  # jobs of a plan listed on its page; the counts cover every one
# The form's fields: task request keys (``request.KEYS``) as the API's POST /tasks names them.
TEXT_KEYS = ("action", "target", "name", "max_concurrency", "max_failures", "waves",
             "wave_gate", "at", "in", "priority")
FLAG_KEYS = ("in_window", "ignore_windows")
FIELDS = (*TEXT_KEYS, *FLAG_KEYS, "params", "task_file", "wave_seed")
PRIORITIES = ("normal", "urgent", "bulk")


def _actions() -> list[str]:
    from tasks.registry import list_actions

    return [a.name for a in list_actions()]


def _kept(fields: dict[str, str]) -> dict[str, str]:
    """The fields a form carries on (the user's input, shown again or in hidden fields)."""
    return {k: fields[k] for k in FIELDS if fields.get(k)}


def request_of(fields: dict[str, str]) -> TaskRequest:
    """The task request a posted form asks for (``ValidationError`` naming the field)."""
    from scheduler.server.tasks import request_of_body
    from scheduler.submission.request import pairs

    if fields.get("task_file", "").strip():
        from scheduler.submission.taskfile import parse_task_text

        request = parse_task_text(fields["task_file"], "task file")
    else:
        body: dict[str, Any] = {k: fields[k].strip() for k in TEXT_KEYS if fields.get(k, "")
                                .strip()}
        body |= {k: True for k in FLAG_KEYS if fields.get(k)}
        lines = [line for line in fields.get("params", "").splitlines() if line.strip()]
        body["params"] = pairs(lines, "parameter")
        request = request_of_body(body)
    seed = fields.get("wave_seed", "").strip()
    if seed and request.waves is not None and request.waves.seed is None:
        # The random draw the plan page showed: the confirmation rolls out exactly it.
        from scheduler.submission.waves import MAX_SEED

        if not (seed.isascii() and seed.isdigit()) or int(seed) > MAX_SEED:
            raise ValidationError(f"wave_seed {seed!r} must be a number from 0 to {MAX_SEED}")
        request = replace(request, waves=replace(request.waves, seed=int(seed)))
    return request


def _form_page(request: Request, seen: Viewer, fields: dict[str, str],
               error: str | None = None, hint: str | None = None,
               status: int = 200) -> Response:
    return render(request, seen, "submit.html", status=status, values=_kept(fields),
                  actions=_actions(), priorities=PRIORITIES, error=error, hint=hint)


@router.get("/submit", include_in_schema=False)
def submit_form(request: Request, seen: Annotated[Viewer, Depends(page_viewer(VERB))],
                action: str | None = None, target: str | None = None) -> Response:
    return _form_page(request, seen, {"action": action or "", "target": target or ""})


@router.post("/submit/plan", include_in_schema=False)
async def submit_plan(request: Request,
                      seen: Annotated[Viewer, Depends(page_viewer(VERB))]) -> Response:
    from scheduler.submission.plan_view import view_of

    fields = await form(request, seen)
    try:
        done = submit_verb.submit(stores_of(request), seen.principal, request_of(fields),
                                  dry_run=True)
    except (ValidationError, NotFoundError) as exc:
        return _refused(request, seen, fields, exc)
    assert done.plan is not None
    view = view_of(done.plan, draw=True)
    carried = _kept(fields)
    if view.drawn is not None:
        carried["wave_seed"] = str(view.drawn)
    waves: dict[int, int] = {}
    for row in view.rows:
        if "wave" in row:
            waves[row["wave"]] = waves.get(row["wave"], 0) + 1
    return render(request, seen, "submit_plan.html", view=view, head=view.head,
                  rows=view.rows[:SHOWN_JOBS], total=len(view.rows), waves=waves,
                  carried=carried, idempotency_key=secrets.token_urlsafe(24))


@router.post("/submit", include_in_schema=False)
async def submit_confirmed(request: Request,
                           seen: Annotated[Viewer, Depends(page_viewer(VERB))]) -> Response:
    fields = await form(request, seen)
    key = fields.get("idempotency_key", "")
    try:
        if not key:
            raise ValidationError("this confirmation has no idempotency key",
                                  hint="submit the form again to see the plan")
        done = submit_verb.submit(stores_of(request), seen.principal, request_of(fields),
                                  request_key=key)
    except (ValidationError, NotFoundError) as exc:
        return _refused(request, seen, fields, exc)
    return RedirectResponse(f"{PREFIX}/tasks/{done.task_id}", status_code=303)


def _refused(request: Request, seen: Viewer, fields: dict[str, str],
             exc: ValidationError | NotFoundError) -> Response:
    """The form again, with the verb's one line (and its hint) and the input kept."""
    line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return _form_page(request, seen, fields, error=line, hint=getattr(exc, "hint", None),
                      status=400)
