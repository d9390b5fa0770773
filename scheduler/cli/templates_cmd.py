"""``fleetsched templates add|list|show|run|remove``: saved job templates.

Thin: ``add`` reads the template file (a task file with ``{param.NAME}`` placeholders and the
``parameters`` declaring them) and hands its text to ``scheduler.verbs.templates`` (in remote
mode ``scheduler.remote.templates``); ``run`` passes the ``-p NAME=VALUE`` pairs to the verb,
which submits through the verb ``fleetsched submit`` calls, and shows the plan or the task as
``submit`` does. Rules: docs/guides/templates.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs
from scheduler.cli.output import OutputOption
from scheduler.errors import ValidationError

templates_app = typer.Typer(help="Saved job templates: named, versioned task files with typed "
                                 "parameters, run with values.", no_args_is_help=True)

Name = Annotated[str, typer.Argument(help="The template's name.")]
MAX_BYTES = 1 << 20


def _read(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"cannot read template file {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise ValidationError(f"{path}: larger than {MAX_BYTES} bytes; not a template file")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"{path}: not UTF-8 text (byte {exc.start})") from None


@templates_app.command("add", epilog="""Examples:

  fleetsched templates add restart-service --file restart-service.yaml --run-role operator

  fleetsched templates add disk-report --file disk-report.yaml --description 'df on any hosts'

Adding a name again with a changed file makes its next version; the same file makes none.
Exit codes: 0 added (or unchanged), 2 bad input (nothing written), 4 unknown action.
""")
def add_cmd(
    ctx: typer.Context, name: Name,
    file: Annotated[Path, typer.Option("--file", "-f", help="The template file: a task file with {param.NAME} placeholders and a parameters: mapping declaring them.")],
    run_role: Annotated[list[str] | None, typer.Option("--run-role", help="Only this role may run it through the server (repeatable; admin always may). Omitted: unchanged (a new template: every role that may run templates).")] = None,
    tenant: Annotated[str | None, typer.Option("--tenant", help="The customer it belongs to: only that customer's tokens see it, and it runs on its hosts only.")] = None,
    description: Annotated[str | None, typer.Option("--description", help="What it is for (shown by list and show).")] = None,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Add a template, or its next version when the file changed."""
    text = _read(file)
    templates, stores, principal = verbs(ctx, "templates")
    done = templates.add(stores, principal, name, text, source=str(file), tenant=tenant,
                         run_roles=run_role, description=description)
    if fmt is not output.OutputFormat.table:
        output.emit_object(done.as_dict(), fmt)
    if done.created:
        said = f"template {name} added: version 1"
    elif done.changed:
        said = f"template {name}: version {done.version} added"
    else:
        said = (f"template {name}: the file is unchanged from version {done.version}; "
                "no new version")
    if done.settings_changed:
        said += f" (run roles now {', '.join(done.run_roles) or 'any'})"
    output.info(f"{said}; parameters: {', '.join(done.parameters) or 'none'}")


