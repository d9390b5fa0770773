"""``fleetsched tasks list|show|cancel|pause|resume|retry-failed|reprioritize``.

Thin: read the record through ``scheduler.submission.taskinfo`` (live counters from Redis when it answers)
and change a task through ``scheduler.submission.control``, which records each change with the operator's
name (``--as``) in SQL before the command returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from scheduler.cli import output
from scheduler.cli.context import state
from scheduler.cli.output import OutputOption

tasks_app = typer.Typer(help="Submitted tasks: list, show, and control them.",
                        no_args_is_help=True)

TaskId = Annotated[int, typer.Argument(help="The task id (see `fleetsched tasks list`).")]


@contextmanager
def _context(ctx: typer.Context, *, redis: bool = True) -> Iterator[tuple[Any, Any, str]]:
    """(engine, queue or None, operator); closed afterwards."""
    from scheduler.queue.client import Queue
    from scheduler.queue.keys import Keys
    from scheduler.record.session import open_database
    from scheduler.redisdb.connect import connect

    settings = state(ctx).settings
    engine = open_database(settings)
    client = queue = None
    try:
        if redis:
            client = connect(settings)
            queue = Queue(client, Keys(settings.queue_prefix), lease_ms=settings.lease_ms)
        yield engine, queue, settings.operator
    finally:
        if queue is not None:
            queue.close()
        if client is not None:
            client.close()
        engine.dispose()


@tasks_app.command("list", epilog="Examples:\n\n  fleetsched tasks list --state active\n\n"
                                  "  fleetsched tasks list --operator alice -o json")
def list_cmd(
    ctx: typer.Context,
    state_: Annotated[str | None, typer.Option("--state", help="Only tasks in this state.")] = None,
    operator: Annotated[str | None, typer.Option("--operator", help="Only tasks of this operator.")] = None,
    action: Annotated[str | None, typer.Option("--action", help="Only tasks of this action.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=100_000, help="At most this many, newest first.")] = 50,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """List tasks, newest first."""
    from scheduler.record.session import transaction
    from scheduler.submission.taskinfo import LIST_COLUMNS, list_tasks

    with _context(ctx, redis=False) as (engine, _, _op):
        with transaction(engine, commit=False) as session:
            rows = list_tasks(session, state=state_, operator=operator, action=action, limit=limit)
    output.emit_rows(rows, LIST_COLUMNS, fmt)


def _live(ctx: typer.Context, task_id: int) -> dict[str, str] | None:
    from scheduler.errors import FleetschedError

    try:
        with _context(ctx) as (_engine, queue, _op):
            return queue.task_state(str(task_id)) or None
    except FleetschedError as exc:
        output.info(f"warning: live counters unavailable ({exc})")
        return None


@tasks_app.command("show", epilog="Examples:\n\n  fleetsched tasks show 42\n\n"
                                  "  fleetsched tasks show 42 --events\n\n"
                                  "  fleetsched tasks show 42 -o json | jq .live.overshoot")
def show_cmd(ctx: typer.Context, task_id: TaskId, fmt: OutputOption = output.OutputFormat.table,
             events: Annotated[bool, typer.Option("--events", help="Also the full event trail: every job's claims, results, retries, deferrals.")] = False) -> None:
    """One task: request, policy, counters (live from Redis), failures and the control trail."""
    from scheduler.record.session import transaction
    from scheduler.submission.taskinfo import show_task

    live = _live(ctx, task_id)
    with _context(ctx, redis=False) as (engine, _, _op):
        with transaction(engine, commit=False) as session:
            info = show_task(session, task_id, live)
        if events:
            from scheduler.reports import event_trail

            info["events"] = event_trail(engine, task=task_id)
    if fmt is not output.OutputFormat.table:
        output.emit_object(info, fmt)
        return
    head = {k: info[k] for k in ("id", "name", "action", "target", "operator", "priority",
                                 "state", "executor", "created_at", "started_at", "finished_at")}
    head["params"] = info["params"]
    head["policy"] = ", ".join(f"{k}={v}" for k, v in info["policy"].items())
    head["jobs"] = ", ".join(f"{k}={v}" for k, v in info["jobs"].items())
    if info["live"]:
        head["live"] = ", ".join(f"{k}={v}" for k, v in info["live"].items())
    head["summary"] = info["summary"]
    output.emit_object(head, fmt)
    if info["failures"]:
        output.emit_rows(info["failures"], ["id", "host", "state", "attempts", "exit_code", "error"],
                         fmt, title="failures")
    output.emit_rows(info["trail"], ["ts", "kind", "operator", "count", "error"], fmt, title="trail")
    if events:
        from scheduler.reports import TRAIL_COLUMNS
        from scheduler.reports.trail import for_table

        rows, columns = for_table(info["events"], [c for c in TRAIL_COLUMNS if c != "task"])
        output.emit_rows(rows, columns, fmt, title="events")


def _control(ctx: typer.Context, task_id: int, verb: str, *extra: Any) -> None:
    from scheduler.submission import control
    fn = {"pause": control.pause, "resume": control.resume, "cancel": control.cancel,
          "retry-failed": control.retry_failed, "reprioritize": control.reprioritize}[verb]
    with _context(ctx) as (engine, queue, operator):
        result = fn(engine, queue, task_id, *extra, operator)
    what = {"pause": "paused (pending jobs held in order; running ones finish)",
            "resume": f"resumed: {result.count} held jobs released",
            "cancel": f"cancelled: {result.count} jobs that had not started; running ones finish",
            "retry-failed": f"{result.count} failed jobs queued again with a new attempt budget",
            "reprioritize": f"moved to {extra[0] if extra else '?'}: {result.count} pending jobs"}[verb]
    output.info(f"task {task_id} {what} (state {result.state}, by {operator})")


@tasks_app.command("pause", epilog="Example:\n\n  fleetsched --as alice tasks pause 42")
def pause_cmd(ctx: typer.Context, task_id: TaskId) -> None:
    """Hold the task's pending jobs, in order; running jobs finish."""
    _control(ctx, task_id, "pause")


