"""What a verb opens: the SQL record and the queue, from the settings.

A command line opens them per invocation and closes them after; a long-lived server may hold
them longer. Either way a verb asks here and never builds a connection of its own, so the
checks made on connecting (the schema, the queue's shard count) hold for every caller.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis
    from sqlalchemy.engine import Engine
    from sqlalchemy.orm import Session

    from scheduler.config import Settings
    from scheduler.queue.client import Queue
    from scheduler.queue.shards import Shards

__all__ = ["Stores"]


class Stores:
    """The record and the queue of one deployment (its ``Settings``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    @property
    def shards(self) -> Shards:
        from scheduler.queue.shards import shards_of

        return shards_of(self.settings)

    @contextmanager
    def database(self) -> Iterator[Engine]:
        """An engine on the record, its schema checked; disposed of afterwards."""
        from scheduler.record.session import open_database

        engine = open_database(self.settings)
        try:
            yield engine
        finally:
            engine.dispose()

    @contextmanager
    def reading(self) -> Iterator[Session]:
        """A session on the record for a read verb: nothing it does is committed."""
        from scheduler.record.session import transaction

        with self.database() as engine, transaction(engine, commit=False) as session:
            yield session

    def connect(self, **options: Any) -> redis.Redis:
        """A Redis client of the queue; refuses, in one line, a ``queue_shards`` other than the
        queue's (a task written to the wrong shard would be invisible to every node)."""
        from scheduler.queue.sharded import check_shard_count
        from scheduler.redisdb.connect import connect

        client = connect(self.settings, **options)
        try:
            check_shard_count(client, self.shards)
        except BaseException:
            client.close()
            raise
        return client

    @contextmanager
    def queue(self, task_id: int | None = None, *, coord: bool = False) -> Iterator[Queue]:
        """The queue of the shard holding ``task_id`` (``coord``: the coordinating shard 0);
        its client is closed afterwards."""
        from scheduler.queue.client import Queue
        from scheduler.queue.route import task_keys

        client = self.connect()
        shards = self.shards
        keys = shards.coord if coord else task_keys(shards, task_id or 0)
        queue = Queue(client, keys, lease_ms=self.settings.lease_ms)
        try:
            yield queue
        finally:
            queue.close()
            client.close()
