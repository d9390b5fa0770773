"""What the due sets hold at one instant, read at a bounded cost (ZCOUNT, ZCARD, XLEN and one
HGETALL, whatever the backlog): the figures ``fleetsched top``, ``fleetsched status`` and
``fleetsched exporter`` all print, read by this one function."""

from __future__ import annotations

from dataclasses import dataclass

import redis

from scheduler.queue.keys import Keys
from scheduler.queue.presence import redis_now_ms

__all__ = ["QueueCounts", "queue_counts"]


@dataclass
class QueueCounts:
    """The due sets and the queue-wide figures at one instant (Redis clock)."""

    now_ms: int
    by_class: dict[str, int]  # due now, per priority class
    due_now: int
    overdue: int  # late by more than the overload threshold
    future: int  # scores after now: deferred jobs and running jobs' lease expiries
    oldest_late_ms: int
    dead: int
    stream_length: int
    stats: dict[str, str]


def queue_counts(client: redis.Redis, keys: Keys, overload_threshold_ms: int) -> QueueCounts:
    """Read :class:`QueueCounts` in one round trip (after one for the Redis clock)."""
    now = redis_now_ms(client, keys)
    pipe = client.pipeline(transaction=False)
    for k in keys.all_due():
        pipe.zcount(k, "-inf", now)
        pipe.zcount(k, "-inf", now - overload_threshold_ms)
        pipe.zcount(k, f"({now}", "+inf")
        pipe.zrange(k, 0, 0, withscores=True)
    pipe.zcard(keys.dead)
    pipe.xlen(keys.events)
    pipe.hgetall(keys.stats)
    replies = pipe.execute()
    heads = []
    by_class: dict[str, int] = {}
    due_now = overdue = future = 0
    for i, k in enumerate(keys.all_due()):
        due, late, fut, head = replies[4 * i: 4 * i + 4]
        by_class[k.rsplit(":", 1)[-1]] = int(due)
        due_now += int(due)
        overdue += int(late)
        future += int(fut)
        if head:
            heads.append(int(head[0][1]))
    oldest = min(heads, default=None)
    late_ms = max(0, now - oldest) if oldest is not None and oldest <= now else 0
    return QueueCounts(now, by_class, due_now, overdue, future, late_ms, int(replies[-3]),
                       int(replies[-2]), replies[-1])
