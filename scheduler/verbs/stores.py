"""What a verb opens: the SQL record and the queue, from the settings.

A command line opens them per invocation and closes them after. A long-lived server holds
them (``hold=True``), made at first use and checked then (the schema, the queue's shard
count), reused by every request until ``close()``: an engine for changes, a second one for
``reading()`` (on SQLite its transactions begin without ``IMMEDIATE``, so reads do not queue
behind each other for the write lock: WAL lets them run beside a writer), each with a pool as
large as the server's threads, and one Redis client. Opening them per request, and every
read taking SQLite's write lock, cost the HTTP API most of its time (docs/benchmarks.md,
"HTTP API"). Either way a verb asks here and never builds a connection of its own, so the
checks made on connecting hold for every caller.
"""

from __future__ import annotations

import threading
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

__all__ = ["HELD_POOL", "Stores"]

# A held engine's pool: the server runs a request's verb in one of anyio's 40 worker threads,
# so up to 40 connections at once (PostgreSQL's default max_connections is 100).
HELD_POOL = {"pool_size": 10, "max_overflow": 30}


class Stores:
    """The record and the queue of one deployment (its ``Settings``); with ``hold``, one engine
    and one Redis client for every use, until ``close()``."""

    def __init__(self, settings: Settings, *, hold: bool = False) -> None:
        self.settings = settings
        self.hold = hold
        self._lock = threading.Lock()
        self._engine: Engine | None = None
        self._reader: Engine | None = None
        self._client: redis.Redis | None = None

    @property
    def shards(self) -> Shards:
        from scheduler.queue.shards import shards_of

        return shards_of(self.settings)

    @contextmanager
    def database(self) -> Iterator[Engine]:
        """An engine on the record, its schema checked; disposed of afterwards (held: the one
        engine, checked at its first use)."""
        from scheduler.record.session import open_database

        if self.hold:
            with self._lock:
                if self._engine is None:
                    self._engine = open_database(self.settings, **HELD_POOL)
            yield self._engine
            return
        engine = open_database(self.settings)
        try:
            yield engine
        finally:
            engine.dispose()

    @contextmanager
    def reading(self) -> Iterator[Session]:
        """A session on the record for a read verb: nothing it does is committed."""
        from scheduler.record.session import transaction

        if self.hold:
            with transaction(self._held_reader(), commit=False) as session:
                yield session
            return
        with self.database() as engine, transaction(engine, commit=False) as session:
            yield session

    def _held_reader(self) -> Engine:
        from scheduler.record.engine import make_engine

        with self.database():  # the schema is checked once, by the engine for changes
            pass
        with self._lock:
            if self._reader is None:
                self._reader = make_engine(self.settings.effective_database_url,
                                           readonly=True, **HELD_POOL)
            return self._reader

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

        client = self._held_client() if self.hold else self.connect()
        shards = self.shards
        keys = shards.coord if coord else task_keys(shards, task_id or 0)
        queue = Queue(client, keys, lease_ms=self.settings.lease_ms)
        try:
            yield queue
        finally:
            queue.close()
            if not self.hold:
                client.close()

    @contextmanager
    def redis_client(self) -> Iterator[redis.Redis]:
        """A Redis client of the queue for a verb that needs no ``Queue`` (single sign-on's
        sessions): the held one, or a new one closed afterwards."""
        if self.hold:
            yield self._held_client()
            return
        client = self.connect()
        try:
            yield client
        finally:
            client.close()

    def _held_client(self) -> redis.Redis:
        with self._lock:
            if self._client is None:
                self._client = self.connect()
            return self._client

    def close(self) -> None:
        """Dispose of what ``hold`` kept (nothing otherwise)."""
        with self._lock:
            for engine in (self._engine, self._reader):
                if engine is not None:
                    engine.dispose()
            if self._client is not None:
                self._client.close()
            self._engine = self._reader = self._client = None
