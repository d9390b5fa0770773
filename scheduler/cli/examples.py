"""Help examples for the commands whose modules do not carry their own epilog.

``apply(app)`` gives every registered command and command group without an epilog the
examples below, so ``--help`` shows examples on every command (and docs/cli.md lists them).
A module's own ``epilog=`` always wins; prefer adding it there when you touch a command.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.models import DefaultPlaceholder

EXAMPLES: dict[str, list[str]] = {
    "actions list": ["fleetsched actions list", "fleetsched actions list --output json"],
    "actions show": ["fleetsched actions show copy", "fleetsched actions show firmware -o json"],
    "config show": ["fleetsched config show",
                    "FLEETSCHED_LEASE_MS=60000 fleetsched config show --output json"],
    "db current": ["fleetsched db current", "fleetsched db current --output json"],
    "db downgrade": ["fleetsched db downgrade 0001 --yes"],
    "db history": ["fleetsched db history"],
    "db prune": ["fleetsched db prune --older-than 90d --dry-run",
                 "fleetsched db prune --older-than 30d --batch 5000"],
    "db upgrade": ["fleetsched db upgrade",
                   "fleetsched --database-url postgresql+psycopg://fleetsched@db/fleetsched db upgrade"],
    "groups list": ["fleetsched groups list", "fleetsched groups list --output csv"],
    "hosts add": ["fleetsched hosts add web-42 --address 10.0.4.2 --user deploy --group web",
                  "fleetsched hosts add db-01 --port 2222 --var datacenter=fra1"],
    "hosts import": ["fleetsched hosts import inventory.ini --dry-run",
                     "ansible-inventory -i prod/ --list > inv.json && fleetsched hosts import inv.json --prune"],
    "hosts list": ["fleetsched hosts list --group web", "fleetsched hosts list --match 'db-*' -o json"],
    "hosts remove": ["fleetsched hosts remove web-42"],
    "hosts show": ["fleetsched hosts show web-07", "fleetsched hosts show web-07 -o json"],
    "reconcile": ["fleetsched reconcile --dry-run", "fleetsched reconcile"],
    "recorder": ["fleetsched recorder", "fleetsched recorder --drain"],
    "recorder status": ["fleetsched recorder status", "fleetsched recorder status -o json"],
    "redis start": ["fleetsched redis start"],
    "redis status": ["fleetsched redis status", "fleetsched redis status --output json"],
    "redis stop": ["fleetsched redis stop"],
    "version": ["fleetsched version"],
    "worker": ["fleetsched worker", "fleetsched worker --slots 200 --processes 4 --lease 60s"],
    "worker list": ["fleetsched worker list", "fleetsched worker list --output json"],
}


def epilog_for(path: str) -> str | None:
    lines = EXAMPLES.get(path)
    if not lines:
        return None
    return "Examples:\n\n" + "\n\n".join(f"  {line}" for line in lines)


def _unset(value: Any) -> bool:
    return value is None or isinstance(value, DefaultPlaceholder)


def apply(app: typer.Typer, prefix: str = "") -> None:
    """Fill in missing epilogs of ``app``'s commands and groups, recursively."""
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__.replace("_", "-") if info.callback else "")
        if _unset(info.epilog):
            info.epilog = epilog_for(f"{prefix}{name}")
    for group in app.registered_groups:
        path = f"{prefix}{group.name}"
        if _unset(group.epilog) and group.typer_instance is not None:
            callback = group.typer_instance.registered_callback
            if callback is not None and _unset(callback.epilog):
                group.epilog = epilog_for(path)
        if group.typer_instance is not None:
            apply(group.typer_instance, f"{path} ")
