"""The queue's identity: its epoch, a random id that Redis and SQL both hold.

A Redis restarted empty (no AOF, a kill -9 with the wrong fsync, a replaced server) looks like
a healthy, idle queue: nothing due, nothing running. Without an identity, ``status`` said all
OK while the tasks SQL calls active never ran again. This module owns that identity:

1. ``ensure``: at a worker node's start with the record (``workers.serve``), when SQL records
   no epoch yet: write a random id into Redis (``Keys.epoch`` of shard 0, SET NX, so two
   writers agree on the first), then record the id Redis holds in SQL (``queue_epochs``, one
   row per queue prefix; the first insert wins). Redis first: a crash between the two leaves
   an id SQL adopts at the next start, never an id Redis lacks. Once SQL records one it never
   writes Redis: a Redis that lost it must say so, not get a new one.
2. ``restore``: reconcile's last step writes SQL's epoch back into Redis (the identity comes
   back with the data; a queue with none yet gets one as in step 1).
3. ``check`` (``read_sql``, ``read_redis``, ``judge``): the one verdict a node at its start,
   ``status``, ``doctor`` and the exporter share, in one line with the fix:
   - Redis has no epoch while SQL has one: it lost or replaced its data;
   - Redis holds another epoch than SQL's: it was replaced, or is another queue's server;
   - Redis holds none of the ``SAMPLE`` newest tasks SQL calls active or paused (one EXISTS
     each; SQL sets a task active only once Redis has it, and Redis never deletes a task
     hash), or lacks some: it lost its data, or its last writes (the epoch alone misses a
     Redis restored from an old snapshot, and a queue that had no epoch yet).
   The fix for each: ``fleetsched reconcile`` (it asks the running worker nodes first).

SQL is read with Core statements on light table clauses, not the models, so a worker node
checks the epoch before its first claim without loading the ORM (tests/workers/test_worker_startup.py).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from typing import Any

import redis
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.errors import QueueLostError
from scheduler.queue.keys import Keys
from scheduler.queue.shards import Shards
from scheduler.queue.types import text
from scheduler.record.types import UTCDateTime, utcnow

__all__ = ["SAMPLE", "SqlSide", "Verdict", "check", "ensure", "ensure_intact", "judge",
           "read_redis", "read_sql", "restore"]

SAMPLE = 20  # newest active tasks looked up in Redis per check: 20 EXISTS, one round trip
ACTIVE = ("active", "paused")  # SQL states whose task hash Redis holds for sure

FIX = ("run fleetsched reconcile: it asks the running worker nodes which jobs they run, "
       "re-queues the rest from SQL and writes the epoch back")
FIX_OTHER = f"if redis_url names this queue's Redis: {FIX}"

_EPOCHS = sa.table("queue_epochs", sa.column("queue", sa.String),
                   sa.column("epoch", sa.String), sa.column("created_at", UTCDateTime()))
_TASKS = sa.table("tasks", sa.column("id", sa.Integer), sa.column("state", sa.String),
                  sa.column("created_at", UTCDateTime()))


@dataclass(frozen=True)
class SqlSide:
    """What SQL says the queue ``prefix`` holds: its epoch (None: none recorded yet) and the
    ids of its newest active or paused tasks (at most ``SAMPLE``)."""

    epoch: str | None
    active: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Verdict:
    """``ok``, or what Redis lost, in one line (``message``) with the fix (``hint``)."""

    ok: bool
    message: str
    hint: str | None = None
    sql_epoch: str | None = None
    redis_epoch: str | None = None
    sampled: int = 0
    missing: list[str] = field(default_factory=list)

    def data(self) -> dict[str, Any]:
        return {"sql_epoch": self.sql_epoch, "redis_epoch": self.redis_epoch,
                "tasks_sampled": self.sampled, "tasks_missing": self.missing}


# ------------------------------------------------------------------------------------ reads


def read_sql(conn: sa.Connection, prefix: str) -> SqlSide:
    """SQL's epoch of the queue ``prefix`` and its newest active tasks."""
    epoch = conn.execute(sa.select(_EPOCHS.c.epoch)
                         .where(_EPOCHS.c.queue == prefix)).scalar_one_or_none()
    ids = conn.execute(sa.select(_TASKS.c.id).where(_TASKS.c.state.in_(ACTIVE))
                       .order_by(_TASKS.c.created_at.desc(), _TASKS.c.id.desc())
                       .limit(SAMPLE)).scalars().all()
    return SqlSide(epoch, [str(i) for i in ids])


