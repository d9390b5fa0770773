"""``fleetsched tenants list|set``: customers' settings (whether their windows need their
approval; whom to tell). Thin: parse, call ``scheduler.verbs.tenants``, render.
Guide: docs/guides/customer-approvals.md.
"""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs
from scheduler.cli.output import OutputOption

tenants_app = typer.Typer(help="Customers (tenants): their hosts, approvals and contacts.",
                          no_args_is_help=True)


@tenants_app.command("list", epilog="Example:\n\n  fleetsched tenants list -o json")
def list_cmd(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """List tenants: hosts, whether their windows need their approval, contacts."""
    from scheduler.tenants import LIST_COLUMNS

    tenants, stores, _principal = verbs(ctx, "tenants")
    output.emit_rows(tenants.list_(stores), LIST_COLUMNS, fmt)


@tenants_app.command("set", epilog="Example:\n\n  fleetsched tenants set acme --approval-required "
                                   "--contact mailto:change-board@acme.example")
def set_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The tenant (as the hosts' fleetsched_tenant).")],
    approval_required: Annotated[bool | None, typer.Option(
        "--approval-required/--no-approval-required",
        help="Every window over its hosts needs its approval.")] = None,
    contact: Annotated[list[str] | None, typer.Option(
        "--contact", help="Told when a window awaits its approval (repeatable; replaces the "
                          "list): a webhook URL or mailto:ADDRESS.")] = None,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Change a tenant's settings (recorded as a tenant-set event)."""
    tenants, stores, principal = verbs(ctx, "tenants")
    done = tenants.set_(stores, principal, name, approval_required=approval_required,
                        contacts=contact)
    for note in done["notes"]:
        output.info(note)
    if fmt is not output.OutputFormat.table:
        output.emit_object(done, fmt)
        return
    output.info(f"tenant {done['tenant']}: approval "
                f"{'required' if done['approval_required'] else 'not required'}; contacts: "
                f"{', '.join(done['contacts']) or 'none'}")
