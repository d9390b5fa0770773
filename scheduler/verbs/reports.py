"""``report``: the jobs of the SQL record, filtered (``scheduler.reports.build_report``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    from scheduler.reports import Report, ReportFilter

__all__ = ["report"]


def report(stores: Stores, filters: ReportFilter) -> Report:
    """The audit report of the jobs ``filters`` select."""
    from scheduler.reports import build_report

    with stores.database() as engine:
        return build_report(engine, filters)