def read_redis(client: redis.Redis, shards: Shards, task_ids: list[str]
               ) -> tuple[str | None, list[str]]:
    """(the epoch Redis holds, the tasks of ``task_ids`` whose hash it lacks): one round trip."""
    pipe = client.pipeline(transaction=False)
    pipe.get(shards.coord.epoch)
    for task_id in task_ids:
        pipe.exists(shards.of_task(task_id).task(task_id))
    epoch, *there = pipe.execute()
    return (text(epoch) if epoch is not None else None,
            [t for t, found in zip(task_ids, there) if not found])


# ---------------------------------------------------------------------------------- verdict


def judge(sql: SqlSide, redis_epoch: str | None, missing: list[str], key: str) -> Verdict:
    """The verdict on what both sides hold (see the module docstring); ``key``: the epoch's
    Redis key, named in the message."""
    base = {"sql_epoch": sql.epoch, "redis_epoch": redis_epoch, "sampled": len(sql.active),
            "missing": missing}
    if sql.epoch is not None and redis_epoch is None:
        return Verdict(False, f"Redis has no queue epoch ({key}; SQL records {sql.epoch}): "
                       "it lost or replaced its data", FIX, **base)
    if sql.epoch is not None and redis_epoch != sql.epoch:
        return Verdict(False, f"Redis holds another queue's epoch ({redis_epoch}; SQL records "
                       f"{sql.epoch}): it was replaced, or is another queue's server",
                       FIX_OTHER, **base)
    n, shown = len(sql.active), ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
    if missing and len(missing) == n:
        return Verdict(False, f"Redis holds none of the {n} tasks SQL calls active (newest: "
                       f"{shown}): it lost or replaced its data", FIX, **base)
    if missing:
        return Verdict(False, f"Redis lacks {len(missing)} of the {n} newest tasks SQL calls "
                       f"active ({shown}): it lost its last writes", FIX, **base)
    held = f"; Redis holds the {n} newest active task(s)" if n else ""
    if redis_epoch is None:
        return Verdict(True, "no queue epoch yet (the first worker node with the record "
                       f"writes it){held}", **base)
    later = "" if sql.epoch is not None else " (SQL records it at the next worker start)"
    return Verdict(True, f"queue epoch {redis_epoch}{later}{held}", **base)


def check(engine: Engine, client: redis.Redis, shards: Shards) -> Verdict:
    """Read both sides and judge them: what a node, ``status`` and ``doctor`` call."""
    with engine.connect() as conn:
        sql = read_sql(conn, shards.prefix)
    redis_epoch, missing = read_redis(client, shards, sql.active)
    return judge(sql, redis_epoch, missing, shards.coord.epoch)


# ----------------------------------------------------------------------------------- writes


def _record(engine: Engine, prefix: str, epoch: str) -> None:
    """Insert SQL's epoch of ``prefix`` unless one is there (the first insert wins)."""
    try:
        with engine.begin() as conn:
            conn.execute(sa.insert(_EPOCHS).values(queue=prefix, epoch=epoch,
                                                   created_at=utcnow()))
    except sa.exc.IntegrityError:
        pass  # another node recorded it first: read it back


def _sql_epoch(engine: Engine, prefix: str) -> str | None:
    with engine.connect() as conn:
        return conn.execute(sa.select(_EPOCHS.c.epoch)
                            .where(_EPOCHS.c.queue == prefix)).scalar_one_or_none()


def ensure(engine: Engine, client: redis.Redis, keys: Keys) -> str | None:
    """Step 1: give the queue an epoch if SQL records none; SQL's epoch afterwards. ``keys``:
    shard 0's. Once SQL has one, Redis is left as it is (``check`` judges it)."""
    recorded = _sql_epoch(engine, keys.prefix)
    if recorded is not None:
        return recorded
    client.set(keys.epoch, secrets.token_hex(8), nx=True)
    held = client.get(keys.epoch)
    if held is None:  # deleted between the two calls: the next start tries again
        return None
    _record(engine, keys.prefix, text(held))
    return _sql_epoch(engine, keys.prefix)


def restore(engine: Engine, client: redis.Redis, keys: Keys) -> str | None:
    """Step 2 (reconcile): Redis holds SQL's epoch again; the epoch it holds."""
    recorded = _sql_epoch(engine, keys.prefix)
    if recorded is None:
        return ensure(engine, client, keys)
    client.set(keys.epoch, recorded)
    return recorded


def ensure_intact(engine: Engine, client: redis.Redis, shards: Shards) -> str | None:
    """A worker node's start: ``ensure``, then ``check``; ``QueueLostError`` (one line, the fix
    as its hint) when Redis lost its data, else the epoch Redis holds."""
    ensure(engine, client, shards.coord)
    verdict = check(engine, client, shards)
    if not verdict.ok:
        raise QueueLostError(f"{verdict.message}; this node claims nothing until it is "
                             "reconciled", hint=verdict.hint)
    return verdict.redis_epoch
