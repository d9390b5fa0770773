"""``fleetsched tasks list|show|cancel|pause|resume|retry-failed|reprioritize``.

Thin: read the record through ``scheduler.submission.taskinfo`` (live counters from Redis when it answers)
and change a task through ``scheduler.submission.control``, which records each change with the operator's
name (``--as``) in SQL before the command returns. A task's verbs and live counters are those of
the queue shard holding the task (``Shards.of_task``).
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

MAX_ID = 2**63 - 1  # task ids are 64-bit integers in SQL
TaskId = Annotated[int, typer.Argument(help="The task id (see `fleetsched tasks list`).",
                                       min=1, max=MAX_ID)]


@contextmanager
def _context(ctx: typer.Context, *, redis: bool = True,
             task_id: int | None = None) -> Iterator[tuple[Any, Any, str]]:
    """(engine, queue or None, operator); closed afterwards. The queue is that of the shard
    holding ``task_id``."""
    from scheduler.cli.context import queue_client
    from scheduler.queue.client import Queue
    from scheduler.queue.route import task_keys
    from scheduler.queue.shards import shards_of
    from scheduler.record.session import open_database

    settings = state(ctx).settings
    engine = open_database(settings)
    client = queue = None
    try:
        if redis:
            client = queue_client(settings)
            queue = Queue(client, task_keys(shards_of(settings), task_id or 0),
                          lease_ms=settings.lease_ms)
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
    state_: Annotated[str | None, typer.Option(
        "--state", help="Only tasks in this state, as shown: accepted, active, paused, stopped (a "
                        "rollout waiting for an operator), succeeded, failed, cancelled, "
                        "aborted.")] = None,
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
    warn_if_record_behind(ctx, {r["id"]: r["done"] for r in rows if r["done"] < r["total"]})


def warn_if_record_behind(ctx: typer.Context, recorded_done: dict[int, int]) -> None:
    """One line on stderr when the queue counts more ended jobs than the SQL record for any of
    these tasks (the unfinished ones ``tasks list`` or ``report`` shows, with their recorded
    done count): those views read the record only. One pipelined read; silent when Redis does
    not answer at once, and the embedded server is never started for it."""
    import redis

    from scheduler.errors import FleetschedError
    from scheduler.progress import from_task_hash
    from scheduler.queue.shards import shards_of
    from scheduler.redisdb.connect import connect
    from scheduler.redisdb.embedded import Embedded

    if not recorded_done:
        return
    settings = state(ctx).settings
    ids = sorted(recorded_done)
    shards = shards_of(settings)
    fields = ("total", "succeeded", "failed", "lost_failed", "cancelled")
    try:
        if settings.redis_url is None:
            endpoint = Embedded.of(settings).read_endpoint()
            if endpoint is None:
                return
            client = endpoint.client(socket_connect_timeout=1.0, socket_timeout=2.0)
        else:
            client = connect(settings, socket_timeout=2.0, check=False)
        try:
            pipe = client.pipeline(transaction=False)
            for tid in ids:
                pipe.hmget(shards.of_task(str(tid)).task(str(tid)), fields)
            replies = pipe.execute()
        finally:
            client.close()
    except (redis.RedisError, FleetschedError, OSError):
        return
    ahead = [tid for tid, reply in zip(ids, replies)
             if from_task_hash(dict(zip(fields, reply))).done > recorded_done[tid]]
    if ahead:
        shown = ", ".join(map(str, ahead[:10])) + (" ..." if len(ahead) > 10 else "")
        output.info(f"note: the SQL record is behind the queue for task(s) {shown}: these "
                    "numbers are the record's; `fleetsched tasks show TASK` has the live ones "
                    "(is a recorder running?)")


def _live(ctx: typer.Context, task_id: int) -> dict[str, str] | None:
    from scheduler.errors import FleetschedError

    try:
        with _context(ctx, task_id=task_id) as (_engine, queue, _op):
            return queue.task_state(str(task_id)) or None
    except FleetschedError as exc:
        output.info(f"warning: live counters unavailable ({exc})")
        return None


# tasks show's table: the counts line (scheduler.progress), and the live hash's other fields
COUNT_COLUMNS = ("total", "succeeded", "failed", "lost", "cancelled", "running", "pending")
LIVE_SHOWN = ("state", "prio", "overshoot", "max_running", "max_failures")


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
    from scheduler.submission.taskinfo import params_text, policy_text

    head = {k: info[k] for k in ("id", "name", "action", "target", "operator", "origin",
                                 "windows", "state", "executor", "created_at", "started_at",
                                 "finished_at")}
    head["params"] = params_text(info["params"])
    head["policy"] = policy_text(info["policy"])
    # The counts, as every view says them (scheduler.progress); the live hash's own counters
    # (its failed includes the lost jobs, its lost counts every loss of a worker) are in JSON.
    head["counts"] = ", ".join(f"{k}={info[k]}" for k in COUNT_COLUMNS)
    head["jobs"] = ", ".join(f"{k}={v}" for k, v in info["jobs"].items())
    if info["live"]:
        head["live"] = ", ".join(f"{k}={v}" for k, v in info["live"].items()
                                 if k in LIVE_SHOWN)
    if info.get("waves"):
        w = info["waves"]
        head["waves"] = (f"wave {w['wave']} of {w['waves']} ({w['sizes']}, {w['order']} order), "
                         f"{w['state']}" + (f", waiting for {w['waits_for']}"
                                            if w.get("waits_for") else ""))
        if w.get("why"):
            head["wave_why"] = w["why"]
    head["summary"] = info["summary"]
    if info["note"]:
        head["note"] = info["note"]
    output.emit_object(head, fmt)
    if info["failures"]:
        output.emit_rows(info["failures"], ["id", "host", "state", "attempts", "exit_code", "error"],
                         fmt, title="failures")
    output.emit_rows(info["trail"], ["ts", "kind", "operator", "count", "error"], fmt,
                     title="trail")
    if events:
        from scheduler.reports import TRAIL_COLUMNS
        from scheduler.reports.trail import for_table

        rows, columns = for_table(info["events"], [c for c in TRAIL_COLUMNS if c != "task"])
        output.emit_rows(rows, columns, fmt, title="events")


def _control(ctx: typer.Context, task_id: int, verb: str, *extra: Any) -> None:
    from scheduler.submission import control, rollout
    fn = {"continue": rollout.continue_rollout, "pause": control.pause, "resume": control.resume, "cancel": control.cancel,
          "retry-failed": control.retry_failed, "reprioritize": control.reprioritize}[verb]
    with _context(ctx, task_id=task_id) as (engine, queue, operator):
        result = fn(engine, queue, task_id, *extra, operator)
    what = {"pause": "paused (pending jobs held in order; running ones finish)",
            "resume": f"resumed: {result.count} held jobs released",
            "cancel": f"cancelled: {result.count} jobs that had not started; running ones finish",
            "continue": f"continued after wave {result.count}: the next step of the rollout "
                        "follows",
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


@tasks_app.command("continue", epilog="Example:\n\n  fleetsched --as alice tasks continue 42")
def continue_cmd(ctx: typer.Context, task_id: TaskId) -> None:
    """Pass the gate of a rollout in waves, or go on with a stopped one (the next wave)."""
    _control(ctx, task_id, "continue")


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

  fleetsched tasks watch 42 --once

  id=$(fleetsched submit command -t group:web -p cmd=uptime --yes) && fleetsched tasks watch "$id"

Exit codes: 0 every job succeeded, 3 some jobs failed or were lost, 4 no such task, 5 cancelled.
"""

