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


def to_ms(value: datetime) -> int:
    """An aware datetime to a ms epoch."""
    return int(value.timestamp() * 1000)


JSONDoc = sa.JSON
"""JSON documents (vars, params, options, event data): ``JSON`` on both dialects."""


def json_default() -> dict[str, Any]:
    return {}
