"""``fleetsched schedules add|list|show|pause|resume|remove|next``: recurring tasks.

Thin: the task options are parsed exactly as ``fleetsched submit`` parses them
(``scheduler.cli.task_options``), then one verb of ``scheduler.verbs.schedules`` (in remote
mode ``scheduler.remote.schedules``) checks, records and arms the schedule. Workers fire it (no leader process). Rules: docs/guides/windows-and-schedules.md.
"""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs
from scheduler.cli.output import OutputOption
from scheduler.errors import ValidationError

schedules_app = typer.Typer(help="Recurring schedules: tasks created at cron times, exactly once.",
                            no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="The schedule's name.")]


@schedules_app.command("add", epilog="""Examples:

  fleetsched schedules add dnssec-roll --cron '0 3 * * SUN' --tz Europe/Berlin key-rollover \\
      --target group:dns --max-failures 1 \\
      -p pre_check='dnssec-verify -o example.org /var/named/example.org.signed' \\
      -p rollover='rndc dnssec -rollover -key 12345 example.org' \\
      -p post_check='dig +dnssec example.org DNSKEY'

  fleetsched schedules add fw-check --cron '*/15 * * * *' command -t 'fw-*' -p cmd='fw status' --catch-up skip

  fleetsched schedules add heartbeat --every 30s command -t all -p cmd=true --overlap allow

  fleetsched schedules add backup --cron '0 2 * * *' command -t group:db -p cmd=backup --notify mailto:dba@example.org

  fleetsched schedules add nightly-restart --cron '0 4 * * *' --template restart-service -p service=nginx

  fleetsched schedules add pinned-restart --cron '30 4 * * SUN' --template restart-service@1 -p service=haproxy

With --template the template says the task (its newest version at each firing, or NAME@N's);
-p gives its parameters' values, checked now and again at each firing.

Exit codes: 0 armed, 1 recorded but not armed (run schedules resume NAME), 2 bad input (nothing
written), 4 unknown action.
""")
def add_cmd(
    ctx: typer.Context, name: Name,
    action: Annotated[str | None, typer.Argument(help="The action (see `fleetsched actions list`); none with --template.")] = None,
    template: Annotated[str | None, typer.Option("--template", metavar="NAME[@VERSION]", help="Fire a saved template instead of an action: its newest version at each firing, or the version pinned (NAME@3); -p gives its parameters.")] = None,
    cron: Annotated[str | None, typer.Option("--cron", help="Cron expression (5 fields or @daily ...).")] = None,
    every: Annotated[str | None, typer.Option("--every", help="An interval instead of cron (30s, 5m): whole multiples since the epoch.")] = None,
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone of the cron expression.")] = "UTC",
    target: Annotated[str | None, typer.Option("--target", "-t", help="Hosts: group:NAME, names, globs, vars.KEY=VALUE, &intersections, !exclusions, all.")] = None,
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="An action parameter NAME=VALUE (repeatable); with --template, a template parameter.")] = None,
    in_window: Annotated[bool, typer.Option("--in-window", help="Each host's job waits for its service window (the default for actions that require windows).")] = False,
    ignore_windows: Annotated[bool, typer.Option("--ignore-windows", help="Run an action that requires service windows outside them (recorded with each task). Freezes still hold its jobs.")] = False,
    max_concurrency: Annotated[str | None, typer.Option("--max-concurrency", help="N or P% of the hosts.")] = None,
    max_failures: Annotated[str | None, typer.Option("--max-failures", help="Abort after N or P% failed jobs.")] = None,
    timeout: Annotated[str | None, typer.Option("--timeout", help="Per attempt (default 1h).")] = None,
    retries: Annotated[int | None, typer.Option("--retries", help="Retries after a failed attempt (default 2).")] = None,
    priority: Annotated[str, typer.Option("--priority", help="urgent, normal or bulk.")] = "normal",
    executor: Annotated[str | None, typer.Option("--executor", help="ssh, local or simulate.")] = None,
    executor_option: Annotated[list[str] | None, typer.Option("--executor-option", help="Executor option NAME=VALUE (repeatable).")] = None,
    catch_up: Annotated[str, typer.Option("--catch-up", help="After downtime: skip, latest or all.")] = "latest",
    catch_up_window: Annotated[str, typer.Option("--catch-up-window", help="How old a missed occurrence may be and still run (latest/all).")] = "1h",
    overlap: Annotated[str, typer.Option("--overlap", help="skip (not while the previous task runs) or allow.")] = "skip",
    notify: Annotated[list[str] | None, typer.Option("--notify", help="Also tell this webhook URL or mailto:ADDRESS of a missed occurrence or a failed task (repeatable).")] = None,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Add a schedule: the task is checked as `submit` would, then armed for its next occurrence."""
    from scheduler.cli.task_options import request_of
    from scheduler.parse import parse_duration
    from scheduler.schedules.store import ScheduleSpec

    options = {"in_window": in_window, "ignore_windows": ignore_windows,
               "max_concurrency": max_concurrency, "max_failures": max_failures,
               "timeout": timeout, "retries": retries,
               "backoff": None, "name": None, "priority": priority, "executor": executor,
               "executor_option": executor_option, "idempotent": None, "notify": notify}
    window = parse_duration(catch_up_window, "--catch-up-window")
    if template is not None:
        from scheduler.submission.request import pairs

        given = [k for k, v in {"ACTION": action, "--target": target,
                                **{"--" + o.replace("_", "-"): v for o, v in options.items()}
                                }.items() if v not in (None, False, [], "normal")]
        if given:
            raise ValidationError(f"with --template the template says the task: drop "
                                  f"{given[0]}",
                                  hint="give its parameters with -p NAME=VALUE")
        request, values = None, pairs(param, "--param")
    else:
        if action is None:
            raise ValidationError("give the schedule's action, or --template NAME",
                                  hint="see `fleetsched actions list`, `fleetsched templates "
                                       "list`")
        request, values = request_of(action, target, param, None, None, options), {}
    spec = ScheduleSpec(name=name, request=request, tz=tz, cron=cron, every=every,
                        catchup=catch_up, catchup_window_s=int(window.total_seconds()),
                        overlap=overlap, template=template, template_params=values)
    schedules, stores, principal = verbs(ctx, "schedules")
    done = schedules.add(stores, principal, spec)
    if fmt is not output.OutputFormat.table:
        output.emit_object(done.as_dict(), fmt)
    nxt = done.next
    output.info(f"schedule {name} armed: {done.explain} ({done.tz}), {done.hosts} hosts; "
                f"next {nxt.isoformat() if nxt else 'never'}")


@schedules_app.command("list", epilog="Example:\n\n  fleetsched schedules list -o json")
def list_cmd(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """List schedules with their last and next occurrence."""
    from scheduler.schedules.store import LIST_COLUMNS

    schedules, stores, _principal = verbs(ctx, "schedules")
    output.emit_rows(schedules.list_(stores), LIST_COLUMNS, fmt)


@schedules_app.command("show", epilog="Example:\n\n  fleetsched schedules show dnssec-roll")
def show_cmd(ctx: typer.Context, name: Name, fmt: OutputOption = output.OutputFormat.table) -> None:
    """One schedule: definition, options, latest tasks, latest missed occurrences."""
    schedules, stores, _principal = verbs(ctx, "schedules")
    info = schedules.show(stores, name)
    if fmt is not output.OutputFormat.table:
        output.emit_object(info, fmt)
        return
    from scheduler.submission.taskinfo import options_text, params_text

    head = {k: v for k, v in info.items() if k not in ("tasks", "missed")}
    head["options"] = options_text(head.get("options") or {})
    head["params"] = params_text(head.get("params") or {})
    output.emit_object(head, fmt)
    output.emit_rows(info["tasks"], ["task", "occurrence", "state", "total", "succeeded", "failed",
                                     "lost", "cancelled", "running", "pending"],
                     fmt, title="latest tasks")
    output.emit_rows(info["missed"], ["occurrence", "why", "recorded"], fmt, title="latest missed")


@schedules_app.command("pause", epilog="Example:\n\n  fleetsched schedules pause dnssec-roll")
def pause_cmd(ctx: typer.Context, name: Name) -> None:
    """Stop firing until resume (occurrences meanwhile are recorded as missed at resume)."""
    schedules, stores, principal = verbs(ctx, "schedules")
    done = schedules.pause(stores, principal, name)
    output.info(f"schedule {name} {'paused' if done.changed else 'was paused already'}")


@schedules_app.command("resume", epilog="Example:\n\n  fleetsched schedules resume dnssec-roll")
def resume_cmd(ctx: typer.Context, name: Name) -> None:
    """Fire again from the next occurrence (also re-arms a schedule Redis lost)."""
    schedules, stores, principal = verbs(ctx, "schedules")
    done = schedules.resume(stores, principal, name)
    nxt = done.next
    output.info(f"schedule {name} {'resumed' if done.changed else 'armed'}: "
                f"{done.missed} occurrences recorded as missed; next "
                f"{nxt.isoformat() if nxt else 'never'}")


@schedules_app.command("remove", epilog="Example:\n\n  fleetsched schedules remove dnssec-roll")
def remove_cmd(ctx: typer.Context, name: Name) -> None:
    """Remove a schedule; the tasks it created stay, with their record."""
    schedules, stores, principal = verbs(ctx, "schedules")
    schedules.remove(stores, principal, name)
    output.info(f"schedule {name} removed")


@schedules_app.command("next", epilog="Example:\n\n  fleetsched schedules next dnssec-roll --count 3")
def next_cmd(ctx: typer.Context, name: Name,
             count: Annotated[int, typer.Option("--count", "-n", help="How many occurrences.")] = 5,
             fmt: OutputOption = output.OutputFormat.table) -> None:
    """The next occurrences, in the schedule's zone and in UTC."""
    schedules, stores, _principal = verbs(ctx, "schedules")
    output.emit_rows(schedules.next_(stores, name, count), ["local", "tz", "utc"], fmt)
