"""``fleetsched tasks watch ID...`` and ``fleetsched hosts history NAME``: live progress and
the recorded trail.

Thin: ``scheduler.views.live.watch`` draws the bars on stderr (progress), failures are printed
as the recorder writes them; when every task has ended a summary goes to stdout. Exit codes:
0 every job succeeded, 3 some failed or were lost, 5 cancelled (nothing failed), 4 unknown task.
``hosts history`` prints ``scheduler.reports.event_trail`` for one host.
"""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli import output

WATCH_EPILOG = """Examples:

  fleetsched tasks watch 42

  fleetsched tasks watch 42 43 --output json

  id=$(fleetsched submit command -t group:web -p cmd=uptime --yes) && fleetsched tasks watch "$id"

Exit codes: 0 every job succeeded, 3 some jobs failed or were lost, 4 no such task, 5 cancelled.
"""

HISTORY_EPILOG = """Examples:

  fleetsched hosts history web-07

  fleetsched hosts history web-07 --limit 50 --output csv
"""

SUMMARY_COLUMNS = ["task", "state", "total", "succeeded", "failed", "lost", "cancelled"]


def watch(
    ctx: typer.Context,
    task_ids: Annotated[list[int], typer.Argument(help="The task id(s) to watch.", min=1)],
    interval: Annotated[float, typer.Option(help="Seconds between redraws.", min=0.1, max=60)] = 0.5,
    timeout: Annotated[str | None, typer.Option(help="Give up after this long (e.g. 30m); exit code 1.")] = None,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="summary as table, json or csv")] = output.OutputFormat.table,
) -> None:
    """Progress bars per task, throughput, ETA and failures as they happen, until the tasks end."""
    from scheduler.cli.app import state  # here: app.py imports this module
    from scheduler.errors import FleetschedError
    from scheduler.keys import Keys
    from scheduler.policy import parse_duration
    from scheduler.redis_conn import connect
    from scheduler.views.live import FailureFeed, watch as run_watch

    limit_s = parse_duration(timeout, "--timeout").total_seconds() if timeout else None
    ids = [str(t) for t in dict.fromkeys(task_ids)]
    settings = state(ctx).settings
    client = connect(settings)
    engine = feed = None
    try:
        try:
            from scheduler.inventory import open_database

            engine = open_database(settings)
            feed = FailureFeed(engine, ids)
        except FleetschedError as exc:
            output.info(f"warning: failures will not be listed ({exc})")
        try:
            tasks, _failures = run_watch(client, Keys(settings.queue_prefix), ids, output.stderr,
                                         feed=feed, interval_s=interval, timeout_s=limit_s)
        except TimeoutError as exc:
            raise FleetschedError(str(exc), hint="watch again, or see fleetsched top") from None
    finally:
        client.close()
        if engine is not None:
            engine.dispose()
    rows = [{"task": t.task_id, "state": t.state if not t.finished else
             ("succeeded" if t.all_succeeded else "finished"), "total": t.total,
             "succeeded": t.succeeded, "failed": t.failed, "lost": t.lost,
             "cancelled": t.cancelled} for t in tasks]
    output.emit_rows(rows, SUMMARY_COLUMNS, fmt)
    if any(t.failed or t.lost for t in tasks):
        raise typer.Exit(3)
    if any(t.cancelled or t.state in ("cancelled", "aborted") for t in tasks):
        raise typer.Exit(5)


def history(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The host's name.")],
    limit: Annotated[int, typer.Option(help="At most this many events (the newest).", min=1, max=1_000_000)] = 1000,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="table, json or csv")] = output.OutputFormat.table,
) -> None:
    """Every recorded event of one host, oldest first: jobs claimed, finished, failed, deferred."""
    from scheduler.cli.app import state  # here: app.py imports this module
    from scheduler.inventory import open_database
    from scheduler.reports import TRAIL_COLUMNS, event_trail

    engine = open_database(state(ctx).settings)
    try:
        rows = event_trail(engine, host=name, limit=limit)
    finally:
        engine.dispose()
    columns = [c for c in TRAIL_COLUMNS if c != "host"]
    if fmt is output.OutputFormat.table:
        from scheduler.reports.trail import for_table

        shown, columns = for_table(rows, columns)
        output.emit_rows(shown, columns, fmt)
        output.info(f"{len(rows)} event(s) for {name}")
        return
    output.emit_rows(rows, columns, fmt)