SUMMARY_COLUMNS = ["task", "state", "total", "succeeded", "failed", "lost", "cancelled",
                   "running", "pending"]


def summary_rows(tasks: list[Any]) -> list[dict[str, Any]]:
    """One row per task, every number from ``scheduler.progress``."""
    return [{"task": t.task_id, **t.progress.counts()} for t in tasks]


@tasks_app.command("watch", epilog=WATCH_EPILOG)
def watch(
    ctx: typer.Context,
    task_ids: Annotated[list[int], typer.Argument(help="The task id(s) to watch.", min=1, max=MAX_ID)],
    interval: Annotated[float, typer.Option(help="Seconds between redraws.", min=0.1, max=60)] = 0.5,
    timeout: Annotated[str | None, typer.Option(help="Give up after this long (e.g. 30m); exit code 1.")] = None,
    once: Annotated[bool, typer.Option("--once", help="Print the tasks' numbers now and exit: the exit code of their end when they have ended, else 0.")] = False,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="summary as table, json or csv")] = output.OutputFormat.table,
) -> None:
    """Progress bars per task, throughput, ETA and failures as they happen, until the tasks end."""
    from scheduler.parse import parse_duration

    limit_s = parse_duration(timeout, "--timeout").total_seconds() if timeout else None
    ids = [str(t) for t in dict.fromkeys(task_ids)]
    tasks = (read_now(ctx, ids) if once
             else follow(ctx, ids, interval_s=interval, timeout_s=limit_s, draw=True))
    output.emit_rows(summary_rows(tasks), SUMMARY_COLUMNS, fmt)
    if once and not all(t.progress.ended for t in tasks):
        raise typer.Exit(0)
    raise typer.Exit(outcome_code(tasks))


