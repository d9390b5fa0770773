"""``fleetsched actions list|show``: the actions jobs can run, built-in and plugins.

Thin commands over :mod:`tasks.registry`. ``list`` prints one row per action (with its
parameter names); ``show NAME`` prints the declaration and every parameter (type, required,
default, secret, help). Plugins left out (failed to load, name clash) are reported on stderr.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from scheduler.cli import output
from scheduler.cli.output import OutputOption

actions_app = typer.Typer(help="The actions a task can run (built-in and plugins).",
                          no_args_is_help=True)


def _report_problems() -> None:
    from tasks.registry import registry

    for problem in registry().problems:
        output.info(f"warning: {problem}")


def _param_summary(params: list[dict[str, Any]]) -> str:
    return " ".join(p["name"] + ("" if p["required"] else "?") for p in params)


@actions_app.command("list")
def list_cmd(fmt: OutputOption = output.OutputFormat.table) -> None:
    """List every action: idempotent?, needs a window?, expected duration, parameters
    (``?`` marks an optional one); ``show NAME`` tells more."""
    from tasks.registry import describe_action, list_actions

    rows = [describe_action(a) for a in list_actions()]
    _report_problems()
    if fmt is output.OutputFormat.json:
        output.emit_rows(rows, list(rows[0]) if rows else [], fmt)
        return
    flat = [{"name": r["name"], "idempotent": "yes" if r["idempotent"] else "no",
             "window": "yes" if r["requires_window"] else "no",
             "expected": f"{r['expected_ms'] / 1000:g}s", "executor": r["default_executor"],
             "origin": r["origin"], "params": _param_summary(r["params"]),
             "description": r["description"]} for r in rows]
    columns = ["name", "idempotent", "window", "expected", "executor", "origin", "params"]
    output.emit_rows(flat, columns + (["description"] if fmt is output.OutputFormat.csv else []),
                     fmt)


@actions_app.command("show")
def show_cmd(name: Annotated[str, typer.Argument(help="the action, e.g. copy")],
             fmt: OutputOption = output.OutputFormat.table) -> None:
    """Show one action and all its parameters."""
    from tasks.registry import describe_action, get_action

    info = describe_action(get_action(name))
    _report_problems()
    if fmt is output.OutputFormat.json:
        output.emit_object(info, fmt)
        return
    if fmt is output.OutputFormat.csv:
        output.emit_rows(info["params"], ["name", "type", "required", "default", "secret", "help"],
                         fmt)
        return
    output.emit_object({k: v for k, v in info.items() if k != "params"}, fmt)
    output.stdout.print()
    output.emit_rows(info["params"], ["name", "type", "required", "default", "secret", "help"],
                     fmt, title="parameters")
