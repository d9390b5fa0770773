"""Alembic environment of fleetsched (run by scheduler.record.migrate, not by an alembic.ini).

Concurrent upgrades from several nodes cannot collide: before reading the current revision,
the migration transaction takes a lock that every other upgrader waits on.
- PostgreSQL: ``pg_advisory_xact_lock`` (released when the transaction ends). DDL is
  transactional there, so an upgrade is all or nothing.
- SQLite: the engine opens every write transaction with ``BEGIN IMMEDIATE``, which takes the
  database's write lock up front (others wait on busy_timeout). SQLite DDL is transactional
  too; later migrations that alter tables use batch mode (``render_as_batch``).

The caller passes an open connection in ``config.attributes["connection"]``; without one (for
example ``alembic -x url=...``), a connection is made from ``sqlalchemy.url``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import text
from sqlalchemy.engine import Connection

from scheduler.record.engine import make_engine
from scheduler.record.models import Base
from scheduler.record.types import UTCDateTime

# Any 64-bit number unique to fleetsched's migrations: "fleetsch" in ASCII, as a bigint.
ADVISORY_LOCK_KEY = int.from_bytes(b"fleetsch", "big") & 0x7FFF_FFFF_FFFF_FFFF

config = context.config
target_metadata = Base.metadata


def _include_object(obj, name, type_, reflected, compare_to):  # noqa: ANN001
    # Tables that are not ours (for example a co-located application's) are left alone.
    if type_ == "table" and reflected and compare_to is None:
        return name in target_metadata.tables
    return True


def _render_item(type_, obj, autogen_context):  # noqa: ANN001
    # Migrations spell plain SQLAlchemy types, so they never break when app code changes.
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        transactional_ddl=True,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        include_object=_include_object,
        render_item=_render_item,
    )


def _run(connection: Connection) -> None:
    with connection.begin():
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": ADVISORY_LOCK_KEY})
        _configure(connection)
        context.run_migrations()


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"),
                      target_metadata=target_metadata, literal_binds=True,
                      transactional_ddl=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option(
        "sqlalchemy.url")
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