def read_now(ctx: typer.Context, ids: list[str]) -> list[Any]:
    """The tasks' progress, read once: live from Redis, or from the SQL record for a task Redis
    no longer has (``NotFoundError`` for a task neither knows)."""
    from scheduler.cli.context import queue_client
    from scheduler.queue.shards import shards_of
    from scheduler.views.snapshot import read_tasks

    settings = state(ctx).settings
    client = queue_client(settings)
    try:
        found = read_tasks(client, shards_of(settings), ids)
    finally:
        client.close()
    missing = [tid for tid, t in zip(ids, found) if t is None]
    recorded = from_record(ctx, missing) if missing else {}
    return [t if t is not None else recorded[tid] for tid, t in zip(ids, found)]


def from_record(ctx: typer.Context, ids: list[str]) -> dict[str, Any]:
    """The SQL record's progress (``taskinfo.progress_of`` over the job rows) of tasks Redis has
    no hash for (flushed or restored, or a finished task's hash expired), as the live views'
    ``TaskProgress``; ``NotFoundError`` for a task the record does not know either."""
    from scheduler.errors import FleetschedError, NotFoundError
    from scheduler.record.models import Task
    from scheduler.record.session import open_database, transaction
    from scheduler.submission.taskinfo import progress_of
    from scheduler.views.snapshot import TaskProgress

    out: dict[str, Any] = {}
    try:
        engine = open_database(state(ctx).settings)
    except FleetschedError as exc:
        raise NotFoundError(f"no task {ids[0]} in the queue, and the SQL record cannot be read "
                            f"({exc})", hint="fleetsched tasks list shows the tasks") from None
    try:
        with transaction(engine, commit=False) as session:
            for tid in ids:
                row = session.get(Task, int(tid)) if tid.isdigit() else None
                if row is None:
                    raise NotFoundError(f"no task {tid} in the queue or in the record",
                                        hint="fleetsched tasks list shows the tasks")
                p = progress_of(session, row, None)
                out[tid] = TaskProgress(
                    task_id=tid, state=p.recorded_state, operator=row.operator or "",
                    action=row.action or "", total=p.total, running=p.running,
                    succeeded=p.succeeded, failed=p.failed, lost=p.lost,
                    cancelled=p.cancelled)
    finally:
        engine.dispose()
    return out


def outcome_code(tasks: list[Any]) -> int:
    """The exit code of ``watch`` and ``wait``: ``scheduler.progress.exit_code``."""
    from scheduler.progress import exit_code

    return exit_code(t.progress for t in tasks)


def follow(ctx: typer.Context, ids: list[str], *, interval_s: float, timeout_s: float | None,
           draw: bool) -> list[Any]:
    """Wait until every task has ended; ``draw``: progress bars and failures on stderr as they
    happen (``tasks watch``), else silent (``tasks wait``, ``submit --wait``).

    A task Redis has no hash for (flushed or restored, or a finished task's hash expired) is
    read from the SQL record (``from_record``) when it has ended there."""
    import io
    import time

    from rich.console import Console

    from scheduler.cli.context import queue_client
    from scheduler.errors import FleetschedError, NotFoundError
    from scheduler.queue.shards import shards_of
    from scheduler.views.live import FailureFeed, failure_line
    from scheduler.views.live import watch as run_watch
    from scheduler.views.snapshot import read_tasks

    settings = state(ctx).settings
    client = queue_client(settings)
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
        keys = shards_of(settings)
        recorded: dict[str, Any] = {}
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            live = [t for t in ids if t not in recorded]
            missing = [t for t, p in zip(live, read_tasks(client, keys, live)) if p is None]
            if missing:
                recorded.update(_ended_in_record(ctx, missing, console))
                continue
            try:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                tasks = (run_watch(client, keys, live, console, feed=feed,
                                   interval_s=interval_s, timeout_s=left)[0]
                         if live else [])
            except NotFoundError:  # a finished task's hash expired while watching
                continue
            except TimeoutError as exc:
                raise FleetschedError(str(exc), hint="wait again, or see fleetsched top") from None
            break
        if feed is not None:
            # The failures come from SQL: once the queue says the tasks ended, give the
            # recorders time to bring the last ones in (a node records from a process of its
            # own, a moment behind), then list what the live view had not shown yet.
            if live and not _recorded(engine, tasks, RECORD_WAIT_S):
                output.info("warning: the SQL record is behind (is a recorder running?): "
                            "failures may be missing below")
            for f in feed.poll():
                console.print(failure_line(f))
    finally:
        client.close()
        if engine is not None:
            engine.dispose()
    by_id = {t.task_id: t for t in tasks} | recorded
    return [by_id[t] for t in ids]


