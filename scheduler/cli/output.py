"""The one place the CLI writes to the terminal.

Data (tables, JSON, CSV) goes to stdout; messages, progress and errors go to stderr. User data
is printed with markup and emoji codes off, so a host's output can never be read as rich markup
or have ``:name:`` turned into a picture. ``NO_COLOR`` is honoured by rich itself.

Every table cell, key/value line, data line (:func:`emit_line`), message and error passes
through :func:`scheduler.visible.visible`: a control character a host or an operator sent (an
escape sequence, a carriage return, a C1 control) is shown as ``cat -v`` shows it, never sent to
the terminal (rich itself lets ESC through). JSON and CSV are data and stay intact.

When stdout is not a terminal (a pipe, a file, a CI log) tables are plain columns: every value
whole, on one line, no ellipsis and no box characters (:func:`emit_rows`), and any other rich
table is laid out as wide as its content (:class:`_DataConsole`), never cut to 80 columns.
"""

from __future__ import annotations

import csv
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from enum import Enum
from typing import Annotated, Any

import typer
from rich.console import Console, Group
from rich.table import Table

from scheduler.visible import visible

# How wide a table may grow when stdout is not a terminal: wide enough for any value.
PIPE_WIDTH = 100_000


class _DataConsole(Console):
    """stdout's console: outside a terminal, a table is laid out at its natural width (rich
    would otherwise squeeze it to 80 columns and cut values with an ellipsis)."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        tables = [t for o in objects for t in _tables(o)]
        if self.is_terminal or not tables:
            super().print(*objects, **kwargs)
            return
        for table in tables:
            table.expand = False
        saved, self.width = self._width, PIPE_WIDTH
        try:
            super().print(*objects, **kwargs)
        finally:
            self._width = saved


def _tables(renderable: Any) -> list[Table]:
    """The tables in a renderable: itself, or those of a ``Group`` (``top --once``'s frame)."""
    if isinstance(renderable, Table):
        return [renderable]
    if isinstance(renderable, Group):
        return [t for r in renderable.renderables for t in _tables(r)]
    return []


stdout = _DataConsole(markup=False, highlight=False, emoji=False, soft_wrap=True)
stderr = Console(stderr=True, markup=False, highlight=False, emoji=False, soft_wrap=True)


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
    """Print rows as a table, a JSON list or CSV, on stdout (a table's cells with control
    characters shown; JSON and CSV intact)."""
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
    if not stdout.is_terminal:
        _plain_columns([[str(c) for c in columns], *[_cells(r, columns) for r in rows]], title)
        return
    table = Table(title=title, show_edge=False, header_style="bold")
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*_cells(r, columns))
    stdout.print(table)


def _cells(row: Mapping[str, Any], columns: Sequence[str]) -> list[str]:
    return ["" if row.get(c) is None else visible(str(_plain(row.get(c)))) for c in columns]


def _plain_columns(lines: list[list[str]], title: str | None) -> None:
    """Space-aligned columns with every value whole (a newline inside a value is shown as
    ``\\n``, so each row stays one line); no trailing blanks."""
    lines = [[cell.replace("\n", "\\n") for cell in line] for line in lines]
    widths = [max(len(line[i]) for line in lines) for i in range(len(lines[0]))] if lines else []
    out = [title] if title else []
    for line in lines:
        out.append("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip())
    sys.stdout.write("".join(f"{line}\n" for line in out))


def emit_object(obj: Mapping[str, Any], fmt: OutputFormat = OutputFormat.table) -> None:
    """Print one record: key/value lines (control characters shown), or a JSON object."""
    if fmt is OutputFormat.json:
        sys.stdout.write(json.dumps(_plain(dict(obj)), indent=2) + "\n")
        return
    if fmt is OutputFormat.csv:
        emit_rows([obj], list(obj.keys()), fmt)
        return
    width = max((len(k) for k in obj), default=0)
    for k, v in obj.items():
        stdout.print(visible(f"{k.ljust(width)}  {'' if v is None else _plain(v)}"))


def emit_line(text: str) -> None:
    """One line of data on stdout (a job's heading, a line a host printed), control characters
    shown."""
    stdout.out(visible(text))


def emit_text(text: str) -> None:
    """A whole document (an inventory file, say) on stdout exactly as given: a data file, like
    JSON and CSV."""
    sys.stdout.write(text)
    sys.stdout.flush()


def info(message: str) -> None:
    """A message for the operator (stderr), control characters shown."""
    stderr.print(visible(message))


def service_info(logger: str, message: str) -> None:
    """A start or stop line of a serving command (worker, exporter): a log line when its log
    is JSON (``scheduler.logs.announce``: no line of another shape in it), else :func:`info`."""
    from scheduler.logs import announce

    if not announce(logger, message):
        info(message)


def error(message: str, hint: str | None = None) -> None:
    """One line saying what is wrong, then a ``hint:`` line saying what to do (stderr), control
    characters shown."""
    stderr.print(visible(f"error: {message}"))
    if hint:
        stderr.print(visible(f"hint: {hint}"))
