"""``fleetsched tokens create|list|revoke``: the HTTP API's bearer tokens.

Thin: parse, call one verb of ``scheduler.verbs.tokens``, render through
``scheduler.cli.output``. ``create`` prints the token alone on stdout, once; the record keeps
only its hash. Guide: docs/guides/server.md.
"""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs
from scheduler.cli.output import OutputOption

tokens_app = typer.Typer(help="API tokens for `fleetsched server`: create, list, revoke.",
                         no_args_is_help=True)


@tokens_app.command("create", epilog="""Examples:

  fleetsched tokens create ci-deploy --role operator --expires 90d

  fleetsched tokens create dashboard --role viewer --owner grafana
""")
def create_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="What the token is for (free text).")],
    role: Annotated[str, typer.Option("--role", help="viewer, operator, window-admin, admin, customer-viewer or customer-approver.")],
    tenant: Annotated[str | None, typer.Option("--tenant", help="The customer the token is scoped to (customer roles need one).")] = None,
    owner: Annotated[str | None, typer.Option("--owner", help="Who the token acts as, recorded on its changes (default: you).")] = None,
    expires: Annotated[str | None, typer.Option("--expires", help="Valid for this long (90d, 12h); default: until revoked.")] = None,
) -> None:
    """Create a token and print it on stdout, once: the record keeps only its hash."""
    from scheduler.parse import parse_duration

    lifetime = parse_duration(expires, "--expires") if expires else None
    tokens, stores, principal = verbs(ctx, "tokens")
    made = tokens.create(stores, principal, name, role=role, owner=owner, tenant=tenant,
                         expires=lifetime)
    output.emit_line(made.token)
    until = made.expires_at.isoformat() if made.expires_at else "until revoked"
    output.info(f"token {made.id} ({made.name}) acts as {made.owner} with role {made.role}"
                + (f" for tenant {made.tenant}" if made.tenant else "")
                + f"; valid {until}. It is shown only now: store it in a secret manager.")


@tokens_app.command("list", epilog="Example:\n\n  fleetsched tokens list -o json")
def list_cmd(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """List tokens (never their secrets): owner, role, tenant, prefix, times."""
    from scheduler.access.tokens import LIST_COLUMNS

    tokens, stores, principal = verbs(ctx, "tokens")
    output.emit_rows(tokens.list_(stores, principal), LIST_COLUMNS, fmt)


@tokens_app.command("revoke", epilog="Example:\n\n  fleetsched tokens revoke 1")
def revoke_cmd(
    ctx: typer.Context,
    token_id: Annotated[int, typer.Argument(metavar="ID", help="The token's id (tokens list).")],
) -> None:
    """Revoke a token: the next request that shows it is refused."""
    tokens, stores, principal = verbs(ctx, "tokens")
    row = tokens.revoke(stores, principal, token_id)
    output.info(f"token {row['id']} ({row['name']}) revoked at {row['revoked_at'].isoformat()}")
