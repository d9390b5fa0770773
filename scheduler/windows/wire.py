"""Service windows as they travel through Redis: what the claim path reads, without SQL.

1. the job's ``window`` field: the names of every window and freeze that applied at
   submission, space-separated, freezes as ``!name`` (:func:`parse_window_field`; window names
   never hold spaces nor start with ``!``), and :data:`BREAK_GLASS` for a task submitted with
   ``--break-glass`` (it runs through freezes: :func:`breaks_glass`);
2. the Redis copy of a definition (``Keys.window``): :func:`window_hash` writes it from a SQL
   row, :func:`window_from_hash` reads it back as ``scheduler.calendar.windows.Window``,
   :func:`publish` and :func:`unpublish` (a tombstone, ``REMOVED``) keep Redis in step, in
   every shard of the queue (the claim path of a job reads its own shard's copy);
3. each host's freezes as assigned now (:data:`HOST_FREEZES`, a field of the host's
   ``Keys.host`` hash, written by ``scheduler.windows.freezes.push``): the claim reads the host
   hash anyway, so a freeze declared after a job was queued holds it back at no cost to the
   hosts no freeze covers.

``scheduler.windows.store`` (SQL) and ``workers.deferral`` import them from here, so a worker's
claim path loads no SQLAlchemy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

import redis

from scheduler.calendar.windows import Window
from scheduler.queue.route import Where, every_shard

__all__ = ["BREAK_GLASS", "FREEZE_MARK", "HOST_FREEZES", "REMOVED", "breaks_glass",
           "parse_window_field", "publish", "unpublish", "window_from_hash", "window_hash"]

FREEZE_MARK = "!"  # a freeze's name in a job's window field
BREAK_GLASS = "!!break-glass"
"""In a job's window field: the task runs through freezes (``submit --break-glass REASON``).
No freeze can bear this name: window names never start with ``!``."""
HOST_FREEZES = "freezes"
"""The host hash field naming the freezes assigned to the host now, space-separated."""


def parse_window_field(text: str) -> tuple[list[str], list[str]]:
    """(window names, freeze names) of a job's ``window`` field (:data:`BREAK_GLASS` is
    neither)."""
    names = [n for n in text.split() if n != BREAK_GLASS]
    return ([n for n in names if not n.startswith(FREEZE_MARK)],
            [n[len(FREEZE_MARK):] for n in names if n.startswith(FREEZE_MARK)])


def breaks_glass(text: str) -> bool:
    """Whether a job's ``window`` field says it runs through freezes."""
    return BREAK_GLASS in text.split()


def _ms(value: datetime | None) -> str:
    if value is None:
        return ""
    return str(int(value.replace(tzinfo=value.tzinfo or timezone.utc).timestamp() * 1000))


def window_hash(row: Any) -> dict[str, str]:
    """A stored window as the ``Keys.window`` hash the workers read; ``row.approval`` (a
    ``scheduler.windows.approvals.Approval``) says what its approvals allow."""
    approval = row.approval
    return {
        "kind": row.kind, "tz": row.tz or "UTC", "rrule": row.rrule or "", "cron": row.cron or "",
        "duration_s": "" if row.duration_s is None else str(row.duration_s),
        "end_time": row.end_time or "", "starts_at": _ms(row.starts_at),
        "ends_at": _ms(row.ends_at),
        "approved": "1" if approval.approved else "0",
        "approved_until": _ms(approval.until),
        "approved_starts": " ".join(sorted(_ms(s) for s in approval.starts)),
        "denied_starts": " ".join(sorted(_ms(s) for s in approval.refused)),
    }


def window_from_hash(name: str, data: Mapping[str, str]) -> Window:
    """The calendar model from a ``Keys.window`` hash (``ValidationError`` if it is corrupt)."""
    def when(key: str) -> datetime | None:
        raw = data.get(key) or ""
        return datetime.fromtimestamp(int(raw) / 1000, timezone.utc) if raw else None
    duration = data.get("duration_s") or ""
    def instants(key: str) -> frozenset[datetime]:
        return frozenset(datetime.fromtimestamp(int(ms) / 1000, timezone.utc)
                         for ms in (data.get(key) or "").split())
    return Window(
        name=name, tz=data.get("tz") or "UTC", rrule=data.get("rrule") or None,
        cron=data.get("cron") or None,
        duration=timedelta(seconds=int(duration)) if duration else None,
        end_time=data.get("end_time") or None, start=when("starts_at"), end=when("ends_at"),
        approved=data.get("approved", "1") == "1", approved_until=when("approved_until"),
        approved_starts=instants("approved_starts"), denied_starts=instants("denied_starts"),
        freeze=data.get("kind") == "freeze")


def publish(client: redis.Redis, keys: Where, rows: Iterable[Any]) -> int:
    """Copy window definitions into Redis (replacing what was there), in every shard of
    ``keys`` (one transaction per shard: one cluster slot each); returns how many."""
    rows = list(rows)
    for shard in every_shard(keys):
        pipe = client.pipeline(transaction=True)
        for row in rows:
            pipe.delete(shard.window(row.name))
            pipe.hset(shard.window(row.name), mapping=window_hash(row))
        pipe.execute()
    return len(rows)


REMOVED = "removed"
"""The one field of a removed window's Redis copy (its removal time, ms): a tombstone."""


def unpublish(client: redis.Redis, keys: Where, names: Iterable[str], now_ms: int) -> None:
    """Replace the Redis copies of removed windows with tombstones (``removed``: when).

    A queued job that names one learns at its claim that the window is gone for good, not
    merely missing from Redis (workers.deferral): a removed freeze no longer holds it back; a
    job left without any window fails with a reason instead of waiting forever."""
    names = list(names)
    if not names:
        return
    for shard in every_shard(keys):
        pipe = client.pipeline(transaction=True)
        for name in names:
            pipe.delete(shard.window(name))
            pipe.hset(shard.window(name), mapping={REMOVED: str(now_ms)})
        pipe.execute()
