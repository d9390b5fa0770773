"""Column types shared by the models: timezone-aware UTC datetimes and JSON documents.

SQLite has no time zone type: it stores the UTC wall time as text. ``UTCDateTime`` converts
every value to UTC on the way in (naive values are refused: they are a bug) and attaches UTC on
the way out, so the code only ever sees aware UTC datetimes on both dialects.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """``TIMESTAMP WITH TIME ZONE`` on PostgreSQL, UTC text on SQLite; always aware UTC in Python."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: fleetsched stores aware UTC times only")
        value = value.astimezone(timezone.utc)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=timezone.utc)
        return value.astimezone(timezone.utc)


def utcnow() -> datetime:
    """The current time, aware UTC."""
    return datetime.now(timezone.utc)


def from_ms(ms: int | str | None) -> datetime | None:
    """A ms epoch (as the events carry it) to an aware UTC datetime."""
    if ms is None or ms == "":
        return None
    return datetime.fromtimestamp(int(ms) / 1000, tz=timezone.utc)


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _micros(value: datetime) -> int:
    """Microseconds since the epoch, in integers. A naive datetime is UTC, as SQLite returns
    what was stored."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    d = value - _EPOCH
    return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds


def to_ms(value: datetime) -> int:
    """A datetime to a ms epoch, rounded down (a window's close: never later than asked)."""
    return _micros(value) // 1000


def due_ms(value: datetime) -> int:
    """A time a job may start to a ms epoch, rounded up: claim takes a job due at or before
    its clock's ms, so a job never starts before the time asked."""
    return -(-_micros(value) // 1000)


JSONDoc = sa.JSON
"""JSON documents (vars, params, options, event data): ``JSON`` on both dialects."""


def json_default() -> dict[str, Any]:
    return {}
