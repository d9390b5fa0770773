"""``fleetsched windows add|list|show|assign|unassign|approve|remove|next|sync``: service windows.

Thin: parse, call ``scheduler.windows.store``, render through ``scheduler.cli.output``.
Rules and DST behaviour: docs/guides/windows-and-schedules.md.
"""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import stores
from scheduler.cli.output import OutputOption

windows_app = typer.Typer(help="Service windows and freeze periods: when hosts may be worked on.",
                          no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="The window's name.")]


def _warn(warning: str | None) -> None:
    if warning:
        output.info(f"warning: {warning}")


@windows_app.command("add", epilog="""Examples:

  fleetsched windows add sun-night --rrule 'FREQ=WEEKLY;BYDAY=SU;BYHOUR=1' --duration 3h --tz Europe/Berlin

  fleetsched windows add acme-weekly --cron '0 22 * * SAT' --end-time 02:00 --tz America/New_York --requires-approval

  fleetsched windows add dc-move --start 2026-12-05T20:00 --end 2026-12-06T04:00 --tz Europe/Berlin

  fleetsched windows add year-end --freeze --start 2026-12-20T00:00 --end 2027-01-04T00:00
""")
def add_cmd(
    ctx: typer.Context, name: Name,
    rrule: Annotated[str | None, typer.Option("--rrule", help="RFC 5545 RRULE for the openings' starts.")] = None,
    cron: Annotated[str | None, typer.Option("--cron", help="Cron expression for the openings' starts.")] = None,
    duration: Annotated[str | None, typer.Option("--duration", help="Length of each opening (4h, 90m).")] = None,
    end_time: Annotated[str | None, typer.Option("--end-time", help="Wall-clock end HH:MM in --tz (instead of --duration).")] = None,
    start: Annotated[str | None, typer.Option("--start", help="One-off start, or a rule's anchor (ISO; without offset: in --tz).")] = None,
    end: Annotated[str | None, typer.Option("--end", help="One-off end, or the last start of a rule (ISO).")] = None,
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone of the window.")] = "UTC",
    freeze: Annotated[bool, typer.Option("--freeze", help="A freeze period: nothing runs inside it.")] = False,
    requires_approval: Annotated[bool, typer.Option("--requires-approval", help="Unused until `windows approve`.")] = False,
    description: Annotated[str | None, typer.Option("--description", help="Free text.")] = None,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Add a recurring or one-off window (or a freeze period); nothing is written if it is invalid."""
    from scheduler.windows.store import WindowSpec, add_window

    spec = WindowSpec(name=name, tz=tz, rrule=rrule, cron=cron, duration=duration,
                      end_time=end_time, start=start, end=end, freeze=freeze,
                      requires_approval=requires_approval, description=description)
    with stores(ctx) as (engine, connect, keys, operator):
        summary, warning = add_window(engine, connect, spec, operator=operator, keys=keys)
    if fmt is not output.OutputFormat.table:
        output.emit_object(summary, fmt)
    _warn(warning)
    nxt = summary["next_open_utc"]
    output.info(f"window {name} added ({summary['kind']}); next opening "
                f"{nxt.isoformat() if nxt else 'none'}"
                + ("; unused until approved (fleetsched windows approve)" if requires_approval else ""))


@windows_app.command("list", epilog="Example:\n\n  fleetsched windows list -o json")
def list_cmd(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """List windows: rule, length, zone, approval, assignments, next opening."""
    from scheduler.record.session import transaction
    from scheduler.windows.store import LIST_COLUMNS, list_windows

    with stores(ctx) as (engine, _c, _k, _o), transaction(engine, commit=False) as session:
        rows = list_windows(session)
    output.emit_rows(rows, LIST_COLUMNS, fmt)


@windows_app.command("show", epilog="Example:\n\n  fleetsched windows show sun-night")
def show_cmd(ctx: typer.Context, name: Name, fmt: OutputOption = output.OutputFormat.table) -> None:
    """One window: definition, approval, assignments, next openings."""
    from scheduler.record.session import transaction
    from scheduler.windows.store import show_window

    with stores(ctx) as (engine, _c, _k, _o), transaction(engine, commit=False) as session:
        info = show_window(session, name)
    if fmt is not output.OutputFormat.table:
        output.emit_object(info, fmt)
        return
    output.emit_object({k: (", ".join(v) if isinstance(v, list) and k == "assigned" else v)
                        for k, v in info.items() if k != "next"}, fmt)
    output.emit_rows(info["next"], ["start_local", "end_local", "tz", "start_utc", "end_utc"],
                     fmt, title="next openings")


@windows_app.command("assign", epilog="Examples:\n\n  fleetsched windows assign sun-night --group customer-acme\n\n"
                                      "  fleetsched windows assign dc-move --host db-01 --host db-02")
def assign_cmd(
    ctx: typer.Context, name: Name,
    host: Annotated[list[str] | None, typer.Option("--host", help="A host (repeatable).")] = None,
    group: Annotated[list[str] | None, typer.Option("--group", help="A group (repeatable).")] = None,
) -> None:
    """Assign a window to hosts or groups (a host's own assignment beats its groups')."""
    from scheduler.windows.freezes import push_or_warn
    from scheduler.windows.store import assign_window

    with stores(ctx) as (engine, connect, keys, operator):
        added = assign_window(engine, name, hosts=host or [], groups=group or [], operator=operator)
        warning = push_or_warn(engine, connect, keys)  # a freeze holds queued jobs at once
    _warn(warning)
    output.info(f"window {name}: {added} new assignments (by {operator})")


@windows_app.command("unassign", epilog="Examples:\n\n  fleetsched windows unassign sun-night --group customer-acme\n\n"
                                        "  fleetsched windows unassign dc-move --host db-01")
def unassign_cmd(
    ctx: typer.Context, name: Name,
    host: Annotated[list[str] | None, typer.Option("--host", help="A host (repeatable).")] = None,
    group: Annotated[list[str] | None, typer.Option("--group", help="A group (repeatable).")] = None,
) -> None:
    """Remove a window's assignment to hosts or groups (jobs already queued keep their window)."""
    from scheduler.windows.freezes import push_or_warn
    from scheduler.windows.store import unassign_window

    with stores(ctx) as (engine, connect, keys, operator):
        removed, warning = unassign_window(engine, connect, name, hosts=host or [],
                                           groups=group or [], operator=operator, keys=keys)
        warning = warning or push_or_warn(engine, connect, keys)
    _warn(warning)
    output.info(f"window {name}: {removed} assignments removed (by {operator})")


@windows_app.command("approve", epilog="Example:\n\n  fleetsched --as alice windows approve acme-weekly")
def approve_cmd(ctx: typer.Context, name: Name) -> None:
    """Record a customer's approval (who and when); jobs may run in the window from now on."""
    from scheduler.windows.store import approve_window

    with stores(ctx) as (engine, connect, keys, operator):
        when, warning = approve_window(engine, connect, name, operator=operator, keys=keys)
    _warn(warning)
    output.info(f"window {name} approved by {operator} at {when.isoformat()}")


@windows_app.command("remove", epilog="Example:\n\n  fleetsched windows remove dc-move")
def remove_cmd(ctx: typer.Context, name: Name) -> None:
    """Remove a window and its assignments (queued jobs naming it wait; cancel them)."""
    from scheduler.windows.freezes import push_or_warn
    from scheduler.windows.store import remove_window

    with stores(ctx) as (engine, connect, keys, operator):
        _warn(remove_window(engine, connect, name, operator=operator, keys=keys)
              or push_or_warn(engine, connect, keys))
    output.info(f"window {name} removed")


@windows_app.command("next", epilog="Example:\n\n  fleetsched windows next sun-night --count 5 -o json")
def next_cmd(ctx: typer.Context, name: Name,
             count: Annotated[int, typer.Option("--count", "-n", help="How many openings.")] = 5,
             fmt: OutputOption = output.OutputFormat.table) -> None:
    """The next openings, in the window's zone and in UTC (approved or not)."""
    from scheduler.record.session import transaction
    from scheduler.windows.store import next_openings

    with stores(ctx) as (engine, _c, _k, _o), transaction(engine, commit=False) as session:
        rows = next_openings(session, name, count)
    output.emit_rows(rows, ["start_local", "end_local", "tz", "start_utc", "end_utc"], fmt)


@windows_app.command("sync", epilog="Example:\n\n  fleetsched windows sync")
def sync_cmd(ctx: typer.Context) -> None:
    """Copy every window definition into Redis again (after Redis lost them)."""
    from scheduler.errors import RedisUnavailableError
    from scheduler.windows.freezes import push_or_warn
    from scheduler.windows.store import sync_windows

    with stores(ctx) as (engine, connect, keys, _o):
        n, warning = sync_windows(engine, connect, keys)
        warning = warning or push_or_warn(engine, connect, keys)
    if warning:
        raise RedisUnavailableError(warning)
    output.info(f"{n} window definitions copied to Redis")
