"""``/ui/calendar``: the service windows and freezes per host group over the coming weeks, as a
timeline, then the schedules with their next occurrences and their last tasks' outcomes.

1. The openings and their approval states are ``verbs.windows.timeline``'s (the calendar core
   and the approvals decide them, ``scheduler.windows.timeline``); this page only places them:
   one row per assignment target and per window on it, each opening an SVG rectangle
   positioned by time (attributes only: the content security policy allows no inline style),
   its state a class and words (a ``<title>``, the legend, and a table of the same openings
   for screen readers), so colour is never the only signal.
2. A customer's timeline holds its own windows, freezes and decisions (``tenant=``); it sees no
   schedules (``schedules.*`` are not in its role).
3. ``weeks`` (1 to 8, default 4) and ``group`` (one group's row) are query parameters.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from scheduler.server.auth import stores_of
from scheduler.server.console.web import Viewer, page_viewer, render
from scheduler.verbs import schedules
from scheduler.verbs import windows as window_verbs

__all__ = ["router"]

router = APIRouter()

WIDTH = 1000  # the timeline's SVG user units
MAX_SCHEDULES = 50  # schedules shown; the CLI lists them all
SCHEDULE_TASKS = 3  # each schedule's latest tasks shown


@router.get("/calendar", include_in_schema=False)
def calendar_page(request: Request,
                  seen: Annotated[Viewer, Depends(page_viewer("windows.list"))],
                  weeks: Annotated[int, Query(ge=1, le=8)] = 4,
                  group: Annotated[str | None, Query(max_length=255)] = None) -> Response:
    stores = stores_of(request)
    start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    end = start + timedelta(weeks=weeks)
    group = (group or "").strip() or None
    lanes = window_verbs.timeline(stores, start, end, tenant=seen.customer, group=group)
    for lane in lanes:
        for w in lane["windows"]:
            w["placed"] = [_place(o, start, end) for o in w["openings"]]
    return render(request, seen, "calendar.html", lanes=lanes, weeks=weeks, group=group,
                  start=start, end=end, width=WIDTH, ticks=_ticks(start, weeks),
                  schedules=_schedules(request, seen))


def _x(at: datetime, start: datetime, end: datetime) -> float:
    return round(WIDTH * (at - start) / (end - start), 2)


def _place(opening: dict[str, Any], start: datetime, end: datetime) -> dict[str, Any]:
    """An opening with its rectangle's ``x`` and ``w`` in the period (at least 2 units wide,
    so a short opening stays visible)."""
    left = _x(max(opening["start_utc"], start), start, end)
    right = _x(min(opening["end_utc"], end), start, end)
    return {**opening, "x": left, "w": max(round(right - left, 2), 2.0)}


def _ticks(start: datetime, weeks: int) -> list[tuple[float, str, bool]]:
    """Each day's line in the timeline: (x, label, whether a week starts there)."""
    end = start + timedelta(weeks=weeks)
    return [(_x(start + timedelta(days=d), start, end),
             (start + timedelta(days=d)).strftime("%a %d %b"), d % 7 == 0)
            for d in range(weeks * 7)]


def _schedules(request: Request, seen: Viewer) -> list[dict[str, Any]] | None:
    """The schedules with their next 3 occurrences and latest tasks (None: not the viewer's
    to see)."""
    if seen.customer is not None or not (seen.may("schedules.list")
                                         and seen.may("schedules.next")
                                         and seen.may("schedules.show")):
        return None
    stores = stores_of(request)
    out = []
    for row in schedules.list_(stores)[:MAX_SCHEDULES]:
        shown = schedules.show(stores, row["name"])
        out.append({**row, "upcoming": [] if row["paused"] else
                    schedules.next_(stores, row["name"], 3),
                    "tasks": shown["tasks"][:SCHEDULE_TASKS]})
    return out
