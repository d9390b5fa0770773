"""``fleetsched windows add|freeze|edit|list|show|assign|unassign|approve|deny|revoke|remove|next|sync``:
service windows.

Thin: parse, call one verb of ``scheduler.verbs.windows`` (in remote mode
``scheduler.remote.windows``; ``sync`` is direct only), render through ``scheduler.cli.output``.
Rules and DST behaviour: docs/guides/windows-and-schedules.md.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs, verbs_of
from scheduler.cli.output import OutputOption

windows_app = typer.Typer(help="Service windows and freeze periods: when hosts may be worked on.",
                          no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="The window's name.")]
IfVersion = Annotated[int | None, typer.Option(
    "--if-version", help="Only if the window is still at this version (see `windows show`).")]


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
    from scheduler.windows.store import WindowSpec

    spec = WindowSpec(name=name, tz=tz, rrule=rrule, cron=cron, duration=duration,
                      end_time=end_time, start=start, end=end, freeze=freeze,
                      requires_approval=requires_approval, description=description)
    windows, stores, principal = verbs(ctx, "windows")
    done = windows.add(stores, principal, spec)
    if fmt is not output.OutputFormat.table:
        output.emit_object(done.as_dict(), fmt)
    _notes(done.notes)
    nxt = done.next_open_utc
    output.info(f"window {name} added ({done.kind}); next opening "
                f"{nxt.isoformat() if nxt else 'none'}"
                + ("; unused until approved (fleetsched windows approve)" if requires_approval else ""))


@windows_app.command("freeze", epilog="Example:\n\n  fleetsched windows freeze acme-quarter-close --start 2026-12-20T00:00 "
                                      "--end 2027-01-04T00:00 --tz Europe/Berlin --group customer-acme")
def freeze_cmd(
    ctx: typer.Context, name: Name,
    start: Annotated[str, typer.Option("--start", help="When it begins (ISO; without offset: in --tz).")],
    end: Annotated[str, typer.Option("--end", help="When it ends (ISO).")],
    tz: Annotated[str, typer.Option("--tz", help="IANA time zone of --start and --end.")] = "UTC",
    host: Annotated[list[str] | None, typer.Option("--host", help="A host (repeatable).")] = None,
    group: Annotated[list[str] | None, typer.Option("--group", help="A group (repeatable).")] = None,
    description: Annotated[str | None, typer.Option("--description", help="Free text.")] = None,
) -> None:
    """Declare a freeze over hosts or groups at once (nothing runs on them inside it)."""
    windows, stores, principal = verbs(ctx, "windows")
    done = windows.freeze(stores, principal, name, start=start, end=end, tz=tz, hosts=host,
                          groups=group, description=description)
    _notes(done.notes)
    output.info(f"freeze {done.name} declared by {done.by}")


@windows_app.command("edit", epilog="Example:\n\n  fleetsched windows edit sun-night --duration 5h")
def edit_cmd(
    ctx: typer.Context, name: Name,
    rrule: Annotated[str | None, typer.Option("--rrule", help="A new RRULE (replaces a cron rule).")] = None,
    cron: Annotated[str | None, typer.Option("--cron", help="A new cron rule (replaces an RRULE).")] = None,
    duration: Annotated[str | None, typer.Option("--duration", help="A new length (replaces an end time).")] = None,
    end_time: Annotated[str | None, typer.Option("--end-time", help="A new wall-clock end (replaces a length).")] = None,
    start: Annotated[str | None, typer.Option("--start", help="A new start or anchor (ISO).")] = None,
    end: Annotated[str | None, typer.Option("--end", help="A new end (ISO).")] = None,
    tz: Annotated[str | None, typer.Option("--tz", help="A new IANA time zone.")] = None,
    requires_approval: Annotated[bool | None, typer.Option("--requires-approval/--no-requires-approval", help="Whether its hosts' owners must approve it.")] = None,
    description: Annotated[str | None, typer.Option("--description", help="New free text.")] = None,
    if_version: IfVersion = None,
) -> None:
    """Change a window's definition: a new version, which every party must approve again."""
    given = {"rrule": rrule, "cron": cron, "duration": duration, "end_time": end_time,
             "start": start, "end": end, "tz": tz, "requires_approval": requires_approval,
             "description": description}
    windows, stores, principal = verbs(ctx, "windows")
    done = windows.edit(stores, principal, name, version=if_version,
                        **{k: v for k, v in given.items() if v is not None})
    _notes(done.notes)
    output.info(f"window {name}: version {done.count} (by {done.by}); its approvals start again")


