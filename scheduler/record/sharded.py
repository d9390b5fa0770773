"""The recorders of a queue in N shards (``queue_shards``): one ``Recorder`` per shard's stream.

Every shard has its own events stream (``keys.events`` of ``Shards.all[i]``) and, on it, its
own ``recorder`` consumer group. :class:`ShardRecorders` holds one
:class:`scheduler.record.recorder.Recorder` per shard, all with the same consumer name (a
group is per stream, so the names never meet) and all reading node presence from shard 0, so
a dead node's pending entries are taken over on every shard.

``run`` gives each shard's recorder a thread of its own (a queue of one shard: no thread, the
one recorder runs in the caller, as it always did). A thread per shard, not one loop visiting
the shards in turn, because:

- each recorder blocks on its own stream (``XREADGROUP BLOCK``), so an entry of any shard is
  read the moment it is added; one loop could only block on one stream at a time (a blocking
  read of several streams is refused on a cluster, where the shards live in other slots), so
  the others would wait up to ``block_ms``;
- an outage or a refused batch on one shard backs off that shard alone (``Recorder.run``);
- the work is Redis and SQL round trips: the threads mostly wait, and SQL writes of several
  shards overlap.

Nothing is lost: each recorder acknowledges its own stream's entries only after their SQL
commit, exactly as an unsharded recorder does. A recorder dying of an unexpected error stops
the others and the error is raised by ``run``, as it would be from the single recorder.

:func:`shard_backlogs` and :func:`total_backlog` give the recorder lag an operator sees:
per shard, and summed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import redis
from sqlalchemy.engine import Engine

from scheduler.queue.depth import as_shards
from scheduler.queue.keys import Keys
from scheduler.queue.shards import Shards
from scheduler.record.recorder import Recorder, RecorderStats, backlog

__all__ = ["ShardRecorders", "shard_backlogs", "total_backlog"]


class ShardRecorders:
    """One ``Recorder`` per shard of a queue (see the module docstring)."""

    def __init__(self, client: redis.Redis, engine: Engine, shards: Shards,
                 consumer_name: str | None = None, **options: Any) -> None:
        self.shards = shards
        self.recorders = [Recorder(client, engine, keys, consumer_name, presence=shards.coord,
                                   **options) for keys in shards.all]

    @property
    def consumer(self) -> str:
        return self.recorders[0].consumer

    @property
    def streams(self) -> list[str]:
        return [r.stream for r in self.recorders]

    @property
    def stats(self) -> RecorderStats:
        """The recorders' figures, summed."""
        total = RecorderStats()
        for r in self.recorders:
            for name in vars(total):
                setattr(total, name, getattr(total, name) + getattr(r.stats, name))
        return total

    def run_once(self, max_events: int | None = None, block_ms: int | None = None) -> int:
        """One batch of every shard in turn (none blocks); the events recorded."""
        return sum(r.run_once(max_events, block_ms if len(self.recorders) == 1 else None)
                   for r in self.recorders)

    def drain(self) -> int:
        """Record every shard's stream until each is empty; the events recorded."""
        total = 0
        for r in self.recorders:
            while n := r.run_once(block_ms=None):
                total += n
        return total

    def run(self, stop: threading.Event) -> None:
        """Record every shard until ``stop`` is set (see the module docstring)."""
        if len(self.recorders) == 1:
            self.recorders[0].run(stop)
            return
        errors: list[BaseException] = []

        def one(rec: Recorder) -> Callable[[], None]:
            def loop() -> None:
                try:
                    rec.run(stop)
                except BaseException as exc:
                    errors.append(exc)
                    stop.set()  # the others stop too: a node without one shard's record stops
            return loop

        threads = [threading.Thread(target=one(r), name=f"recorder-{r.shard}", daemon=True)
                   for r in self.recorders]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]


def shard_backlogs(client: redis.Redis, where: Keys | Shards) -> list[tuple[int, int]]:
    """(lag, pending) of every shard's stream (``scheduler.record.recorder.backlog``), shard 0
    first."""
    return [backlog(client, keys.events) for keys in as_shards(where).all]


def total_backlog(client: redis.Redis, where: Keys | Shards) -> tuple[int, int]:
    """(lag, pending) summed over the shards: the recorder lag ``status``, ``top``, ``doctor``
    and the exporter print. One shard: ``backlog`` of its stream, the same reads as ever."""
    if isinstance(where, Keys) or not where.sharded:
        return backlog(client, as_shards(where).coord.events)
    per = shard_backlogs(client, where)
    return sum(lag for lag, _ in per), sum(p for _, p in per)
