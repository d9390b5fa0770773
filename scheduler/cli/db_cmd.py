"""``fleetsched db upgrade|current|history|downgrade|prune``: the SQL system of record.

Thin commands over ``scheduler.record.migrate`` and ``scheduler.record.prune``. Database URLs are shown
only through ``redact_url``.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import state
from scheduler.cli.output import OutputOption

db_app = typer.Typer(help="The SQL database: schema migrations and retention.",
                     no_args_is_help=True)


def _settings(ctx: typer.Context):  # noqa: ANN202

    return state(ctx).settings


def _shown(url: str) -> str:
    from scheduler.redact import redact_url

    return redact_url(url)


@db_app.command()
def upgrade(ctx: typer.Context,
            revision: Annotated[str, typer.Argument(help="Target revision (default: the newest).")] = "head") -> None:
    """Create or upgrade the schema. Safe to run on several nodes at once."""
    from scheduler.record import migrate
    url = _settings(ctx).effective_database_url
    before = migrate.current(url)
    migrate.upgrade(url, revision)
    after = migrate.current(url)
    if before == after:
        output.info(f"database {_shown(url)} already at {after or 'base'}")
    else:
        output.info(f"database {_shown(url)} upgraded from {before or 'base'} to {after}")


@db_app.command()
def downgrade(
    ctx: typer.Context,
    revision: Annotated[str, typer.Argument(help="Target revision; 'base' drops every table.")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Downgrade the schema to REVISION (data in dropped tables or columns is lost)."""
    from scheduler.errors import DeclinedError
    from scheduler.record import migrate

    url = _settings(ctx).effective_database_url
    if not yes:
        if not sys.stdin.isatty():
            raise DeclinedError(f"downgrading {_shown(url)} to {revision} may drop data",
                                hint="pass --yes to confirm")
        typer.confirm(f"Downgrade {_shown(url)} to {revision}? Data may be lost", abort=True)
    before = migrate.current(url)
    migrate.downgrade(url, revision)
    output.info(f"database {_shown(url)} downgraded from {before or 'base'} "
                f"to {migrate.current(url) or 'base'}")


@db_app.command()
def current(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """Show the schema revision of the database and whether it is the newest."""
    from scheduler.record import migrate
    url = _settings(ctx).effective_database_url
    rev = migrate.current(url)
    head = migrate.head()
    output.emit_object({"database": _shown(url), "current": rev or "", "head": head,
                        "up_to_date": rev == head}, fmt)


@db_app.command()
def history(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """List the migrations this fleetsched ships, oldest first; '*' marks the database's."""
    from scheduler.record import migrate
    url = _settings(ctx).effective_database_url
    rows = [{"revision": r.revision, "down": r.down_revision or "", "created": r.created,
             "message": r.message, "current": "*" if r.is_current else "",
             "head": r.is_head} for r in migrate.history(url)]
    output.emit_rows(rows, ["revision", "down", "created", "message", "current"], fmt)


@db_app.command()
def prune(
    ctx: typer.Context,
    older_than: Annotated[str, typer.Option("--older-than", help="Age of what goes, e.g. 90d, 12h.")] = "90d",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only count what would go.")] = False,
    batch: Annotated[int, typer.Option(help="Rows per transaction.", min=1, max=100_000)] = 2_000,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Delete finished jobs, events and finished tasks older than --older-than, in batches."""
    from scheduler.errors import ValidationError
    from scheduler.parse import parse_duration
    from scheduler.record import migrate
    from scheduler.record.engine import engine_for
    from scheduler.record.prune import prune as run_prune

    age = parse_duration(older_than, "--older-than")
    if age.total_seconds() <= 0:
        raise ValidationError(f"--older-than must be positive, not {older_than!r}")
    settings = _settings(ctx)
    engine = engine_for(settings)
    try:
        migrate.ensure_schema(settings, engine)
        result = run_prune(engine, age, dry_run=dry_run, batch=batch)
    finally:
        engine.dispose()
    verb = "would delete" if dry_run else "deleted"
    output.emit_object({"cutoff": result.cutoff, "jobs": result.jobs, "events": result.events,
                        "tasks": result.tasks, "notifications": result.notifications,
                        "batches": result.batches, "dry_run": dry_run}, fmt)
    output.info(f"{verb} {result.jobs} jobs, {result.events} events, {result.tasks} tasks and "
                f"{result.notifications} notifications finished before "
                f"{result.cutoff:%Y-%m-%d %H:%M}Z"
                + ("" if dry_run else f", in {result.batches} transactions (the longest "
                   f"{result.longest_batch_s * 1000:.0f} ms)"))