@windows_app.command("list", epilog="Example:\n\n  fleetsched windows list -o json")
def list_cmd(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """List windows: rule, length, zone, approval, assignments, next opening."""
    from scheduler.windows.store import LIST_COLUMNS

    windows, stores, _principal = verbs(ctx, "windows")
    output.emit_rows(windows.list_(stores), LIST_COLUMNS, fmt)


@windows_app.command("show", epilog="Example:\n\n  fleetsched windows show sun-night")
def show_cmd(ctx: typer.Context, name: Name, fmt: OutputOption = output.OutputFormat.table) -> None:
    """One window: definition, approval, assignments, next openings."""
    windows, stores, _principal = verbs(ctx, "windows")
    info = windows.show(stores, name)
    if fmt is not output.OutputFormat.table:
        output.emit_object(info, fmt)
        return
    output.emit_object({k: (", ".join(v) if isinstance(v, list) else v)
                        for k, v in info.items() if k not in ("next", "decisions")}, fmt)
    if info["decisions"]:
        output.emit_rows(info["decisions"], ["version", "party", "decision", "occurrence", "by",
                                             "at", "comment", "expires_at", "revoked_at"],
                         fmt, title="decisions")
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
    windows, stores, principal = verbs(ctx, "windows")
    done = windows.assign(stores, principal, name, hosts=host, groups=group)
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
    windows, stores, principal = verbs(ctx, "windows")
    done = windows.unassign(stores, principal, name, hosts=host, groups=group)
    _notes(done.notes)
    output.info(f"window {name}: {done.count} assignments removed (by {done.by})")


Comment = Annotated[str | None, typer.Option("--comment", help="Why, for the record.")]
Occurrence = Annotated[str | None, typer.Option(
    "--occurrence", help="Only the opening starting then (ISO; naive: the window's zone).")]


@windows_app.command("approve", epilog="Examples:\n\n  fleetsched --as carol windows approve acme-weekly\n\n"
                                       "  fleetsched --as carol windows approve acme-weekly --comment 'ok for December' --expires 30d")
def approve_cmd(ctx: typer.Context, name: Name, comment: Comment = None,
                occurrence: Occurrence = None,
                expires: Annotated[str | None, typer.Option(
                    "--expires", help="The approval lapses: after a duration (30d) or at a time.")] = None,
                if_version: IfVersion = None,
                fmt: OutputOption = output.OutputFormat.table) -> None:
    """Approve a window's current version for your party (a customer, or the team); jobs run
    in it once every party approved."""
    windows, stores, principal = verbs(ctx, "windows")
    _decided(windows.approve(stores, principal, name, comment=comment, occurrence=occurrence,
                             expires=expires, version=if_version), fmt)


@windows_app.command("deny", epilog="Example:\n\n  fleetsched windows deny acme-weekly --comment 'quarter close'")
def deny_cmd(ctx: typer.Context, name: Name,
             comment: Annotated[str, typer.Option("--comment", help="Why (required).")],
             occurrence: Occurrence = None, if_version: IfVersion = None,
             fmt: OutputOption = output.OutputFormat.table) -> None:
    """Deny a window's current version for your party: no job runs in it until approved."""
    windows, stores, principal = verbs(ctx, "windows")
    _decided(windows.deny(stores, principal, name, comment=comment, occurrence=occurrence,
                          version=if_version), fmt)


@windows_app.command("revoke", epilog="Example:\n\n  fleetsched windows revoke acme-weekly")
def revoke_cmd(ctx: typer.Context, name: Name,
               fmt: OutputOption = output.OutputFormat.table) -> None:
    """Revoke your party's approval of a window: no job starts in it from now on."""
    windows, stores, principal = verbs(ctx, "windows")
    _decided(windows.revoke(stores, principal, name), fmt)


def _decided(done: Any, fmt: output.OutputFormat) -> None:
    _notes(done.notes)
    if fmt != output.OutputFormat.table:
        output.emit_object(done.as_dict(), fmt)
        return
    who = "the team" if done.party is None else f"customer {done.party}"
    output.info(f"window {done.window}: {done.decision} for {who} by {done.by} "
                f"(version {done.version}); now {done.approval}")


@windows_app.command("remove", epilog="Example:\n\n  fleetsched windows remove dc-move")
def remove_cmd(ctx: typer.Context, name: Name) -> None:
    """Remove a window and its assignments (queued jobs naming it wait; cancel them)."""
    windows, stores, principal = verbs(ctx, "windows")
    _notes(windows.remove(stores, principal, name).notes)
    output.info(f"window {name} removed")


@windows_app.command("next", epilog="Example:\n\n  fleetsched windows next sun-night --count 5 -o json")
def next_cmd(ctx: typer.Context, name: Name,
             count: Annotated[int, typer.Option("--count", "-n", help="How many openings.")] = 5,
             fmt: OutputOption = output.OutputFormat.table) -> None:
    """The next openings, in the window's zone and in UTC (approved or not)."""
    windows, stores, _principal = verbs(ctx, "windows")
    output.emit_rows(windows.next_(stores, name, count),
                     ["start_local", "end_local", "tz", "start_utc", "end_utc"], fmt)


@windows_app.command("sync", epilog="Example:\n\n  fleetsched windows sync")
def sync_cmd(ctx: typer.Context) -> None:
    """Copy every window definition into Redis again (after Redis lost them)."""
    from scheduler.verbs.windows import sync

    stores, _principal = verbs_of(ctx)
    output.info(f"{sync(stores)} window definitions copied to Redis")
