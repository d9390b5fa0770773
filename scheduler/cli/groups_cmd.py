"""``fleetsched groups list|limit|remove``: the groups hosts belong to (imported or made by
hand), and the limits that hold across tasks.

Thin commands: ``list`` reads ``scheduler.verbs.inventory.list_groups``: one row per group with its limit, its
direct host count, its host count including child groups, its children, parents and source;
``remove`` and ``limit`` are verbs of ``scheduler.verbs.inventory``. ``limit`` records a
group's limit in SQL, then tells the queue (``Queue.set_group_limit``) and writes
each of its hosts' limited groups into their Redis hashes, which claim.lua reads (the limit in
queue shard 0, the hosts' field in every shard's copy of the host).
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs
from scheduler.cli.output import OutputOption

groups_app = typer.Typer(help="Groups of hosts (from inventories or `hosts add --group`).",
                         no_args_is_help=True)

COLUMNS = ["name", "max_busy", "hosts", "all_hosts", "children", "parents", "source"]

LIMIT_EPILOG = """Examples:

  fleetsched groups limit db --max-busy 1

  fleetsched groups limit web --max-busy 25%

  fleetsched groups limit db --remove

At most this many jobs run at once on the group's hosts, across all tasks (one node of a
three-node database cluster at a time); a job that would go over waits, without counting an
attempt, until one of the group's jobs ends. P% is of the group's hosts now (at least 1).
Jobs already running when a limit is set do not count against it.
"""


@groups_app.command("list")
def list_cmd(ctx: typer.Context, fmt: OutputOption = output.OutputFormat.table) -> None:
    """List groups, sorted by name; ``all_hosts`` counts the hosts of child groups too."""
    inventory, stores, _principal = verbs(ctx, "inventory")
    rows = inventory.list_groups(stores)
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
    inventory, stores, principal = verbs(ctx, "inventory")
    done = inventory.remove_group(stores, principal, name)
    for line in done.notes:
        output.info(line)
    hosts = done.count
    output.info(f"removed group {name} ({hosts} hosts were in it; they stay)")


@groups_app.command("limit", epilog=LIMIT_EPILOG)
def limit_cmd(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The group's name.")],
    max_busy: Annotated[str | None, typer.Option("--max-busy", help="Most jobs running at once on the group's hosts: N or P%.")] = None,
    remove: Annotated[bool, typer.Option("--remove", help="Remove the group's limit.")] = False,
) -> None:
    """Limit how many jobs run at once on a group's hosts, across all tasks."""
    from scheduler.errors import ValidationError

    if (max_busy is None) == (not remove):
        raise ValidationError("give --max-busy N|P% or --remove",
                              hint="fleetsched groups limit db --max-busy 1")
    inventory, stores, principal = verbs(ctx, "inventory")
    done = inventory.limit_group(stores, principal, name, max_busy)
    count, members, operator = done.count, done.members, done.by
    if count is None:
        output.info(f"group {name}: no limit any more ({len(members)} hosts), by {operator}")
    else:
        output.info(f"group {name}: at most {count} job(s) at once on its {len(members)} hosts, "
                    f"across all tasks, by {operator}")