@tasks_app.command("resume", epilog="Example:\n\n  fleetsched tasks resume 42")
def resume_cmd(ctx: typer.Context, task_id: TaskId) -> None:
    """Release a paused task's jobs in their order."""
    _control(ctx, task_id, "resume")


@tasks_app.command("cancel", epilog="Example:\n\n  fleetsched tasks cancel 42")
def cancel_cmd(ctx: typer.Context, task_id: TaskId) -> None:
    """Cancel the jobs that have not started; running ones finish."""
    _control(ctx, task_id, "cancel")


@tasks_app.command("retry-failed", epilog="Example:\n\n  fleetsched tasks retry-failed 42")
def retry_failed_cmd(ctx: typer.Context, task_id: TaskId) -> None:
    """Queue the task's failed jobs again, each with a new attempt budget."""
    _control(ctx, task_id, "retry-failed")


@tasks_app.command("reprioritize", epilog="Example:\n\n  fleetsched tasks reprioritize 42 urgent")
def reprioritize_cmd(
    ctx: typer.Context, task_id: TaskId,
    priority: Annotated[str, typer.Argument(help="urgent, normal or bulk")],
) -> None:
    """Move the task's pending jobs to another priority class."""
    _control(ctx, task_id, "reprioritize", priority)


WATCH_EPILOG = """Examples:

  fleetsched tasks watch 42

  fleetsched tasks watch 42 43 --output json

  id=$(fleetsched submit command -t group:web -p cmd=uptime --yes) && fleetsched tasks watch "$id"

Exit codes: 0 every job succeeded, 3 some jobs failed or were lost, 4 no such task, 5 cancelled.
"""

SUMMARY_COLUMNS = ["task", "state", "total", "succeeded", "failed", "lost", "cancelled"]


def _watched_state(t: Any) -> str:
    """The task's state for the watch summary: cancelled and aborted as Redis says them, a
    finished active task succeeded or failed by its jobs, otherwise its live state."""
    if t.state in ("cancelled", "aborted") or not t.finished:
        return t.state
    return "succeeded" if t.all_succeeded else "failed"


@tasks_app.command("watch", epilog=WATCH_EPILOG)
def watch(
    ctx: typer.Context,
    task_ids: Annotated[list[int], typer.Argument(help="The task id(s) to watch.", min=1)],
    interval: Annotated[float, typer.Option(help="Seconds between redraws.", min=0.1, max=60)] = 0.5,
    timeout: Annotated[str | None, typer.Option(help="Give up after this long (e.g. 30m); exit code 1.")] = None,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="summary as table, json or csv")] = output.OutputFormat.table,
) -> None:
    """Progress bars per task, throughput, ETA and failures as they happen, until the tasks end."""
    from scheduler.parse import parse_duration

    limit_s = parse_duration(timeout, "--timeout").total_seconds() if timeout else None
    ids = [str(t) for t in dict.fromkeys(task_ids)]
    tasks = follow(ctx, ids, interval_s=interval, timeout_s=limit_s, draw=True)
    rows = [{"task": t.task_id, "state": _watched_state(t), "total": t.total,
             "succeeded": t.succeeded, "failed": t.failed, "lost": t.lost,
             "cancelled": t.cancelled} for t in tasks]
    output.emit_rows(rows, SUMMARY_COLUMNS, fmt)
    raise typer.Exit(outcome_code(tasks))


def outcome_code(tasks: list[Any]) -> int:
    """The exit code of ``watch`` and ``wait`` (README "Exit codes"): 3 when jobs failed, 5 when
    a task was cancelled or aborted with nothing failed, 0 when every job succeeded."""
    if any(t.failed for t in tasks):
        return 3
    if any(t.cancelled or t.state in ("cancelled", "aborted") for t in tasks):
        return 5
    return 0


