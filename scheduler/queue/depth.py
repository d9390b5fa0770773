"""What the due sets hold at one instant, read at a bounded cost (ZCOUNT, ZCARD, XLEN and one
HGETALL per shard, whatever the backlog): the figures ``fleetsched top``, ``fleetsched status``
and ``fleetsched exporter`` all print, read by this one function.

A queue of N shards (``scheduler.queue.shards``) is counted shard by shard in the same one
pipelined round trip and summed; the oldest late job is the oldest of every shard; the
``stats`` are those of the shard that reordered last, with the counters summed. One shard (or
a ``Keys``): the same reads as an unsharded queue.

A shard that does not answer (its master failing over, or down) would fail every read of the
queue: :func:`answering` asks each shard on its own and gives the queue as
:class:`ShardsAnswering`, whose ``all`` lists only the shards that answered and ``down`` the
others with why; every reader that walks ``all`` (these counts, the views, the recorder's
backlog) then reads the rest, and ``top`` and ``status`` show each shard down in one line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import redis

from scheduler.queue.keys import Keys
from scheduler.queue.presence import redis_now_ms
from scheduler.queue.shards import Shards
from scheduler.redact import redact_exception
from scheduler.redisdb.connect import REDIS_ERRORS

__all__ = ["QueueCounts", "ShardsAnswering", "answering", "as_shards", "queue_counts"]

SUMMED_STATS = ("enqueued", "reorder_count")  # counters of Keys.stats added over the shards


def as_shards(where: Keys | Shards) -> Shards:
    """``where`` as ``Shards``: the keys of one shard are a queue of that one shard."""
    return where if isinstance(where, Shards) else Shards(where.prefix, 1)


@dataclass(frozen=True)
class ShardsAnswering(Shards):
    """A queue's shards as :func:`answering` found them: ``all`` holds the shards that
    answered (so a reader reads only them), ``down`` the number and the reason of each that
    did not. ``coord`` and ``of_task`` still name the queue's own shards."""

    down: tuple[tuple[int, str], ...] = ()

    @cached_property
    def queue(self) -> Shards:
        """Every shard of the queue, answering or not."""
        return Shards(self.prefix, self.count)

    @cached_property
    def all(self) -> tuple[Keys, ...]:
        gone = {i for i, _ in self.down}
        return tuple(k for i, k in enumerate(self.queue.all) if i not in gone)

    @property
    def coord(self) -> Keys:
        return self.queue.coord

    def of_task(self, task_id: str) -> Keys:
        return self.queue.of_task(task_id)

    def spread(self, values: list[Any]) -> list[Any]:
        """Values of the answering shards (in the order of ``all``) put back at their shard
        numbers, ``None`` at each shard down."""
        out: list[Any] = [None] * self.count
        for keys, value in zip(self.all, values):
            out[self.queue.all.index(keys)] = value
        return out

    @property
    def coord_down(self) -> bool:
        """Shard 0 (presence, schedules, the shard count, the epoch) did not answer."""
        return any(i == 0 for i, _ in self.down)


def answering(client: redis.Redis, where: Keys | Shards) -> ShardsAnswering:
    """Which shards answer now: one EXISTS of each shard's stats key, each call on its own,
    so a shard whose master is failing over (a refused connection, ``CLUSTERDOWN``, a
    timeout) fails its own call only."""
    shards = as_shards(where)
    down = []
    for i, keys in enumerate(shards.all):
        try:
            client.exists(keys.stats)
        except REDIS_ERRORS as exc:
            text = redact_exception(exc).strip().splitlines()
            down.append((i, f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")))
    return ShardsAnswering(shards.prefix, shards.count, tuple(down))


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
    due_by_shard: list[int] = field(default_factory=list)  # due now in each shard, shard 0 first


def queue_counts(client: redis.Redis, where: Keys | Shards,
                 overload_threshold_ms: int) -> QueueCounts:
    """Read :class:`QueueCounts` of every shard in one round trip (after one for the Redis
    clock: shard 0's, the one presence and the views read)."""
    shards = as_shards(where).all
    now = redis_now_ms(client, shards[0])
    pipe = client.pipeline(transaction=False)
    for keys in shards:
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
    due_now = overdue = future = dead = length = 0
    stats: list[dict[str, str]] = []
    due_by_shard: list[int] = []
    per_shard = 4 * len(shards[0].all_due()) + 3
    for s, keys in enumerate(shards):
        mine = replies[s * per_shard:(s + 1) * per_shard]
        due_by_shard.append(sum(int(mine[4 * i]) for i in range(len(keys.all_due()))))
        for i, k in enumerate(keys.all_due()):
            due, late, fut, head = mine[4 * i: 4 * i + 4]
            name = k.rsplit(":", 1)[-1]
            by_class[name] = by_class.get(name, 0) + int(due)
            due_now += int(due)
            overdue += int(late)
            future += int(fut)
            if head:
                heads.append(int(head[0][1]))
        dead += int(mine[-3])
        length += int(mine[-2])
        stats.append(mine[-1])
    oldest = min(heads, default=None)
    late_ms = max(0, now - oldest) if oldest is not None and oldest <= now else 0
    return QueueCounts(now, by_class, due_now, overdue, future, late_ms, dead, length,
                       stats[0] if len(stats) == 1 else _combined(stats), due_by_shard)


def _combined(stats: list[dict[str, str]]) -> dict[str, str]:
    """The shards' ``Keys.stats`` as one: the fields of the shard that reordered last, with
    the counters (``SUMMED_STATS``) summed."""
    latest = max(stats, key=lambda h: _int(h.get("reorder_at")))
    out = dict(latest)
    for name in SUMMED_STATS:
        if any(name in h for h in stats):
            out[name] = str(sum(_int(h.get(name)) for h in stats))
    return out


def _int(value: object) -> int:
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return 0
