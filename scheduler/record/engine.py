"""Engines and sessions for the system of record, tuned per dialect.

SQLite (the default, a file in the state directory), set on every connection:
- ``journal_mode=WAL``: readers never block the writer, the writer never blocks readers.
- ``synchronous=FULL``: with WAL, every commit is fsynced. NORMAL would survive ``kill -9`` of
  the process too, but a power loss could take back the last commits *after* the recorder had
  acknowledged their events in Redis, losing them for good. The recorder commits in batches, so
  one fsync per batch costs little.
- ``foreign_keys=ON`` and ``busy_timeout`` (a writer waits for the lock instead of failing).
- Write transactions start with ``BEGIN IMMEDIATE``: the write lock is taken up front, so two
  writers queue on busy_timeout instead of one failing with "database is locked" when it
  upgrades a read snapshot. ``readonly=True`` engines use plain deferred ``BEGIN``.

A SQLite file that does not exist is created only where that is asked for: by ``db upgrade``
(``migrate.upgrade``) and for the default database in the state directory. A ``database_url``
the operator gave that names no file is refused (``engine_for``): a mistyped path must not
become a new, empty record (and a directory) that a command then reads as "no tasks".

PostgreSQL (``postgresql+psycopg://``): pre-ping (a restarted server is noticed at checkout),
connect timeout, and TCP keepalives so a cut connection is found in seconds, not hours.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url

from scheduler.errors import ConfigError

if TYPE_CHECKING:  # the ORM loads with the first session, not with the engine
    from sqlalchemy.orm import Session, sessionmaker

    from scheduler.config import Settings

SQLITE_BUSY_TIMEOUT_MS = 30_000
PG_CONNECT_TIMEOUT_S = 5


def _sqlite_file(url: sa.URL) -> Path | None:
    db = url.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return None
    return Path(db)


def engine_for(settings: Settings, **options: Any) -> Engine:
    """An engine on ``settings``' database (``options``: ``make_engine``'s); a SQLite file is
    created only for the default database, never for a ``database_url`` that names none."""
    return make_engine(settings.effective_database_url, create=not settings.database_url,
                       **options)


def make_engine(url: str | sa.URL, *, readonly: bool = False, echo: bool = False,
                create: bool = True, **kwargs: Any) -> Engine:
    """An engine for ``url`` with fleetsched's per-dialect settings (see the module docstring);
    with ``create`` false, a SQLite file that does not exist is refused (``ConfigError``)."""
    try:
        parsed = make_url(url)
    except sa.exc.ArgumentError as exc:
        raise ConfigError(f"database_url is not a SQLAlchemy URL ({exc})",
                          hint="e.g. sqlite:////var/lib/fleetsched/fleetsched.db or "
                               "postgresql+psycopg://user@host/fleetsched") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed, readonly=readonly, echo=echo, create=create, **kwargs)
    if backend == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        connect_args = {
            "connect_timeout": PG_CONNECT_TIMEOUT_S,
            "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
            "keepalives_count": 3,
            "application_name": "fleetsched",
        }
        connect_args.update(kwargs.pop("connect_args", {}))
        return sa.create_engine(parsed, echo=echo, pool_pre_ping=True,
                                connect_args=connect_args, **kwargs)
    raise ConfigError(f"unsupported database {backend!r} in database_url",
                      hint="use sqlite:///<file> or postgresql+psycopg://...")


def _sqlite_engine(url: sa.URL, *, readonly: bool, echo: bool, create: bool,
                   **kwargs: Any) -> Engine:
    path = _sqlite_file(url)
    if path is not None and not create and not path.exists():
        raise ConfigError(f"no SQLite database at {path} (is database_url mistyped?)",
                          hint="check database_url; `fleetsched db upgrade` creates a new one")
    if path is not None and not readonly:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    connect_args = {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
    connect_args.update(kwargs.pop("connect_args", {}))
    engine = sa.create_engine(url, echo=echo, connect_args=connect_args, **kwargs)
    begin = "BEGIN" if readonly else "BEGIN IMMEDIATE"

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # Take transaction control from the sqlite3 module; "begin" below emits BEGIN.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if path is not None and not readonly:
            cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA synchronous = FULL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.close()
        if path is not None and not readonly:
            try:
                os.chmod(path, 0o600)
            except OSError:
                pass

    @event.listens_for(engine, "begin")
    def _on_begin(conn: sa.Connection) -> None:
        conn.exec_driver_sql(begin)

    return engine


def session_factory(engine: Engine) -> sessionmaker[Session]:
    """Sessions bound to ``engine``; objects stay readable after commit."""
    from sqlalchemy.orm import sessionmaker

    return sessionmaker(engine, expire_on_commit=False)


def is_sqlite(engine: Engine | sa.Connection) -> bool:
    return engine.dialect.name == "sqlite"


__all__ = ["engine_for", "make_engine", "session_factory", "is_sqlite", "SQLITE_BUSY_TIMEOUT_MS"]
