"""Opening the system of record: an engine with a current schema, and one transaction.

- :func:`open_database`: an engine on the configured database whose schema is checked (the
  private SQLite default is upgraded on the spot; a configured database must be upgraded with
  ``fleetsched db upgrade``);
- :func:`transaction`: a session in one transaction, committed at the end or rolled back; a
  database that cannot be reached becomes ``DatabaseUnavailableError`` (exit code 1) and a
  refused write one line, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from scheduler.config import Settings
from scheduler.errors import DatabaseUnavailableError, FleetschedError
from scheduler.record.engine import engine_for, session_factory
from scheduler.redact import redact_exception

__all__ = ["open_database", "transaction"]


def open_database(settings: Settings, **options: Any) -> Engine:
    """An engine on ``settings``' database (``options``: the pool's, for ``make_engine``), its
    schema checked (or, for the default, made)."""
    from scheduler.record.migrate import ensure_schema

    engine = engine_for(settings, **options)
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
