"""``/ui/audit``: the audit report (the verb ``report``) with its filters as a form, and its
downloads.

1. ``GET /ui/audit``: ``fleetsched report``'s filters (since, until, task, host, group,
   action, state, operator; since and until as the CLI reads them, ``parse_ago``) as query
   parameters; the totals, the per-task summaries (the first ``TASKS_SHOWN``) and the jobs,
   ``PAGE`` a page. As the API's ``GET /report``, a page is cut from the report the verb
   builds (its totals need every row): it bounds the page, not the query.
2. ``GET /ui/audit.csv`` and ``GET /ui/audit.json``: the whole report for the same filters as a
   download, written by the writers of ``report -o csv`` and ``report -o json``
   (``reports.text.write_csv``, ``write_json``).

Viewers, operators and admins read it; a customer's role has no ``report`` (403).
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response

from scheduler.errors import ValidationError
from scheduler.server.auth import stores_of
from scheduler.server.console.web import Viewer, page_headers, page_viewer, render
from scheduler.verbs import reports

if TYPE_CHECKING:
    from scheduler.reports import ReportFilter

__all__ = ["router"]

router = APIRouter()

VERB = "report"
PAGE = 100  # jobs a page
TASKS_SHOWN = 200  # per-task summaries on the page (the downloads hold every one)
FILTERS = ("since", "until", "task", "host", "group", "action", "state", "operator")


def _given(request: Request) -> dict[str, str]:
    """The filters asked for, as typed (blank ones left out)."""
    return {k: request.query_params.get(k, "").strip() for k in FILTERS
            if request.query_params.get(k, "").strip()}


def filters_of(given: dict[str, str]) -> ReportFilter:
    """``report``'s filter from the query (``ValidationError`` naming the bad one)."""
    from scheduler.parse import parse_ago
    from scheduler.reports import ReportFilter

    task = given.get("task")
    if task is not None and not (task.isascii() and task.isdigit() and 1 <= int(task) < 2**63):
        raise ValidationError(f"task {task[:40]!r} is not a task id", hint="e.g. 42")
    return ReportFilter(since=parse_ago(given["since"], "since") if "since" in given else None,
                        until=parse_ago(given["until"], "until") if "until" in given else None,
                        task=int(task) if task else None, host=given.get("host"),
                        group=given.get("group"), action=given.get("action"),
                        state=given.get("state"), operator=given.get("operator"))


@router.get("/audit", include_in_schema=False)
def audit_page(request: Request, seen: Annotated[Viewer, Depends(page_viewer(VERB))],
               offset: Annotated[int, Query(ge=0)] = 0) -> Response:
    from scheduler.record.models import JOB_STATES
    from scheduler.reports import JOB_COLUMNS
    from scheduler.reports.text import summary_rows

    given = _given(request)
    query = urlencode(given)
    context: dict[str, object] = {"given": given, "query": query, "states": JOB_STATES,
                                  "offset": offset, "limit": PAGE, "error": None}
    try:
        data = reports.report(stores_of(request), filters_of(given))
    except ValidationError as exc:
        return render(request, seen, "audit.html", status=400, data=None,
                      **{**context, "error": str(exc).splitlines()[0]})
    tasks = summary_rows(data)
    return render(request, seen, "audit.html", data=data, tasks=tasks[:TASKS_SHOWN],
                  tasks_total=len(tasks), jobs=data.jobs[offset:offset + PAGE],
                  more=offset + PAGE < len(data.jobs), columns=JOB_COLUMNS,
                  args=f"&{query}" if query else "", **context)


def _download(request: Request, fmt: str) -> Response:
    from scheduler.reports.text import write_csv, write_json

    data = reports.report(stores_of(request), filters_of(_given(request)))
    out = io.StringIO()
    (write_csv if fmt == "csv" else write_json)(out, data)
    media = "text/csv" if fmt == "csv" else "application/json"
    return Response(out.getvalue(), media_type=f"{media}; charset=utf-8", headers={
        **page_headers(),
        "content-disposition": f'attachment; filename="fleetsched-report.{fmt}"'})


@router.get("/audit.csv", include_in_schema=False)
def audit_csv(request: Request,
              seen: Annotated[Viewer, Depends(page_viewer(VERB))]) -> Response:
    return _download(request, "csv")


@router.get("/audit.json", include_in_schema=False)
def audit_json(request: Request,
               seen: Annotated[Viewer, Depends(page_viewer(VERB))]) -> Response:
    return _download(request, "json")
