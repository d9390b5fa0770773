"""``/ui/``: Fleet now, the operator's first page. The health checks (``fleetsched status``),
the workers alive with their busy slots, the queue's depth by class, overdue jobs and the
oldest one's lateness, the recorder's lag, and the running tasks with their progress: one
frame of ``fleetsched top`` (``verbs.status.snapshot``), redrawn live over Server-Sent Events
(``/ui/fleet/live``) without a reload.

A customer has no fleet (the queue's frame names every customer's tasks): its first page is
its own view (``scheduler.server.console.customer``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from scheduler.server.auth import stores_of
from scheduler.server.console import stream
from scheduler.server.console.web import PREFIX, Viewer, page_viewer, render, templates, viewer
from scheduler.verbs import status

__all__ = ["router"]

router = APIRouter()

HEALTH_EVERY_S = 10.0  # the health checks cost more than a frame: redrawn this often


@router.get("/", include_in_schema=False)
def fleet_page(request: Request, seen: Annotated[Viewer, Depends(viewer)]) -> Response:
    if not seen.may("top"):
        return RedirectResponse(f"{PREFIX}/customer", status_code=303)
    # The health checks take longer than a frame: the stream's first event brings them.
    return render(request, seen, "fleet.html", findings=None, **_frame(request, health=False))


def _frame(request: Request, *, health: bool) -> dict[str, Any]:
    stores = stores_of(request)
    snapshot = status.snapshot(stores)
    running = [t for t in snapshot.tasks if not t.finished]
    context: dict[str, Any] = {"snap": snapshot, "running": running}
    if health:
        context["findings"] = [f.as_dict() for f in status.status(stores)]
    return context


@router.get("/fleet/live", include_in_schema=False)
def fleet_live(request: Request,
               seen: Annotated[Viewer, Depends(page_viewer("top"))]) -> Response:
    last_health = [-HEALTH_EVERY_S]

    def read() -> stream.Frame:
        import time

        health = time.monotonic() - last_health[0] >= HEALTH_EVERY_S
        if health:
            last_health[0] = time.monotonic()
        context = _frame(request, health=health)
        parts = {"queue": templates.get_template("fleet_queue.html").render(
            viewer=seen, prefix=PREFIX, **context)}
        if health:
            parts["health"] = templates.get_template("fleet_health.html").render(
                viewer=seen, prefix=PREFIX, **context)
        return parts, False

    return stream.fragments(request, read)
