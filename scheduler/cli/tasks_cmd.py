"""``fleetsched tasks list|show|cancel|pause|resume|retry-failed|reprioritize``.

Thin: parse, call one verb of ``scheduler.verbs.tasks`` (list, show, output, the controls) or
``scheduler.verbs.follow`` (watch, wait), in remote mode ``scheduler.remote``'s, render. A control is recorded with the operator's
name (``--as``) in SQL before the command returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs
from scheduler.cli.output import OutputOption
from scheduler.cli.waiting import note_record_behind, report_wait

if TYPE_CHECKING:
    from scheduler.views.snapshot import TaskProgress

tasks_app = typer.Typer(help="Submitted tasks: list, show, and control them.",
                        no_args_is_help=True)

MAX_ID = 2**63 - 1  # task ids are 64-bit integers in SQL
TaskId = Annotated[int, typer.Argument(help="The task id (see `fleetsched tasks list`).",
                                       min=1, max=MAX_ID)]


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
    from scheduler.submission.taskinfo import LIST_COLUMNS

    tasks, stores, _principal = verbs(ctx, "tasks")
    rows = tasks.list_(stores, state=state_, operator=operator, action=action, limit=limit)
    output.emit_rows(rows, LIST_COLUMNS, fmt)
    note_record_behind(stores, {r["id"]: r["done"] for r in rows if r["done"] < r["total"]})


# tasks show's table: the counts line (scheduler.progress), and the live hash's other fields
COUNT_COLUMNS = ("total", "succeeded", "failed", "lost", "cancelled", "running", "pending")
LIVE_SHOWN = ("state", "prio", "overshoot", "max_running", "max_failures")


@tasks_app.command("show", epilog="Examples:\n\n  fleetsched tasks show 42\n\n"
                                  "  fleetsched tasks show 42 --events\n\n"
                                  "  fleetsched tasks show 42 -o json | jq .live.overshoot")
def show_cmd(ctx: typer.Context, task_id: TaskId, fmt: OutputOption = output.OutputFormat.table,
             events: Annotated[bool, typer.Option("--events", help="Also the full event trail: every job's claims, results, retries, deferrals.")] = False) -> None:
    """One task: request, policy, counters (live from Redis), failures and the control trail."""
    tasks, stores, _principal = verbs(ctx, "tasks")
    info = tasks.show(stores, task_id, events=events, note=output.info)
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
        from scheduler.progress import from_task_hash

        # The hash's own state stays "active" once every job ended: say what its counts say
        live = {**info["live"], "state": from_task_hash(info["live"]).state}
        head["live"] = ", ".join(f"{k}={v}" for k, v in live.items() if k in LIVE_SHOWN)
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
        from scheduler.reports.attempts import shown_exit

        failures = info["failures"] if fmt is not output.OutputFormat.table else [
            {**f, "exit_code": shown_exit(f["exit_code"], f["error"])} for f in info["failures"]]
        output.emit_rows(failures, ["id", "host", "state", "attempts", "exit_code", "error"],
                         fmt, title="failures")
    output.emit_rows(info["trail"], ["ts", "kind", "operator", "count", "error"], fmt,
                     title="trail")
    if events:
        from scheduler.reports import TRAIL_COLUMNS
        from scheduler.reports.trail import for_table

        rows, columns = for_table(info["events"], [c for c in TRAIL_COLUMNS if c != "task"])
        output.emit_rows(rows, columns, fmt, title="events")


def _control(ctx: typer.Context, task_id: int, verb: str, priority: str | None = None) -> None:
    tasks, stores, principal = verbs(ctx, "tasks")
    done = tasks.control(stores, principal, task_id, verb, priority)
    what = {"pause": "paused (pending jobs held in order; running ones finish)",
            "resume": f"resumed: {done.count} held jobs released",
            "cancel": f"cancelled: {done.count} jobs that had not started; running ones finish",
            "continue": f"continued after wave {done.count}: the next step of the rollout "
                        "follows",
            "retry-failed": f"{done.count} failed jobs queued again with a new attempt budget",
            "reprioritize": f"moved to {priority or '?'}: {done.count} pending jobs"}[verb]
    output.info(f"task {task_id} {what} (state {done.state}, by {done.by})")


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

  fleetsched tasks watch 42 --output json | jq '.[0].failures[] | {host, exit, last_lines}'

  id=$(fleetsched submit command -t group:web -p cmd=uptime --yes) && fleetsched tasks watch "$id"

Under each task's bar: the hosts running now (at most 8, longest first, with their worker and
for how long) and each failed host with its exit code or signal and its last 3 lines (the last
frame lists up to 20 per task; `tasks output 42 --failed` has them all). The JSON summary has
the same as `running_hosts` and `failures`.

Exit codes: 0 every job succeeded, 3 some jobs failed or were lost, 4 no such task, 5 cancelled.
"""

SUMMARY_COLUMNS = ["task", "state", "total", "succeeded", "failed", "lost", "cancelled",
                   "running", "pending"]


