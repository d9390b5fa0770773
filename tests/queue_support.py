"""Helpers for the queue core tests (tests/test_queue_*.py, tests/faults/test_queue_*); their
fixtures (``qclient``, ``queue``, ``redis62_server``) are in tests/conftest.py."""

from __future__ import annotations

import hashlib
from pathlib import Path

import redis

from scheduler.queue.client import JobSpec, Queue, TaskSpec
from scheduler.queue.keys import Keys
from tests.cluster import RedisCluster

KEYS = Keys()


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
    """Every hash, sorted set, list, set and string in Redis with its content (not the event
    stream), to show that a refused call changed nothing; on a single Redis or a cluster."""
    out = {}
    for key in client.scan_iter():
        kind = client.type(key)
        if kind == "hash":
            out[key] = client.hgetall(key)
        elif kind == "zset":
            out[key] = client.zrange(key, 0, -1, withscores=True)
        elif kind == "list":
            out[key] = client.lrange(key, 0, -1)
        elif kind == "set":
            out[key] = sorted(client.smembers(key))
        elif kind == "string":
            out[key] = client.get(key)
    return out


SCRIPTS_RUN_ON_CLUSTER: set[str] = set()
"""The verbs whose scripts the cluster's flushed masters held after a test: each one ran there
(redis-py loads a script only on a NOSCRIPT reply to its first EVALSHA)."""


def record_scripts_run(cluster: RedisCluster) -> None:
    """Add to ``SCRIPTS_RUN_ON_CLUSTER`` every verb whose script a master of ``cluster`` holds."""
    from scheduler.queue.scripts import VERBS, script_source

    shas = {hashlib.sha1(script_source(verb).encode()).hexdigest(): verb for verb in VERBS}
    SCRIPTS_RUN_ON_CLUSTER.update(shas[sha] for sha in cluster.scripts_held(list(shas)))


def second_client(client: redis.Redis) -> redis.Redis:
    """Another client of the same server (or cluster), as a second process would have."""
    if isinstance(client, redis.RedisCluster):
        node = client.get_default_node()
        return redis.RedisCluster(host=node.host, port=node.port, decode_responses=True)
    return redis.Redis(connection_pool=client.connection_pool)


def redis_now_ms(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def due_score(client: redis.Redis, job_id: str, priority: str = "normal") -> float | None:
    return client.zscore(KEYS.due(priority), job_id)


def _t(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


__all__ = ["KEYS", "Path", "due_score", "events", "make_task",
           "redis_now_ms", "snapshot"]
