"""``fleetsched status``: a one-shot health summary of the running system.

Thin: ``scheduler.verbs.status.status`` does the checks; this renders them (a table, or
``--output json|csv``) and exits 1 when any check failed (warnings keep exit code 0).
"""

from __future__ import annotations

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs
from scheduler.cli.findings import render_findings
from scheduler.cli.output import OutputOption

EPILOG = """Examples:

  fleetsched status

  fleetsched status --output json | jq '.healthy'

Exit codes: 0 healthy (warnings allowed), 1 a check failed.
"""


def status(
    ctx: typer.Context,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Health of Redis, the queue's identity, the database, workers, recorder lag, overdue jobs
    and stuck tasks."""
    from scheduler.health.checks import healthy
    checks, stores, _principal = verbs(ctx, "status")
    findings = checks.status(stores)
    render_findings(findings, fmt)
    if not healthy(findings):
        failed = [f.check for f in findings if f.level == "fail"]
        output.info(f"unhealthy: {', '.join(dict.fromkeys(failed))}")
        raise typer.Exit(1)
