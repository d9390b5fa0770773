"""Helpers for the schedule tests (tests/schedules/test_schedules*.py, tests/faults/test_schedules_*.py):
reading what a schedule did from SQL (tasks by occurrence, ``missed`` events by occurrence) and
firing a schedule entry by hand the way a worker does (``Queue.claim`` + ``fire_claimed``)."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any

import redis
import sqlalchemy as sa

from scheduler.queue.client import Queue
from scheduler.record.engine import make_engine
from scheduler.schedules.firing import FireResult, fire_claimed
from tests.submit_support import KEYS, data, drain, sql_rows


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def occurrences(url: str, name: str) -> Counter[int]:
    """Tasks of the schedule per occurrence (ms): a value above 1 is a duplicate."""
    rows = sql_rows(url, "SELECT t.occurrence FROM tasks t JOIN schedules s ON s.id = t.schedule_id "
                         "WHERE s.name = :n", n=name)
    out: Counter[int] = Counter()
    for (occ,) in rows:
        at = occ if isinstance(occ, datetime) else datetime.fromisoformat(str(occ))
        out[ms(at if at.tzinfo else at.replace(tzinfo=timezone.utc))] += 1
    return out


def missed(url: str, name: str) -> dict[int, str]:
    """``missed`` events of the schedule: occurrence (ms) -> why (one each, or a duplicate)."""
    out: dict[int, str] = {}
    for row in sql_rows(url, "SELECT data FROM events WHERE kind = 'missed'"):
        d = data(row)
        if d.get("schedule") == name and d.get("occurrence") is not None:
            occ = int(d["occurrence"])
            assert occ not in out, f"occurrence {occ} recorded as missed twice"
            out[occ] = d.get("error", "")
    return out


def fired(client: redis.Redis, url: str, now_ms: int | None = None, worker: str = "w1",
          lease_ms: int = 30_000, jobs: list[Any] | None = None) -> list[FireResult]:
    """Claim due entries as ``worker`` and fire them (at ``now_ms`` instead of the claim's clock
    when given, to pin an outage's length); events drained into SQL afterwards. Jobs the claim
    took along are appended to ``jobs`` (they are leased to ``worker``)."""
    queue = Queue(client, KEYS, lease_ms=lease_ms)
    claim = queue.claim(worker, 10)
    if jobs is not None:
        jobs.extend(claim.jobs)
    engine = make_engine(url)
    try:
        out = [fire_claimed(engine, client, KEYS, s, now_ms or claim.now_ms, worker=worker)
               for s in claim.schedules]
    finally:
        engine.dispose()
        queue.close()
    drain(client, url)
    return out


def entry_score(client: redis.Redis, name: str) -> int | None:
    score = client.zscore(KEYS.due("urgent"), KEYS.schedule_entry(name))
    return None if score is None else int(score)


def engine_for(url: str) -> Any:
    return make_engine(url)


__all__ = ["entry_score", "engine_for", "fired", "missed", "ms", "occurrences", "sa"]