@templates_app.command("list", epilog="Example:\n\n  fleetsched templates list -o json")
def list_cmd(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """List templates: newest version, action, parameters, who may run them, last run."""
    from scheduler.templates.store import LIST_COLUMNS

    templates, stores, _principal = verbs(ctx, "templates")
    output.emit_rows(templates.list_(stores), LIST_COLUMNS, fmt)


@templates_app.command("show", epilog="""Examples:

  fleetsched templates show restart-service

  fleetsched templates show restart-service --version 1 -o json
""")
def show_cmd(
    ctx: typer.Context, name: Name,
    version: Annotated[int | None, typer.Option("--version", min=1, max=2**31 - 1, help="This version (default: the newest).")] = None,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """One template: its file and parameters, who may run it, its versions and last runs."""
    templates, stores, _principal = verbs(ctx, "templates")
    info = templates.show(stores, name, version=version)
    if fmt is not output.OutputFormat.table:
        output.emit_object(info, fmt)
        return
    head = {k: v for k, v in info.items()
            if k not in ("parameters", "file", "versions", "runs")}
    head["run_roles"] = ", ".join(head["run_roles"]) or "any role that may run templates"
    head["schedules"] = ", ".join(head["schedules"]) or None
    output.emit_object(head, fmt)
    output.emit_rows(info["parameters"], ["name", "type", "required", "default", "choices",
                                          "description"], fmt, title="parameters")
    output.stdout.print(f"\nfile (version {info['version']}):")
    output.stdout.print(info["file"].rstrip("\n"))
    output.emit_rows(info["versions"], ["version", "created_by", "created_at"], fmt,
                     title="versions")
    output.emit_rows(info["runs"], ["task", "version", "operator", "created_at", "state",
                                    "total", "succeeded", "failed"], fmt, title="last runs")


@templates_app.command("run", epilog="""Examples:

  fleetsched templates run restart-service -p service=nginx -p hosts=group:web --dry-run

  fleetsched templates run restart-service -p service=nginx --yes

  fleetsched templates run restart-service@1 -p service=haproxy -p hosts=web-01 --wait --yes

Exit codes as `fleetsched submit`: 0 queued, 1 recorded but not queued, 2 bad input (an
unknown, missing or mistyped parameter: nothing written), 3 with --wait some hosts failed,
4 no such template, 5 declined; 403 through a server: the template names other run roles.
""")
def run_cmd(
    ctx: typer.Context,
    ref: Annotated[str, typer.Argument(metavar="NAME[@VERSION]", help="The template, its newest version unless pinned (NAME@3).")],
    param: Annotated[list[str] | None, typer.Option("--param", "-p", help="A template parameter NAME=VALUE (repeatable).")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; write and queue nothing.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Submit a fleet-wide task without asking.")] = False,
    idempotency_key: Annotated[str | None, typer.Option("--idempotency-key", metavar="KEY", help="As `submit --idempotency-key`: run again with the same KEY and the first task comes back.")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Block until the task ends (exit codes as `submit --wait`).")] = False,
    wait_timeout: Annotated[str | None, typer.Option("--wait-timeout", help="With --wait: give up after this long (exit code 1).")] = None,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Run a template: its parameters filled in, submitted as `fleetsched submit` would."""
    from scheduler.cli.submission_view import confirm
    from scheduler.submission.request import pairs

    values = pairs(param, "--param")
    templates, stores, principal = verbs(ctx, "templates")
    done = templates.run(stores, principal, ref, values, dry_run=dry_run,
                         confirm=lambda plan: confirm(plan, yes),
                         request_key=idempotency_key)
    _show(stores, done, fmt, idempotency_key)
    if wait and done.task_id is not None:
        from scheduler.cli.waiting import report_wait
        from scheduler.parse import parse_duration

        limit_s = parse_duration(wait_timeout, "--wait-timeout").total_seconds() \
            if wait_timeout else None
        raise typer.Exit(report_wait(stores, [str(done.task_id)], limit_s))


def _show(stores: Any, done: Any, fmt: output.OutputFormat, key: str | None) -> None:
    """What ``submit`` prints of a plan, a repeat or a submitted task."""
    from scheduler.cli.submission_view import show_plan, show_repeat, show_submitted, view

    if done.task_id is None:
        shown = view(done.plan, draw=True)
        show_plan(shown, fmt)
        output.info(f"dry run: {shown.blast_radius}; nothing was queued")
    elif done.repeat is not None:
        show_repeat(done.repeat, key or "", fmt)
    else:
        show_submitted(stores, done, fmt)


@templates_app.command("remove", epilog="Example:\n\n  fleetsched templates remove disk-report")
def remove_cmd(ctx: typer.Context, name: Name) -> None:
    """Remove a template and its versions (refused while a schedule fires it); the tasks run
    from it keep its name and version."""
    templates, stores, principal = verbs(ctx, "templates")
    versions = templates.remove(stores, principal, name)
    output.info(f"template {name} removed ({versions} version(s))")
