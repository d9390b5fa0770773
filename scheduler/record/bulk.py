"""The stream's event rows in SQL, per dialect (``scheduler.record.fold`` folds a batch of events;
``scheduler.record.state`` applies it, using this module for the parts that are not task or
job rows).

A ``Writer``, on SQLite and PostgreSQL:

1. converts ms epochs into the value its driver stores for a ``UTCDateTime`` column (SQLite:
   naive UTC text ``YYYY-MM-DD HH:MM:SS.ffffff``, exactly what SQLAlchemy writes; PostgreSQL: an
   aware datetime), once per second of time seen, so no row pays for type processing;
2. inserts event rows (tuples in ``EVENT_COLUMNS`` order) with ``ON CONFLICT (id) DO NOTHING``
   and returns how many were new (a replay inserts 0).

Every write is one driver-level ``executemany`` of plain tuples (no ORM objects, no per-row
type processing): sqlite3 runs it in-process; psycopg 3 pipelines it (one round trip, not one
per row; measured faster than one statement over ``unnest`` arrays, whose text arrays
PostgreSQL parses slowly). Both report rowcount as the rows actually inserted. ``pg`` and
``mark`` (the driver's parameter marker) serve ``scheduler.record.state``'s row updates.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa

EVENT_COLUMNS = ("id", "ts", "kind", "task_id", "job_id", "host", "worker", "operator", "data")


class Writer:
    """Event rows on one connection; ``sqlite`` or ``postgresql`` picks SQL text and values."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.pg = conn.dialect.name != "sqlite"
        self.mark = "%s" if self.pg else "?"
        self._seconds: dict[int, Any] = {}

    def ts(self, ms: int) -> Any:
        """The stored value of the ms epoch ``ms`` (None if it is no representable time)."""
        sec, milli = divmod(ms, 1000)
        head = self._seconds.get(sec)
        if head is None:
            base = _second(sec)
            if base is None:
                return None
            head = self._seconds[sec] = base if self.pg else base.isoformat(" ")[:19] + "."
        if self.pg:
            return head.replace(microsecond=milli * 1000) if milli else head
        return f"{head}{milli:03d}000"

    def insert_events(self, rows: list[tuple[Any, ...]]) -> int:
        """Insert event rows; returns how many were new (rowcount counts only those)."""
        sql = _PG_INSERT if self.pg else _SQLITE_INSERT
        return max(self.conn.exec_driver_sql(sql, rows).rowcount, 0)


def _second(sec: int) -> datetime | None:
    """The aware UTC datetime of a second of the epoch; None if out of datetime's range."""
    try:
        return datetime.fromtimestamp(sec, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


_COLUMN_LIST = ", ".join(EVENT_COLUMNS)
_SQLITE_INSERT = (f"INSERT INTO events ({_COLUMN_LIST}) VALUES "
                  f"({', '.join('?' * len(EVENT_COLUMNS))}) ON CONFLICT (id) DO NOTHING")
_PG_INSERT = (f"INSERT INTO events ({_COLUMN_LIST}) VALUES "
              f"({', '.join(['%s'] * (len(EVENT_COLUMNS) - 1))}, %s::json) "
              "ON CONFLICT (id) DO NOTHING")


def writer(conn: sa.Connection) -> Writer:
    """The event-row writer for ``conn``."""
    return Writer(conn)


__all__ = ["EVENT_COLUMNS", "Writer", "writer"]
