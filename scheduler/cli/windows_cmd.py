"""``fleetsched windows add|list|show|assign|unassign|approve|remove|next|sync``: service windows.

Thin: parse, call one verb of ``scheduler.verbs.windows``, render through
``scheduler.cli.output``.
Rules and DST behaviour: docs/guides/windows-and-schedules.md.
"""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs_of
from scheduler.cli.output import OutputOption

windows_app = typer.Typer(help="Service windows and freeze periods: when hosts may be worked on.",
                          no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="The window's name.")]


def _notes(lines: list[str]) -> None:
    for line in lines:
        output.info(line)


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
    from scheduler.verbs.windows import add
    from scheduler.windows.store import WindowSpec

    spec = WindowSpec(name=name, tz=tz, rrule=rrule, cron=cron, duration=duration,
                      end_time=end_time, start=start, end=end, freeze=freeze,
                      requires_approval=requires_approval, description=description)
    done = add(*verbs_of(ctx), spec)
    if fmt is not output.OutputFormat.table:
        output.emit_object(done.as_dict(), fmt)
    _notes(done.notes)
    nxt = done.next_open_utc
    output.info(f"window {name} added ({done.kind}); next opening "
                f"{nxt.isoformat() if nxt else 'none'}"
                + ("; unused until approved (fleetsched windows approve)" if requires_approval else ""))


@windows_app.command("list", epilog="Example:\n\n  fleetsched windows list -o json")
def list_cmd(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """List windows: rule, length, zone, approval, assignments, next opening."""
    from scheduler.verbs.windows import list_
    from scheduler.windows.store import LIST_COLUMNS

    stores, _principal = verbs_of(ctx)
    output.emit_rows(list_(stores), LIST_COLUMNS, fmt)


@windows_app.command("show", epilog="Example:\n\n  fleetsched windows show sun-night")
def show_cmd(ctx: typer.Context, name: Name, fmt: OutputOption = output.OutputFormat.table) -> None:
    """One window: definition, approval, assignments, next openings."""
    from scheduler.verbs.windows import show

    stores, _principal = verbs_of(ctx)
    info = show(stores, name)
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
    from scheduler.verbs.windows import assign

    done = assign(*verbs_of(ctx), name, hosts=host, groups=group)
    _notes(done.notes)
    output.info(f"window {name}: {done.count} new assignments (by {done.by})")


@windows_app.command("unassign", epilog="Examples:\n\n  fleetsched windows unassign sun-night --group customer-acme\n\n"
                                        "  fleetsched windows unassign dc-move --host db-01")
def unassign_cmd(
    ctx: typer.Context, name: Name,
    host: Annotated[list[str] | None, typer.Option("--host", help="A host (repeatable).")] = None,
    group: Annotated[list[str] | None, typer.Option("--group", help="A group (repeatable).")] = None,
) -> None:
    """Remove a window's assignment to hosts or groups (jobs already queued keep their window)."""
    from scheduler.verbs.windows import unassign

    done = unassign(*verbs_of(ctx), name, hosts=host, groups=group)
    _notes(done.notes)
    output.info(f"window {name}: {done.count} assignments removed (by {done.by})")


@windows_app.command("approve", epilog="Example:\n\n  fleetsched --as alice windows approve acme-weekly")
def approve_cmd(ctx: typer.Context, name: Name) -> None:
    """Record a customer's approval (who and when); jobs may run in the window from now on."""
    from scheduler.verbs.windows import approve

    done = approve(*verbs_of(ctx), name)
    _notes(done.notes)
    output.info(f"window {name} approved by {done.by} at {done.at.isoformat()}")


@windows_app.command("remove", epilog="Example:\n\n  fleetsched windows remove dc-move")
def remove_cmd(ctx: typer.Context, name: Name) -> None:
    """Remove a window and its assignments (queued jobs naming it wait; cancel them)."""
    from scheduler.verbs.windows import remove

    _notes(remove(*verbs_of(ctx), name).notes)
    output.info(f"window {name} removed")


@windows_app.command("next", epilog="Example:\n\n  fleetsched windows next sun-night --count 5 -o json")
def next_cmd(ctx: typer.Context, name: Name,
             count: Annotated[int, typer.Option("--count", "-n", help="How many openings.")] = 5,
             fmt: OutputOption = output.OutputFormat.table) -> None:
    """The next openings, in the window's zone and in UTC (approved or not)."""
    from scheduler.verbs.windows import next_

    stores, _principal = verbs_of(ctx)
    output.emit_rows(next_(stores, name, count), ["start_local", "end_local", "tz", "start_utc", "end_utc"], fmt)


@windows_app.command("sync", epilog="Example:\n\n  fleetsched windows sync")
def sync_cmd(ctx: typer.Context) -> None:
    """Copy every window definition into Redis again (after Redis lost them)."""
    from scheduler.verbs.windows import sync

    stores, _principal = verbs_of(ctx)
    output.info(f"{sync(stores)} window definitions copied to Redis")
