"""Worker presence as the heartbeats leave it in ``P:workers``, read for status and the views.

Each node's heartbeat (``workers.heartbeat``) writes its presence (node, pid, slots, busy, the
time of the beat in ``ms``, its ``lease_ms`` and ``heartbeat_ms``); :func:`read_workers` turns
the hash into rows with the age of each beat, whether the node is ``silent`` (it missed
``SILENT_BEATS`` beats in a row: killed or stuck, though its presence stays until it is stale)
and whether it is ``stale`` (no beat for two leases: most likely dead). Both sides read the Redis clock (:func:`redis_now_ms`), never
their own: the nodes and the operator's machine need not agree on the time.

Presence is held across shards: a queue in N shards keeps it in shard 0 (``Shards.coord``,
``Keys(prefix)``), so ``read_workers(client, prefix)`` reads the one hash whatever the count.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import redis

from scheduler.config import LEASE_MS
from scheduler.queue.keys import Keys

__all__ = ["SILENT_BEATS", "Tally", "is_alive", "read_workers", "redis_now_ms", "tally"]

SILENT_BEATS = 3  # beats missed in a row before a node counts as silent, not alive


def redis_now_ms(client: redis.Redis, keys: Keys = Keys()) -> int:
    """The Redis server's clock in ms since the epoch. On a cluster, the clock of the master
    serving ``keys``' slot: the one the queue's scripts read."""
    if isinstance(client, redis.RedisCluster):
        seconds, micros = client.time(target_nodes=client.get_node_from_key(keys.tag))
    else:
        seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def read_workers(client: redis.Redis, prefix: str) -> list[dict[str, Any]]:
    """The workers hash as rows (worker id, its last presence, ``age_s`` since that beat).

    A worker whose beat is older than two leases is most likely dead; ``stale`` says so. One
    that missed ``SILENT_BEATS`` beats (a third of a lease each unless its presence says
    otherwise) is ``silent``: the views count it apart from the live ones at once.
    """
    keys = Keys(prefix)
    now_ms = redis_now_ms(client, keys)
    rows: list[dict[str, Any]] = []
    for worker, raw in sorted(client.hgetall(keys.workers).items()):
        worker = worker.decode() if isinstance(worker, bytes) else worker
        try:
            data = json.loads(raw)
        except ValueError:
            data = {}
        age = max(0, now_ms - int(data.get("ms") or 0)) / 1000
        lease = int(data.get("lease_ms") or LEASE_MS) / 1000
        beat = int(data.get("heartbeat_ms") or 0) / 1000 or lease / 3
        rows.append({"worker": worker, **data, "age_s": round(age, 1),
                     "silent": age > SILENT_BEATS * beat, "stale": age > 2 * lease})
    return rows


def is_alive(worker: dict[str, Any]) -> bool:
    """A row of :func:`read_workers` that counts as alive (and its slots as the fleet's) in
    every view: ``top``, ``status``, the exporter and the console."""
    return not worker["stale"] and not worker["silent"]


@dataclass(frozen=True)
class Tally:
    """Rows of :func:`read_workers` split as every view counts them: the live ones (whose
    slots are the fleet's), and how many are silent (not yet stale) or stale."""

    alive: list[dict[str, Any]]
    silent: int
    stale: int

    @property
    def slots(self) -> int:
        return sum(int(w.get("slots") or 0) for w in self.alive)

    @property
    def busy(self) -> int:
        return sum(int(w.get("busy") or 0) for w in self.alive)


def tally(workers: list[dict[str, Any]]) -> Tally:
    """``workers`` counted by :func:`is_alive`, silent and stale apart."""
    alive = [w for w in workers if is_alive(w)]
    stale = sum(1 for w in workers if w["stale"])
    return Tally(alive, len(workers) - len(alive) - stale, stale)
