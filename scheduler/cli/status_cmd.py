"""``fleetsched status``: a one-shot health summary of the running system.

Thin: ``scheduler.health.checks.status`` does the checks; this renders them (a table, or
``--output json|csv``) and exits 1 when any check failed (warnings keep exit code 0).
"""

from __future__ import annotations

import typer
from rich.table import Table
from rich.text import Text

from scheduler.cli import output
from scheduler.cli.context import state
from scheduler.cli.output import OutputOption

STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}

EPILOG = """Examples:

  fleetsched status

  fleetsched status --output json | jq '.healthy'

Exit codes: 0 healthy (warnings allowed), 1 a check failed.
"""


def render_findings(findings: list, fmt: output.OutputFormat, extra: dict | None = None) -> None:
    """Findings as a table (level, check, message, hint) or JSON/CSV rows on stdout."""
    from scheduler.health.checks import healthy

    rows = [f.as_dict() for f in findings]
    if fmt is output.OutputFormat.json:
        output.emit_object({"healthy": healthy(findings), **(extra or {}), "checks": rows}, fmt)
        return
    if fmt is output.OutputFormat.csv:
        output.emit_rows(rows, ["check", "level", "message", "hint"], fmt)
        return
    table = Table(show_edge=False, show_header=False, box=None, pad_edge=False)
    for _ in range(3):
        table.add_column()
    for f in findings:
        table.add_row(Text(f.level.upper(), style=STYLE.get(f.level, "")), Text(f.check),
                      Text(f.message))
        if f.hint:
            table.add_row(Text(""), Text(""), Text(f"hint: {f.hint}", style="dim"))
    output.stdout.print(table)


def status(
    ctx: typer.Context,
    fmt: OutputOption = output.OutputFormat.table,
) -> None:
    """Health of Redis, the queue's identity, the database, workers, recorder lag, overdue jobs
    and stuck tasks."""
    from scheduler.health.checks import healthy
    from scheduler.health.checks import status as run_status

    findings = run_status(state(ctx).settings)
    render_findings(findings, fmt)
    if not healthy(findings):
        failed = [f.check for f in findings if f.level == "fail"]
        output.info(f"unhealthy: {', '.join(dict.fromkeys(failed))}")
        raise typer.Exit(1)
