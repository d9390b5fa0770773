"""Importing an inventory file, in one database transaction.

``import_inventory``: read and resolve the file first (no transaction open while parsing),
   then plan, apply and record the ``import`` event in one transaction: any error rolls all
   of it back. A dry run plans in a transaction that is rolled back. ``import_named``: the
   same for an inventory sent as text under a name (the HTTP API's import).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sqlalchemy.engine import Engine

from scheduler.inventory import sync
from scheduler.inventory.model import Inventory
from scheduler.inventory.resolve import resolve
from scheduler.inventory.source import load_inventory
from scheduler.principal import Principal
from scheduler.record.session import transaction


@dataclass
class ImportResult:
    """What an import did (or, with ``dry_run``, would do)."""

    path: str
    format: str
    dry_run: bool
    prune: bool
    plan: sync.SyncPlan


def import_inventory(engine: Engine, path: str | os.PathLike[str], *, operator: Principal | str,
                     fmt: str | None = None, prune: bool = False, dry_run: bool = False,
                     inventory: Inventory | None = None) -> ImportResult:
    """Import the inventory at ``path`` (see ``scheduler.inventory.sync`` for the semantics).

    ``inventory``: the file already parsed by the caller (it is not read again)."""
    if inventory is None:
        inventory = load_inventory(path, fmt)
    return _import(engine, inventory, source=sync.source_id(path), label=str(path),
                   recorded=os.path.abspath(os.fspath(path)), operator=operator, prune=prune,
                   dry_run=dry_run)


def import_named(engine: Engine, name: str, inventory: Inventory, *,
                 operator: Principal | str,
                 prune: bool = False, dry_run: bool = False) -> ImportResult:
    """Import ``inventory``, sent as text under ``name`` rather than read from a file (the
    HTTP API's import): its hosts' source is ``inventory:api:<name>``, so a prune of one name
    removes only what that name imported."""
    label = f"api:{name}"
    return _import(engine, inventory, source=f"inventory:{label}", label=label,
                   recorded=label, operator=operator, prune=prune, dry_run=dry_run)


def _import(engine: Engine, inventory: Inventory, *, source: str, label: str, recorded: str,
            operator: Principal | str, prune: bool, dry_run: bool) -> ImportResult:
    resolved = resolve(inventory)
    with transaction(engine, commit=not dry_run) as session:
        result = sync.plan(session, resolved, source, prune=prune)
        if not dry_run:
            sync.apply(session, resolved, result, operator=operator, path=recorded,
                       fmt=inventory.format, prune=prune)
    return ImportResult(path=label, format=inventory.format, dry_run=dry_run, prune=prune,
                        plan=result)


__all__ = ["ImportResult", "import_inventory", "import_named"]