def _ended_in_record(ctx: typer.Context, ids: list[str], console: Any) -> dict[str, Any]:
    """The SQL record's progress of tasks Redis has no hash for (``from_record``), which must
    have ended there: nothing would ever move a task Redis has forgotten."""
    from scheduler.errors import FleetschedError

    recorded = from_record(ctx, ids)
    for tid, t in recorded.items():
        if not t.progress.ended:
            raise FleetschedError(
                f"task {tid} is not in the queue, and its record says it has not ended "
                f"({t.progress.sentence()})",
                hint="fleetsched reconcile puts the record's unfinished jobs back in the queue")
        console.print(f"task {tid}: not in the queue any more; its numbers are the SQL "
                      "record's", markup=False, highlight=False)
    return recorded


RECORD_WAIT_S = 15.0  # how long wait gives the recorders to put the last results in SQL


def _recorded(engine: Any, tasks: list[Any], timeout_s: float) -> bool:
    """Wait until the SQL record has as many ended jobs as Redis says each task has (the failed
    hosts' lines come from SQL); False when the recorders are still behind after the timeout."""
    import time

    from scheduler.record.models import Task
    from scheduler.record.session import transaction
    from scheduler.submission.taskinfo import progress_of

    deadline = time.monotonic() + timeout_s
    while True:
        with transaction(engine, commit=False) as session:
            behind = [t for t in tasks if (row := session.get(Task, int(t.task_id))) is None
                      or progress_of(session, row, None).done < t.done]
        if not behind or time.monotonic() > deadline:
            return not behind
        time.sleep(0.2)


def wait_and_report(ctx: typer.Context, ids: list[str], timeout_s: float | None) -> int:
    """Block until the tasks end, print one line per job that failed, return the exit code."""
    from scheduler.record.session import open_database
    from scheduler.reports.attempts import task_outputs

    tasks = follow(ctx, ids, interval_s=0.2, timeout_s=timeout_s, draw=False)
    engine = open_database(state(ctx).settings)
    try:
        if any(t.progress.unsuccessful for t in tasks) \
                and not _recorded(engine, tasks, RECORD_WAIT_S):
            output.info("warning: the SQL record is behind (is a recorder running?): some "
                        "failed hosts may be missing below; see `fleetsched tasks output "
                        "TASK --failed` later")
        for t in tasks:
            for row in task_outputs(engine, int(t.task_id), failed=True):
                rc = "-" if row["exit_code"] is None else row["exit_code"]
                last = row["lines"][-1] if row["lines"] else ""
                output.info(f"{row['host']} | {row['state']} | rc={rc} | job {row['job']}"
                            + (f" | {last}" if last else ""))
    finally:
        engine.dispose()
    for t in tasks:
        output.info(f"task {t.task_id}: {t.progress.sentence()}")
        if t.progress.stopped:
            output.info(f"rollout stopped: {t.wave_line()}")
            output.info(f"hint: fleetsched tasks continue {t.task_id} releases the next wave; "
                        f"fleetsched tasks cancel {t.task_id} ends the rollout")
    return outcome_code(tasks)


WAIT_EPILOG = """Examples:

  fleetsched tasks wait 42

  fleetsched tasks wait 42 --timeout 30m && echo "all hosts done"

Exit codes: 0 every job succeeded, 1 infrastructure trouble or the timeout, 3 some jobs failed
or a rollout in waves stopped (it waits for `tasks continue` or `tasks cancel`), 4 no such
task, 5 cancelled or aborted.
"""


@tasks_app.command("wait", epilog=WAIT_EPILOG)
def wait_cmd(
    ctx: typer.Context,
    task_ids: Annotated[list[int], typer.Argument(help="The task id(s) to wait for.", min=1, max=MAX_ID)],
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
        output.emit_line(f"{row['host']} | {row['state']} | rc={rc} | job {row['job']} "
                         f"attempt {row['attempt']}")
        for line in row["lines"]:
            output.emit_line(f"{row['host']}: {line}")
    if not rows:
        output.info("no output matched" if (grep or host or failed) else "no job has output yet")
