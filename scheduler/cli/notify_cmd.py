"""``fleetsched notify test|list``: try the notification targets; show the outbox.

Thin: ``test`` builds the policy from the settings (``scheduler.notify.Policy``) and sends one
test notice per target now (``scheduler.notify.send``), outside the outbox; ``list`` reads the
outbox (``scheduler.notify.list_notifications``). Rules: docs/guides/notifications.md.
"""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import database, state
from scheduler.cli.output import OutputOption

notify_app = typer.Typer(help="Notifications: webhooks and mail when tasks fail or schedules miss.",
                         no_args_is_help=True)

LIST_COLUMNS = ["id", "kind", "state", "target", "task", "schedule", "attempts", "next_at",
                "last_error"]


@notify_app.command("test", epilog="""Examples:

  fleetsched notify test

  fleetsched notify test https://hooks.slack.com/services/T0/B0/XXXX

  FLEETSCHED_SMTP_HOST=mail.example.org fleetsched notify test mailto:ops@example.org

Exit codes: 0 every target took the test notice, 1 some did not (the reason is printed), 2 a
bad target or no target at all.
""")
def test_cmd(
    ctx: typer.Context,
    targets: Annotated[list[str] | None, typer.Argument(help="Webhook URLs or mailto:ADDRESS (default: the notify setting).")] = None,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Send a test notice to each target now (default: the global notify targets)."""
    from scheduler.errors import ValidationError
    from scheduler.notify import DeliveryError, Policy, parse_targets, payload, send

    settings = state(ctx).settings
    policy = Policy.from_settings(settings)
    chosen = parse_targets(targets) if targets else policy.targets
    if not chosen:
        raise ValidationError("no notify target to test",
                              hint="give one (fleetsched notify test mailto:ops@example.org) or "
                                   "set notify in the config file")
    doc = payload("test", operator=settings.operator)
    rows, failed = [], 0
    for target in chosen:
        try:
            send(target, doc, policy.smtp)
            rows.append({"target": target.shown, "result": "sent", "error": None})
        except DeliveryError as exc:
            failed += 1
            rows.append({"target": target.shown, "result": "failed", "error": str(exc)})
            output.error(f"{target.shown}: {exc}")
    output.emit_rows(rows, ["target", "result", "error"], fmt)
    if failed:
        output.info(f"{failed} of {len(rows)} targets did not take the test notice")
        raise typer.Exit(1)


@notify_app.command("list", epilog="""Examples:

  fleetsched notify list

  fleetsched notify list --state pending -o json
""")
def list_cmd(
    ctx: typer.Context,
    state_: Annotated[str | None, typer.Option("--state", help="Only pending, sent or failed.")] = None,
    limit: Annotated[int, typer.Option("--limit", help="Newest rows shown.", min=1, max=10_000)] = 50,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """The outbox: notices pending, sent and given up, newest first."""
    from scheduler.notify import list_notifications

    with database(ctx) as (engine, _operator):
        rows = list_notifications(engine, state=state_, limit=limit)
    output.emit_rows(rows, LIST_COLUMNS if fmt is output.OutputFormat.table
                     else [*LIST_COLUMNS, "created_at", "sent_at", "text"], fmt)
