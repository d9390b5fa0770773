"""The one place the CLI writes to the terminal.

Data (tables, JSON, CSV) goes to stdout; messages, progress and errors go to stderr. User data
is printed with markup off, so a host's output can never be read as rich markup. ``NO_COLOR``
is honoured by rich itself.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

stdout = Console(markup=False, highlight=False, soft_wrap=True)
stderr = Console(stderr=True, markup=False, highlight=False, soft_wrap=True)


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


# The --output option every listing command takes.
OutputOption = Annotated[OutputFormat, typer.Option("--output", "-o", help="table, json or csv")]


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_plain(v) for v in value]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def emit_rows(
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[str],
    fmt: OutputFormat = OutputFormat.table,
    title: str | None = None,
) -> None:
    """Print rows as a table, a JSON list or CSV, on stdout."""
    rows = list(rows)
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps([_plain(dict(r)) for r in rows], indent=2) + "\n")
        return
    if fmt is OutputFormat.csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for r in rows:
            writer.writerow({c: _plain(r.get(c)) for c in columns})
        return
    table = Table(title=title, show_edge=False, header_style="bold")
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*["" if r.get(c) is None else str(_plain(r.get(c))) for c in columns])
    stdout.print(table)


def emit_object(obj: Mapping[str, Any], fmt: OutputFormat = OutputFormat.table) -> None:
    """Print one record: key/value lines, or a JSON object."""
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(_plain(dict(obj)), indent=2) + "\n")
        return
    if fmt is OutputFormat.csv:
        emit_rows([obj], list(obj.keys()), fmt)
        return
    width = max((len(k) for k in obj), default=0)
    for k, v in obj.items():
        stdout.print(f"{k.ljust(width)}  {'' if v is None else _plain(v)}")


def info(message: str) -> None:
    """A message for the operator (stderr)."""
    stderr.print(message)


def error(message: str, hint: str | None = None) -> None:
    """One line saying what is wrong, then a ``hint:`` line saying what to do (stderr)."""
    stderr.print(f"error: {message}")
    if hint:
        stderr.print(f"hint: {hint}")
