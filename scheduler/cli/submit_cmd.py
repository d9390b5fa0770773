"""``fleetsched submit``: fan a task out to hosts, from options or a YAML task file.

Thin: parse the options into a ``scheduler.submission.submit.TaskRequest`` (or read one with
``scheduler.submission.taskfile``), plan it (``plan_task``), show the plan (``--dry-run``) or the blast
radius of a fleet-wide task and ask for confirmation, then ``submit``. The task id goes to
stdout (``id=$(fleetsched submit ...)``); messages go to stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from scheduler.cli import output
from scheduler.cli.context import state
from scheduler.errors import DeclinedError, ValidationError

EPILOG = """Examples:

  fleetsched submit command --target group:web,!web-07 --param cmd='systemctl reload nginx' \\
      --max-concurrency 10% --max-failures 2

  fleetsched submit copy -t 'db-*' -p src=/srv/my.cnf -p dest=/etc/mysql/my.cnf --at 2026-12-01T22:00

  fleetsched submit firmware -t group:customer-acme -p image=/srv/fw-4.2.bin --in-window --dry-run

  fleetsched submit -f task.yaml --yes

  fleetsched submit command -t group:web -p cmd='systemctl is-active nginx' --wait --yes

Exit codes: 0 queued, 1 recorded but not queued (run fleetsched reconcile), 2 bad input
(nothing written), 4 unknown action, 5 declined (a fleet-wide task needs --yes without a
terminal). With --wait, once the task has ended: 0 every job succeeded, 3 some failed, 5
cancelled or aborted, 1 infrastructure trouble or --wait-timeout.
"""


def _pairs(values: list[str] | None, option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in values or []:
        key, sep, value = raw.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ValidationError(f"{option} {raw!r} is not NAME=VALUE",
                                  hint=f"e.g. {option} cmd='uptime'")
        if key in out:
            raise ValidationError(f"{option} {key} is given twice")
        out[key] = value
    return out


def _request(action: str | None, target: str | None, params: list[str] | None, at: str | None,
             in_: str | None, options: dict[str, Any]) -> Any:
    from scheduler.parse import parse_duration, parse_limit, parse_time
    from scheduler.submission.submit import TaskRequest

    if not action:
        raise ValidationError("no action given", hint="fleetsched submit ACTION --target EXPR, "
                                                      "or fleetsched submit -f task.yaml")
    if not target:
        raise ValidationError("no --target given", hint="e.g. --target group:web,!web-07")
    if at and in_:
        raise ValidationError("give --at or --in, not both")
    limit = options["max_concurrency"]
    fails = options["max_failures"]
    return TaskRequest(
        action=action, target=target, params=_pairs(params, "--param"),
        at=parse_time(at) if at else None,
        delay=parse_duration(in_, "--in") if in_ else None,
        in_window=options["in_window"],
        max_concurrency=parse_limit(limit, "--max-concurrency") if limit else None,
        max_failures=parse_limit(fails, "--max-failures") if fails else None,
        timeout_s=parse_duration(options["timeout"], "--timeout").total_seconds()
        if options["timeout"] else None,
        retries=options["retries"],
        backoff_s=(0.0 if options["backoff"] in ("0", "0s") else
                   parse_duration(options["backoff"], "--backoff").total_seconds())
        if options["backoff"] else None,
        name=options["name"], priority=options["priority"], executor=options["executor"],
        executor_options=_pairs(options["executor_option"], "--executor-option"),
        idempotent=options["idempotent"])


def _when(job: Any) -> str:
    if job.window:
        closes = f", closes {job.wclose.isoformat()}" if job.wclose else ""
        return f"{job.due.isoformat()} (window {job.window}{closes})"
    return "now" if job.due is None else job.due.isoformat()


def _show_plan(plan: Any, fmt: output.OutputFormat) -> None:
    policy = plan.policy.describe(plan.request)
    head = {"action": plan.action, "target": str(plan.target), "hosts": len(plan.hosts),
            "groups": len(plan.groups), "operator": plan.operator,
            "priority": plan.request.priority, "executor": plan.executor,
            "start": plan.start.isoformat() if plan.start else "now",
            "in_window": plan.request.in_window, **policy}
    rows = [{"job": j.seq, "host": j.host, "when": _when(j), "window": j.window}
            for j in plan.jobs]
    if fmt is output.OutputFormat.json:
        output.emit_object({"dry_run": True, "plan": head, "params": plan.params,
                            "jobs": rows}, fmt)
        return
    if fmt is output.OutputFormat.table:
        output.emit_object(head, fmt)
    output.emit_rows(rows, ["job", "host", "when"], fmt)


def _blast_radius(plan: Any) -> str:
    return (f"{plan.action} on {len(plan.hosts)} hosts in {len(plan.groups)} groups"
            f" (target {plan.target})")


def _confirm(plan: Any, yes: bool) -> None:
    if yes or not plan.fleet_wide:
        return
    if not sys.stdin.isatty():
        raise DeclinedError(f"fleet-wide task not submitted: {_blast_radius(plan)}; "
                            "there is no terminal to confirm it", hint="add --yes")
    output.info(f"fleet-wide: {_blast_radius(plan)}")
    if not typer.confirm("Submit it?", default=False, err=True):
        raise DeclinedError("not submitted")


def submit(
    ctx: typer.Context,
    action: Annotated[str | None, typer.Argument(help="The action (see `fleetsched actions list`).")] = None,
    target: Annotated[str | None, typer.Option("--target", "-t", help="Hosts: group:NAME, host names, globs, !exclusions, all.")] = None,
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="An action parameter NAME=VALUE (repeatable); secrets as @env:NAME or @file:/path.")] = None,
    at: Annotated[str | None, typer.Option("--at", help="Not before this ISO time (local zone unless given).")] = None,
    in_: Annotated[str | None, typer.Option("--in", help="Not before this long from now (10m, 2h).")] = None,
    in_window: Annotated[bool, typer.Option("--in-window", help="Each host's job waits for the host's next service window.")] = False,
    max_concurrency: Annotated[str | None, typer.Option("--max-concurrency", help="Jobs of this task running at once: N or P% of its hosts.")] = None,
    max_failures: Annotated[str | None, typer.Option("--max-failures", help="Abort after this many failed jobs: N or P%.")] = None,
    timeout: Annotated[str | None, typer.Option("--timeout", help="Per attempt (default 1h).")] = None,
    retries: Annotated[int | None, typer.Option("--retries", help="Retries after a failed attempt (default 2).")] = None,
    backoff: Annotated[str | None, typer.Option("--backoff", help="First retry delay, doubling (default 1s).")] = None,
    name: Annotated[str | None, typer.Option("--name", help="A name for the task.")] = None,
    priority: Annotated[str, typer.Option("--priority", help="urgent, normal or bulk.")] = "normal",
    executor: Annotated[str | None, typer.Option("--executor", help="ssh, local or simulate (default: the action's).")] = None,
    executor_option: Annotated[list[str] | None, typer.Option("--executor-option", help="Executor option NAME=VALUE (repeatable).")] = None,
    idempotent: Annotated[bool | None, typer.Option("--idempotent/--not-idempotent", help="Override the action's flag: may a lost job run again?")] = None,
    file: Annotated[Path | None, typer.Option("--file", "-f", help="A YAML task file instead of the options above.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; write and queue nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Submit a fleet-wide task without asking.")] = False,
    wait: Annotated[bool, typer.Option("--wait", help="Block until the task ends; one line per failed host; exit 0 all succeeded, 3 some failed, 5 cancelled or aborted.")] = False,
    wait_timeout: Annotated[str | None, typer.Option("--wait-timeout", help="With --wait: give up after this long (exit code 1).")] = None,
    fmt: Annotated[output.OutputFormat, typer.Option("--output", "-o", help="table, json or csv")] = output.OutputFormat.table,
) -> None:
    """Submit a task: one job per target host, queued now, later, or in service windows."""
    from scheduler.queue.keys import Keys
    from scheduler.record.session import open_database, transaction
    from scheduler.redisdb.connect import connect
    from scheduler.submission.submit import plan_task
    from scheduler.submission.submit import submit as run_submit

    options = {"in_window": in_window, "max_concurrency": max_concurrency,
               "max_failures": max_failures, "timeout": timeout, "retries": retries,
               "backoff": backoff, "name": name, "priority": priority, "executor": executor,
               "executor_option": executor_option, "idempotent": idempotent}
    if file is not None:
        from scheduler.submission.taskfile import load_task_file

        given = [k for k, v in {"ACTION": action, "--target": target, "--param": param,
                                "--at": at, "--in": in_}.items() if v]
        given += ["--" + k.replace("_", "-") for k, v in options.items()
                  if v not in (None, False, [], "normal")]
        if given:
            raise ValidationError(f"give the task in {file} or as options, not both "
                                  f"({given[0]} with --file)")
        request = load_task_file(file)  # a bad file fails before the database is opened
    else:
        request = _request(action, target, param, at, in_, options)
    settings = state(ctx).settings
    engine = open_database(settings)
    try:
        with transaction(engine, commit=False) as session:
            plan = plan_task(session, request, operator=settings.operator)
        if dry_run:
            _show_plan(plan, fmt)
            output.info(f"dry run: {_blast_radius(plan)}; nothing was queued")
            return
        _confirm(plan, yes)
        done = run_submit(engine, lambda: connect(settings), request,
                          operator=settings.operator, keys=Keys(settings.queue_prefix), plan=plan)
    finally:
        engine.dispose()
    if fmt is output.OutputFormat.table:
        output.stdout.print(str(done.task_id))
    else:
        output.emit_object({"task_id": done.task_id, "jobs": done.jobs, "state": "queued",
                            "action": plan.action, "hosts": len(plan.hosts),
                            "groups": len(plan.groups)}, fmt)
    output.info(f"task {done.task_id} queued: {_blast_radius(plan)}, as {settings.operator}")
    if wait:
        from scheduler.cli.tasks_cmd import wait_and_report
        from scheduler.parse import parse_duration

        limit_s = parse_duration(wait_timeout, "--wait-timeout").total_seconds() \
            if wait_timeout else None
        raise typer.Exit(wait_and_report(ctx, [str(done.task_id)], limit_s))
