"""Health findings on stdout, as ``status`` and ``doctor`` both show them: a table of level,
check and message with a ``hint:`` line under each finding that has one, or JSON/CSV rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from scheduler.cli import output

if TYPE_CHECKING:
    from scheduler.health.checks import Finding

STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red"}


def render_findings(findings: list[Finding], fmt: output.OutputFormat,
                    extra: dict | None = None) -> None:
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
