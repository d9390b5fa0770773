"""Audit reports over the SQL record: which jobs ran where, when, with what outcome.

- ``ReportFilter`` and ``build_report(engine, filters) -> Report`` (``scheduler.reports.query``):
  one SQL query over jobs joined with their tasks, filtered by time, task, host, group, action,
  state and operator, plus the summary figures;
- ``render_text`` / ``report_json`` / ``write_csv`` (``scheduler.reports.text``): table, JSON
  and CSV forms;
- ``render_html(report) -> str`` (``scheduler.reports.html``): one self-contained HTML file
  with inline SVG charts (jobs over time by outcome, duration distribution, failures by host),
  no scripts and no external assets; every host-provided string is escaped;
- ``event_trail(engine, task=|host=|job=)`` (``scheduler.reports.trail``): the full event
  trail behind ``tasks show --events``, ``tasks watch`` and ``hosts history``.
"""

from scheduler.reports.html import render_html
from scheduler.reports.query import JOB_COLUMNS, Report, ReportFilter, build_report
from scheduler.reports.text import report_json, summary_rows, write_csv, write_table
from scheduler.reports.trail import TRAIL_COLUMNS, event_trail

__all__ = ["JOB_COLUMNS", "TRAIL_COLUMNS", "event_trail", "Report", "ReportFilter", "build_report", "render_html", "report_json",
           "summary_rows", "write_csv", "write_table"]
