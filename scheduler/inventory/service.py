"""The inventory operations the CLI calls, each one database transaction.

1. ``open_database(settings)``: an engine for the configured database with a current schema
   (``scheduler.db.migrate.ensure_schema``: the private SQLite default is upgraded on the
   spot; a configured database must be upgraded by ``fleetsched db upgrade``);
2. ``import_inventory``: read and resolve the file first (no transaction open while parsing),
   then plan, apply and record the ``import`` event in one transaction: any error rolls all
   of it back. A dry run plans in a transaction that is rolled back;
3. ``transaction(engine)``: a session in one transaction, with driver errors turned into one
   line without a password.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from scheduler.config import Settings, redact_exception
from scheduler.db.engine import make_engine, session_factory
from scheduler.errors import DatabaseUnavailableError, FleetschedError
from scheduler.inventory import sync
from scheduler.inventory.model import Inventory
from scheduler.inventory.resolve import resolve
from scheduler.inventory.source import load_inventory


def open_database(settings: Settings) -> Engine:
    """An engine on ``settings``' database, its schema checked (or, for the default, made)."""
    from scheduler.db.migrate import ensure_schema

    engine = make_engine(settings.effective_database_url)
    try:
        ensure_schema(settings, engine)
    except BaseException:
        engine.dispose()
        raise
    return engine


@contextmanager
def transaction(engine: Engine, *, commit: bool = True) -> Iterator[Session]:
    """A session in one transaction: committed at the end (unless ``commit`` is false),
    rolled back on any error."""
    sessions = session_factory(engine)
    try:
        with sessions() as session:
            tx = session.begin()
            try:
                yield session
            except BaseException:
                tx.rollback()
                raise
            if commit:
                tx.commit()
            else:
                tx.rollback()
    except sa.exc.IntegrityError as exc:
        raise FleetschedError(
            f"the database refused the change (a concurrent edit?): "
            f"{redact_exception(exc).splitlines()[0]}",
            hint="run the command again") from None
    except (sa.exc.OperationalError, sa.exc.InterfaceError) as exc:
        raise DatabaseUnavailableError(
            f"database error: {redact_exception(exc).splitlines()[0]}",
            hint="check database_url and that the server is running") from None


@dataclass
class ImportResult:
    """What an import did (or, with ``dry_run``, would do)."""

    path: str
    format: str
    dry_run: bool
    prune: bool
    plan: sync.SyncPlan


def import_inventory(engine: Engine, path: str | os.PathLike[str], *, operator: str,
                     fmt: str | None = None, prune: bool = False, dry_run: bool = False,
                     inventory: Inventory | None = None) -> ImportResult:
    """Import the inventory at ``path`` (see ``scheduler.inventory.sync`` for the semantics).

    ``inventory``: the file already parsed by the caller (it is not read again)."""
    if inventory is None:
        inventory = load_inventory(path, fmt)
    resolved = resolve(inventory)
    source = sync.source_id(path)
    with transaction(engine, commit=not dry_run) as session:
        result = sync.plan(session, resolved, source, prune=prune)
        if not dry_run:
            sync.apply(session, resolved, result, operator=operator,
                       path=os.path.abspath(os.fspath(path)), fmt=inventory.format, prune=prune)
    return ImportResult(path=str(path), format=inventory.format, dry_run=dry_run, prune=prune,
                        plan=result)


__all__ = ["ImportResult", "import_inventory", "open_database", "transaction"]
