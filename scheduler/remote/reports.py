"""``report`` over the API (``scheduler.verbs.reports``): ``GET /report``'s JSON, every page of
its job rows, rebuilt into the ``Report`` the local verb returns (times parsed back), so the
table, JSON and CSV are written by the same code."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from scheduler.remote.client import Client

if TYPE_CHECKING:
    from scheduler.reports import Report, ReportFilter

__all__ = ["report"]

PAGE = 1000  # job rows per request (the API's most)
JOB_TIMES = ("time", "started", "finished")  # the report's times (reports.query)
TASK_TIMES = ("first", "last")


def _revive(row: dict[str, Any], times: tuple[str, ...]) -> dict[str, Any]:
    return {k: (datetime.fromisoformat(v) if k in times and isinstance(v, str) else v)
            for k, v in row.items()}


def report(stores: Client, filters: ReportFilter) -> Report:
    from scheduler.reports import Report, ReportFilter

    query = {k: (v.isoformat() if isinstance(v, datetime) else v)
             for k, v in filters.as_dict().items()}
    offset: int | None = 0
    jobs: list[dict[str, Any]] = []
    whole: dict[str, Any] = {}
    while offset is not None:
        whole = stores.get("/report", format="json", limit=PAGE, offset=offset, **query)
        jobs += whole["jobs"]
        offset = whole.get("next_offset")
    failed_states = ("failed", "lost")
    rows = [_revive(j, JOB_TIMES) for j in jobs]
    shown = ReportFilter(**{k: (datetime.fromisoformat(v) if k in ("since", "until") else v)
                            for k, v in whole.get("filters", {}).items()})
    return Report(filters=shown, generated_at=datetime.fromisoformat(whole["generated_at"]),
                  jobs=rows, tasks=[_revive(t, TASK_TIMES) for t in whole["tasks"]], totals=whole["totals"],
                  failed_attempts={f for f in whole["failures"]
                                   if not any(j["job"] == f and j["state"] in failed_states
                                              for j in jobs)})