def follow(ctx: typer.Context, ids: list[str], *, interval_s: float, timeout_s: float | None,
           draw: bool) -> list[Any]:
    """Wait until every task has ended; ``draw``: progress bars and failures on stderr as they
    happen (``tasks watch``), else silent (``tasks wait``, ``submit --wait``)."""
    import io

    from rich.console import Console

    from scheduler.errors import FleetschedError
    from scheduler.queue.keys import Keys
    from scheduler.redisdb.connect import connect
    from scheduler.views.live import FailureFeed
    from scheduler.views.live import watch as run_watch

    settings = state(ctx).settings
    client = connect(settings)
    engine = feed = None
    console = output.stderr if draw else Console(file=io.StringIO(), markup=False)
    try:
        if draw:
            try:
                from scheduler.record.session import open_database

                engine = open_database(settings)
                feed = FailureFeed(engine, ids)
            except FleetschedError as exc:
                output.info(f"warning: failures will not be listed ({exc})")
        try:
            tasks, _failures = run_watch(client, Keys(settings.queue_prefix), ids, console,
                                         feed=feed, interval_s=interval_s, timeout_s=timeout_s)
        except TimeoutError as exc:
            raise FleetschedError(str(exc), hint="wait again, or see fleetsched top") from None
    finally:
        client.close()
        if engine is not None:
            engine.dispose()
    return tasks


def wait_and_report(ctx: typer.Context, ids: list[str], timeout_s: float | None) -> int:
    """Block until the tasks end, print one line per job that failed, return the exit code."""
    from scheduler.record.session import open_database
    from scheduler.reports.attempts import task_outputs

    tasks = follow(ctx, ids, interval_s=0.2, timeout_s=timeout_s, draw=False)
    engine = open_database(state(ctx).settings)
    try:
        for t in tasks:
            for row in task_outputs(engine, int(t.task_id), failed=True):
                rc = "-" if row["exit_code"] is None else row["exit_code"]
                last = row["lines"][-1] if row["lines"] else ""
                output.stderr.out(f"{row['host']} | {row['state']} | rc={rc} | job {row['job']}"
                                  + (f" | {last}" if last else ""))
    finally:
        engine.dispose()
    for t in tasks:
        output.info(f"task {t.task_id}: {_watched_state(t)}: {t.succeeded} succeeded, "
                    f"{t.failed} failed, {t.cancelled} cancelled of {t.total}")
    return outcome_code(tasks)


WAIT_EPILOG = """Examples:

  fleetsched tasks wait 42

  fleetsched tasks wait 42 --timeout 30m && echo "all hosts done"

Exit codes: 0 every job succeeded, 1 infrastructure trouble or the timeout, 3 some jobs failed,
4 no such task, 5 cancelled or aborted.
"""


@tasks_app.command("wait", epilog=WAIT_EPILOG)
def wait_cmd(
    ctx: typer.Context,
    task_ids: Annotated[list[int], typer.Argument(help="The task id(s) to wait for.", min=1)],
    timeout: Annotated[str | None, typer.Option(help="Give up after this long (e.g. 30m); exit code 1.")] = None,
) -> None:
    """Block until the tasks end (for scripts and CI pipelines): one line per job that failed on
    stderr, then the exit code says how it went."""
    from scheduler.parse import parse_duration

    limit_s = parse_duration(timeout, "--timeout").total_seconds() if timeout else None
    raise typer.Exit(wait_and_report(ctx, [str(t) for t in dict.fromkeys(task_ids)], limit_s))


OUTPUT_EPILOG = """Examples:

  fleetsched tasks output 42

  fleetsched tasks output 42 --failed

  fleetsched tasks output 42 --host web-07 --grep 'error|warn'

  fleetsched tasks output 42 --output json
"""


@tasks_app.command("output", epilog=OUTPUT_EPILOG)
def output_cmd(
    ctx: typer.Context,
    task_id: TaskId,
    host: Annotated[str | None, typer.Option("--host", help="Only this host's job.")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only the jobs that failed or were lost.")] = False,
    grep: Annotated[str | None, typer.Option("--grep", help="Only the lines matching this regular expression.")] = None,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Every host's output of its job's last attempt, each line prefixed by the host (like
    ``ansible -o`` or ``pssh -i``); stderr lines are marked ``[stderr]``."""
    import re

    from scheduler.errors import ValidationError
    from scheduler.reports.attempts import task_outputs

    if grep is not None:
        try:
            re.compile(grep)
        except re.error as exc:
            raise ValidationError(f"--grep {grep!r} is not a regular expression: {exc}") from None
    with _context(ctx, redis=False) as (engine, _, _op):
        rows = task_outputs(engine, task_id, host=host, failed=failed, grep=grep)
    if fmt is not output.OutputFormat.table:
        output.emit_rows(rows, ["host", "job", "state", "attempt", "exit_code", "lines"], fmt)
        return
    for row in rows:
        rc = "-" if row["exit_code"] is None else row["exit_code"]
        output.stdout.out(f"{row['host']} | {row['state']} | rc={rc} | job {row['job']} "
                          f"attempt {row['attempt']}")
        for line in row["lines"]:
            output.stdout.out(f"{row['host']}: {line}")
    if not rows:
        output.info("no output matched" if (grep or host or failed) else "no job has output yet")
