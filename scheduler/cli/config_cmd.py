"""``fleetsched config show``: the settings in effect and where each came from.

URLs are printed redacted; nothing else here can hold a secret.
"""

from __future__ import annotations

from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import state
from scheduler.config import load_settings_explained

config_app = typer.Typer(help="Inspect fleetsched's configuration.", no_args_is_help=True)


@config_app.command()
def show(
    ctx: typer.Context,
    fmt: Annotated[output.OutputFormat,
                   typer.Option("--output", "-o", help="table, json or csv")] = output.OutputFormat.table,
) -> None:
    """Show every setting (passwords masked) with its source: option, env, file or default."""

    st = state(ctx)
    settings, sources = load_settings_explained(st.overrides, config_path=st.config_path)
    values = settings.redacted()
    if fmt is output.OutputFormat.table:
        # key/value lines rather than a table: a table would cut long paths and URLs short.
        width = max(len(v) for v in values.values())
        output.emit_object({name: f"{values[name].ljust(width)}  ({sources[name]})"
                            for name in values})
        return
    rows = [{"setting": name, "value": values[name], "source": sources[name]} for name in values]
    output.emit_rows(rows, ["setting", "value", "source"], fmt)