def summary_rows(tasks: list[TaskProgress],
                 failures: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per task, every number from ``scheduler.progress``; for JSON also the hosts
    running now and, when followed, the failures shown under its bar (the table and CSV keep
    the counts)."""
    from scheduler.views.live import failure_row

    rows = []
    for t in tasks:
        row: dict[str, Any] = {"task": t.task_id, **t.progress.counts(),
                               "running_hosts": t.running_hosts}
        if failures is not None:
            row["failures"] = [failure_row(f) for f in failures
                               if str(f.get("job", "")).rpartition(".")[0] == t.task_id]
        rows.append(row)
    return rows


@tasks_app.command("watch", epilog=WATCH_EPILOG)
def watch(
    ctx: typer.Context,
    task_ids: Annotated[list[int], typer.Argument(help="The task id(s) to watch.", min=1, max=MAX_ID)],
    interval: Annotated[float, typer.Option(help="Seconds between redraws.", min=0.1, max=60)] = 0.5,
    timeout: Annotated[str | None, typer.Option(help="Give up after this long (e.g. 30m); exit code 1.")] = None,
    once: Annotated[bool, typer.Option("--once", help="Print the tasks' numbers now and exit: the exit code of their end when they have ended, else 0.")] = False,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="summary as table, json or csv")] = output.OutputFormat.table,
) -> None:
    """Progress bars per task, throughput and ETA until the tasks end; under each bar the hosts
    running now (host, worker, for how long) and each failed host as it fails, with its exit
    code or signal and the last lines it printed."""
    from scheduler.parse import parse_duration
    from scheduler.verbs.follow import exit_code

    limit_s = parse_duration(timeout, "--timeout").total_seconds() if timeout else None
    ids = [str(t) for t in dict.fromkeys(task_ids)]
    follow, stores, _principal = verbs(ctx, "follow")
    if once:
        tasks, failures = follow.progress(stores, ids), None
    else:
        followed = follow.follow(stores, ids, interval_s=interval, timeout_s=limit_s,
                                 console=output.stderr, note=output.info)
        tasks, failures = followed.tasks, followed.shown_failures
    output.emit_rows(summary_rows(tasks, failures), SUMMARY_COLUMNS, fmt)
    if once and not all(t.progress.ended for t in tasks):
        raise typer.Exit(0)
    raise typer.Exit(exit_code(tasks))


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
    _follow, stores, _principal = verbs(ctx, "follow")
    raise typer.Exit(report_wait(stores, [str(t) for t in dict.fromkeys(task_ids)], limit_s))


OUTPUT_EPILOG = """Examples:

  fleetsched tasks output 42

  fleetsched tasks output 42 --failed

  fleetsched tasks output 42 --host web-07 --grep 'error|warn'

  fleetsched tasks output 42 --output json

  fleetsched tasks output 42 --follow

  fleetsched tasks output 42 --follow --host web-07

  fleetsched tasks output 42 --follow --timeout 10m

With --follow, each host's lines as they are printed (secrets masked), until the task ends:
the exit code is then the one `tasks wait` gives (0 every job succeeded, 3 some failed or
were lost, 5 cancelled or aborted, 4 no such task, 1 the --timeout passed first).
"""


@tasks_app.command("output", epilog=OUTPUT_EPILOG)
def output_cmd(
    ctx: typer.Context,
    task_id: TaskId,
    host: Annotated[str | None, typer.Option("--host", help="Only this host's job.")] = None,
    failed: Annotated[bool, typer.Option("--failed", help="Only the jobs that failed or were lost.")] = False,
    grep: Annotated[str | None, typer.Option("--grep", help="Only the lines matching this regular expression.")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Print each host's lines as they are printed (`host | line`), earlier ones first, until the task ends; exit code as `tasks wait`. After the end: the recorded output.")] = False,
    timeout: Annotated[str | None, typer.Option(help="With --follow: give up after this long (e.g. 30m); exit code 1, as `tasks wait --timeout`.")] = None,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Every host's output of its job's last attempt, each line prefixed by the host (like
    ``ansible -o`` or ``pssh -i``); stderr lines are marked ``[stderr]``."""
    from scheduler.errors import ValidationError

    if timeout is not None and not follow:
        raise ValidationError("--timeout is for --follow (the recorded output is read at once)",
                              hint="add --follow, or drop --timeout")
    if follow:
        from scheduler.cli.following import follow_and_print
        from scheduler.parse import parse_duration

        limit_s = parse_duration(timeout, "--timeout").total_seconds() if timeout else None
        if failed:
            raise ValidationError("--failed reads the jobs that ended failed: it cannot be "
                                  "followed", hint="follow with --host, or drop --follow")
        _live, live_stores, _principal = verbs(ctx, "liveoutput")
        raise typer.Exit(follow_and_print(live_stores, task_id, host=host, grep=grep, fmt=fmt,
                                          timeout_s=limit_s))
    tasks, stores, _principal = verbs(ctx, "tasks")
    rows = tasks.output(stores, task_id, host=host, failed=failed, grep=grep)
    if fmt is not output.OutputFormat.table:
        output.emit_rows(rows, ["host", "job", "state", "attempt", "exit_code", "lines"], fmt)
        return
    from scheduler.reports.attempts import shown_exit

    for row in rows:
        rc = shown_exit(row["exit_code"], row.get("error")) or "-"
        output.emit_line(f"{row['host']} | {row['state']} | rc={rc} | job {row['job']} "
                         f"attempt {row['attempt']}")
        for line in row["lines"]:
            output.emit_line(f"{row['host']}: {line}")
    if not rows:
        output.info("no output matched" if (grep or host or failed) else "no job has output yet")
