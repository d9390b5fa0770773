"""``fleetsched report``: the jobs of the SQL record, filtered, as a table, JSON, CSV or HTML.

Thin: parse the filters into a ``scheduler.reports.ReportFilter``, call the
``scheduler.verbs.reports.report`` verb, render. ``--html PATH`` writes one self-contained file (atomically: a temporary file renamed
into place, so a failed run leaves nothing half-written).
"""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs
from scheduler.cli.waiting import note_record_behind

EPILOG = """Examples:

  fleetsched report --since 24h

  fleetsched report --task 42 --state failed

  fleetsched report --group customer-acme --since 2026-11-01 --until 2026-12-01 --html acme-november.html

  fleetsched report --action firmware --operator alice --output csv > firmware.csv

--since and --until take an ISO 8601 time (local zone unless it has an offset) or a duration meaning that long ago (90m, 24h, 7d).
"""


def _when(text: str | None, what: str) -> datetime | None:
    from scheduler.parse import parse_ago

    return None if text is None else parse_ago(text, what)


def _write_atomically(path: Path, text: str) -> None:
    from scheduler.errors import ValidationError

    target = path.expanduser()
    if target.is_dir():
        raise ValidationError(f"--html {path} is a directory", hint="name a file, e.g. report.html")
    directory = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise ValidationError(f"--html {path}: cannot write in {directory} ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def report(
    ctx: typer.Context,
    since: Annotated[str | None, typer.Option(help="Jobs at or after this time (ISO 8601 or e.g. 24h ago).")] = None,
    until: Annotated[str | None, typer.Option(help="Jobs before this time (ISO 8601 or a duration ago).")] = None,
    task: Annotated[int | None, typer.Option(help="Only this task's jobs.", min=1, max=2**63 - 1)] = None,
    host: Annotated[str | None, typer.Option(help="Only jobs on this host.")] = None,
    group: Annotated[str | None, typer.Option("--group", "-g", help="Only jobs on hosts of this group (child groups included).")] = None,
    action: Annotated[str | None, typer.Option(help="Only tasks of this action (command, firmware ...).")] = None,
    state: Annotated[str | None, typer.Option(help="Only jobs in this state (succeeded, failed, lost, cancelled, pending, running ...).")] = None,
    operator: Annotated[str | None, typer.Option(help="Only tasks submitted by this operator.")] = None,
    html: Annotated[Path | None, typer.Option("--html", help="Write a self-contained HTML report (charts, tables) to this file.")] = None,
    all_jobs: Annotated[bool, typer.Option("--all-jobs", help="Table output: list every job, not only the failures.")] = False,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="table, json or csv (csv: one row per job)")] = output.OutputFormat.table,
) -> None:
    """Audit report of jobs: who ran what, where, when, with what outcome."""
    from scheduler.reports import ReportFilter, render_html
    from scheduler.reports.text import write_csv, write_json, write_table

    filters = ReportFilter(since=_when(since, "--since"), until=_when(until, "--until"),
                           task=task, host=host, group=group, action=action, state=state,
                           operator=operator)
    reports, stores, _principal = verbs(ctx, "reports")
    data = reports.report(stores, filters)
    note_record_behind(stores, data.unfinished)
    if html is not None:
        _write_atomically(html, render_html(data))
        output.info(f"wrote {html}: {data.totals.get('jobs', 0)} job(s) in {len(data.tasks)} task(s)")
        return
    if fmt is output.OutputFormat.json:
        write_json(sys.stdout, data)
    elif fmt is output.OutputFormat.csv:
        write_csv(sys.stdout, data)
    else:
        write_table(sys.stdout, data, all_jobs=all_jobs)
