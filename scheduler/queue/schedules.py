"""The Redis half of a schedule: its entry ``sched:<name>`` in the urgent due set.

A schedule waits in the due set like a job, scored by its next occurrence, with a small hash
``Keys.schedule(name)`` (``occurrence`` ms, fencing ``token``, ``owner``, ``state``). Any
worker's claim takes it (claim.lua: token + 1, leased like a job); the worker creates the
occurrence's task, then :func:`fire` moves the entry to the next occurrence, token-checked, in
one step with the ``fire`` and ``missed`` events. A worker that dies in between loses nothing:
the lease runs out, another worker claims the entry again and finds the task already in SQL.

1. :func:`arm`: put the entry at an occurrence (``add``, ``resume``, repair), keep or replace;
2. :func:`disarm`: take it out (``pause``, ``remove``), bumping nothing: the hash goes;
3. :func:`fire`: the token-checked transition (``scheduler/queue/lua/fire.lua``);
4. :func:`entry`: what Redis holds for a schedule (``schedules show``).

Entries live in shard 0 of a queue of several shards (``Shards.coord``): each function takes
one shard's ``Keys`` or the queue's ``Shards`` (``scheduler.queue.route.coord``). The schedules
themselves (their rows, firing an occurrence) are ``scheduler.schedules``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import redis

from scheduler.errors import Code, StaleTokenError
from scheduler.queue.route import Where, coord
from scheduler.queue.scripts import run_script

__all__ = ["PRIORITY", "arm", "disarm", "entry", "fire"]

PRIORITY = "urgent"  # schedule entries are claimed before any job: firing on time matters



def arm(client: redis.Redis, keys: Where, name: str, occurrence_ms: int, *,
        replace: bool = False) -> tuple[bool, int]:
    """Put the entry at ``occurrence_ms``; an existing entry is kept unless ``replace``.

    Returns (armed now, the entry's occurrence)."""
    keys = coord(keys)
    reply = run_script(client, "arm", [keys.schedule(name), keys.due(PRIORITY)],
                       [keys.schedule_entry(name), int(occurrence_ms), keys.wake,
                        "1" if replace else "0"])
    return reply[0] == 1, int(reply[1])


def disarm(client: redis.Redis, keys: Where, name: str) -> int | None:
    """Take the entry out of the due set; returns the occurrence it stood for (None: none)."""
    keys = coord(keys)
    pipe = client.pipeline(transaction=True)
    pipe.hget(keys.schedule(name), "occurrence")
    pipe.zrem(keys.due(PRIORITY), keys.schedule_entry(name))
    pipe.delete(keys.schedule(name))
    occurrence, _, _ = pipe.execute()
    return int(occurrence) if occurrence else None


def fire(client: redis.Redis, keys: Where, name: str, *, worker: str, token: int,
         occurrence_ms: int, next_ms: int | None, events: Sequence[dict[str, Any]]) -> Code:
    """Move the claimed entry to ``next_ms`` (None: remove it) and append ``events``.

    ``Code.OK``, or ``Code.STALE_TOKEN`` when the claim is no longer the entry's holder
    (nothing written)."""
    keys = coord(keys)
    try:
        run_script(client, "fire", [keys.schedule(name), keys.due(PRIORITY), keys.events],
                   [keys.schedule_entry(name), worker, int(token), int(occurrence_ms),
                    "" if next_ms is None else int(next_ms), keys.wake,
                    json.dumps([{k: str(v) for k, v in e.items()} for e in events])])
    except StaleTokenError:
        return Code.STALE_TOKEN
    return Code.OK


def entry(client: redis.Redis, keys: Where, name: str) -> dict[str, str]:
    """The entry's hash and its score (``score``: when it is due or its lease ends)."""
    keys = coord(keys)
    data = client.hgetall(keys.schedule(name))
    out = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
           for k, v in data.items()}
    score = client.zscore(keys.due(PRIORITY), keys.schedule_entry(name))
    if score is not None:
        out["score"] = str(int(score))
    return out
