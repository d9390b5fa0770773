"""``fleetsched top``: a live dashboard of the whole queue (``--once``: one frame and exit).

Thin: ``scheduler.verbs.status.frames`` reads the queue's frames from Redis (in remote mode
``scheduler.remote.status.frames``, from the server), ``scheduler.views.live.top`` redraws
``scheduler.views.top_frame`` until Ctrl-C (exit code 0). ``--once`` prints one frame
(``snapshot``) on stdout, as a table or JSON.

A shard that does not answer (its master failing over) is a line of the frame, not an error
(``scheduler.views.snapshot``): so on a cluster the connection skips the eviction check of
every master (``status`` and ``doctor`` make it), and the shard count is checked only while
shard 0 answers.
"""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs

EPILOG = """Examples:

  fleetsched top

  fleetsched top --interval 5

  fleetsched top --once --output json | jq '.due_now'

Columns: due (score <= now), overdue (late by more than overload_threshold_ms), running, parked (over a task's concurrency limit), later/windows (waiting for a later time: service windows, --at, retry backoff), held (paused tasks), dead (failed for good).
"""


def top(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Print one frame and exit (for scripts and tests).")] = False,
    interval: Annotated[float, typer.Option(help="Seconds between frames.", min=0.2, max=3600)] = 1.0,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="with --once: table or json")] = output.OutputFormat.table,
) -> None:
    """Live view of the queue: due, overdue, running, parked, deferred, tasks, workers."""
    from scheduler.errors import ValidationError
    from scheduler.views import top_frame
    from scheduler.views.live import top as run_top

    if fmt is output.OutputFormat.csv:
        raise ValidationError("top has no csv form", hint="use --output table or json")
    if fmt is output.OutputFormat.json and not once:
        raise ValidationError("--output json needs --once", hint="fleetsched top --once --output json")
    status, stores, _principal = verbs(ctx, "status")
    if once:
        snap = status.snapshot(stores)
        if fmt is output.OutputFormat.json:
            output.emit_object(snap.as_dict(), fmt)
        else:
            output.stdout.print(top_frame(snap))
        return
    with status.frames(stores) as take:
        try:
            run_top(take, output.stdout, interval_s=interval)
        except KeyboardInterrupt:
            return
