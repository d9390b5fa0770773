"""``/api/v1/report``: the audit report of jobs, as JSON (``report -o json``) or, asked with
``Accept: text/csv`` or ``?format=csv``, as CSV (``report -o csv``: one row per job).

The JSON's per-job rows (``jobs``) are paged with ``limit`` and ``offset`` (``jobs_total``,
``next_offset``); its totals and per-task summaries are always the whole report's. The page is
cut from the report the verb builds (its totals need every row), so it bounds the answer, not
the query; the CSV is the whole report, a download.

The filters are ``report``'s options; ``since`` and ``until`` take an ISO 8601 time or a
duration meaning that long ago (``scheduler.parse.parse_ago``), read as the CLI reads them.
"""

from __future__ import annotations

import io
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, Response

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.server.paging import Limit, Offset
from scheduler.verbs import reports

__all__ = ["router"]

router = APIRouter(tags=["report"])

Since = Annotated[str | None, Query(description="Jobs at or after this time (ISO 8601, or a "
                                                "duration ago: 24h, 7d).")]
Until = Annotated[str | None, Query(description="Jobs before this time (ISO 8601 or a "
                                                "duration ago).")]


def _wants_csv(request: Request, fmt: str | None) -> bool:
    if fmt is not None:
        return fmt == "csv"
    accept = request.headers.get("accept", "")
    return any(part.split(";")[0].strip() == "text/csv" for part in accept.split(","))


@router.get("/report", summary="Audit report of jobs: who ran what, where, when, with what "
                               "outcome (JSON, or CSV with Accept: text/csv or format=csv)",
            responses={200: {"content": {"application/json": {}, "text/csv": {}}}})
def get_report(request: Request, who: Annotated[Principal, Depends(allowed("report"))],
               since: Since = None, until: Until = None,
               task: Annotated[int | None, Query(ge=1, le=2**63 - 1)] = None,
               host: str | None = None, group: str | None = None, action: str | None = None,
               state: str | None = None, operator: str | None = None,
               fmt: Annotated[Literal["json", "csv"] | None,
                              Query(alias="format", description="json or csv (else: by the "
                                                                "Accept header)")] = None,
               limit: Limit = 1000, offset: Offset = 0) -> Response:
    from scheduler.parse import parse_ago
    from scheduler.reports import ReportFilter
    from scheduler.reports.text import report_json, write_csv

    filters = ReportFilter(since=None if since is None else parse_ago(since, "since"),
                           until=None if until is None else parse_ago(until, "until"),
                           task=task, host=host, group=group, action=action, state=state,
                           operator=operator)
    data = reports.report(stores_of(request), filters)
    if _wants_csv(request, fmt):
        out = io.StringIO()
        write_csv(out, data)
        return Response(out.getvalue(), media_type="text/csv; charset=utf-8")
    whole = report_json(data)  # plain already: no second encoding pass
    rows = whole["jobs"]
    following = offset + limit if offset + limit < len(rows) else None
    return JSONResponse({**whole, "jobs": rows[offset:offset + limit], "jobs_total": len(rows),
                         "limit": limit, "offset": offset, "next_offset": following})
