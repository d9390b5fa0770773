"""``fleetsched groups list|remove``: the groups hosts belong to (imported or made by hand).

A thin command over ``scheduler.inventory.list_groups``: one row per group with its direct
host count, its host count including child groups, its children, parents and source.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import database
from scheduler.cli.output import OutputOption

groups_app = typer.Typer(help="Groups of hosts (from inventories or `hosts add --group`).",
                         no_args_is_help=True)

COLUMNS = ["name", "hosts", "all_hosts", "children", "parents", "source"]


@groups_app.command("list")
def list_cmd(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """List groups, sorted by name; ``all_hosts`` counts the hosts of child groups too."""
    from scheduler.inventory import list_groups
    from scheduler.record.session import transaction

    with database(ctx) as (engine, _operator), transaction(engine, commit=False) as session:
        rows = list_groups(session)
    if fmt is output.OutputFormat.json:
        output.emit_rows(rows, COLUMNS + ["vars"], fmt)
        return
    flat = [{**r, "children": ",".join(r["children"]), "parents": ",".join(r["parents"]),
             "vars": json.dumps(r["vars"], sort_keys=True)} for r in rows]
    output.emit_rows(flat, COLUMNS + (["vars"] if fmt is output.OutputFormat.csv else []), fmt)


@groups_app.command("remove", epilog="Example:\n\n  fleetsched groups remove old-dc")
def remove_cmd(ctx: typer.Context,
               name: Annotated[str, typer.Argument(help="The group's name.")]) -> None:
    """Remove a group: its memberships, its links to other groups and its window assignments.
    Its hosts stay; an inventory that still lists the group brings it back at its next import."""
    from scheduler.inventory import remove_group
    from scheduler.record.session import transaction

    with database(ctx) as (engine, operator), transaction(engine) as session:
        hosts = remove_group(session, name, operator=operator)
    output.info(f"removed group {name} ({hosts} hosts were in it; they stay)")
