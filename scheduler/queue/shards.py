"""Which queue shard holds what: ``Shards``, the key names of every shard of one queue.

A queue of N shards (the ``queue_shards`` setting) is N sets of the keys in
``scheduler.queue.keys``, each under its own hash tag, so every Lua script still touches one
cluster slot. Shard 0 is ``{<prefix>}``, the same keys as an unsharded queue; shard i >= 1 is
``{<prefix>:<i>}`` or ``{<prefix>:<i>.<k>}`` (a queue prefix cannot hold ':', so no other
queue's keys collide). The 16,384 cluster slots are cut into N equal arcs; shard 0 sits in the
arc of its slot, and shard i takes the smallest ``k`` that puts its slot in the middle half of
the i-th of the other arcs. A cluster whose masters split the slots evenly (``redis-cli
--cluster create`` does) then serves the shards spread evenly over its masters, instead of
wherever the names happen to hash.

What lives where:
- a task, its jobs and their events: shard ``task id mod N`` (a task never spans shards, so
  its counters and limits stay atomic in one script);
- what holds across tasks: shard 0 (the coordination shard): node presence, schedules, host
  exclusivity and group limits (``busy``, ``glimit``, ``gbusy``, ``gholds``, and the places
  that jobs of other shards hold there, ``placed``/``places``); the shard count itself
  (``{<prefix>}:shards``, so nodes configured with another count refuse to start);
- copies, written to every shard that needs them: service windows (every shard), host
  hashes (the shard of each task that runs on the host).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import cached_property

from redis.crc import key_slot

from scheduler.queue.keys import DEFAULT_PREFIX, Keys

MAX_SHARDS = 64
SLOTS = 16_384  # hash slots of a Redis Cluster


def shard_number(task_id: str, count: int) -> int:
    """The shard of a task: its id mod ``count`` (ids are SQL integers; any other text, as in
    tests, by its CRC-32)."""
    if count == 1:
        return 0
    key = str(task_id)
    number = int(key) if key.isdigit() else zlib.crc32(key.encode())
    return number % count


@dataclass(frozen=True)
class Shards:
    """The shards of one queue. ``Shards("fs", 3).of_task("7")`` is shard 1's ``Keys``."""

    prefix: str = DEFAULT_PREFIX
    count: int = 1

    def __post_init__(self) -> None:
        if not isinstance(self.count, int) or not 1 <= self.count <= MAX_SHARDS:
            raise ValueError(f"queue shards must be 1-{MAX_SHARDS}, not {self.count!r}")

    @cached_property
    def all(self) -> tuple[Keys, ...]:
        """Every shard's keys, shard 0 first."""
        return tuple(Keys(self._shard_prefix(i)) for i in range(self.count))

    def _shard_prefix(self, i: int) -> str:
        if i == 0:
            return self.prefix
        arc = SLOTS / self.count
        taken = int(key_slot(f"{{{self.prefix}}}".encode()) // arc)  # shard 0's arc
        free_arcs = [a for a in range(self.count) if a != taken]
        middle = (free_arcs[i - 1] + 0.5) * arc
        for k in range(100_000):
            name = f"{self.prefix}:{i}" if k == 0 else f"{self.prefix}:{i}.{k}"
            if abs(key_slot(f"{{{name}}}".encode()) - middle) < arc / 4:
                return name
        raise AssertionError("no shard name found in its arc")  # 1 name in 2N fits

    @property
    def coord(self) -> Keys:
        """Shard 0: presence, schedules, host exclusivity and group limits."""
        return self.all[0]

    @property
    def sharded(self) -> bool:
        return self.count > 1

    def of_task(self, task_id: str) -> Keys:
        """The keys of the shard holding ``task_id``."""
        return self.all[shard_number(task_id, self.count)]

    def of_job(self, job_id: str) -> Keys:
        """The keys of the shard holding ``job_id`` (``<task id>.<n>``)."""
        return self.of_task(job_id.rpartition(".")[0])

    def index_of_task(self, task_id: str) -> int:
        return shard_number(task_id, self.count)

    @property
    def count_key(self) -> str:
        """STRING in shard 0: the shard count the queue was created with."""
        return f"{self.coord.tag}:shards"


def shards_of(settings: object) -> Shards:
    """The shards a ``Settings`` names (``queue_prefix``, ``queue_shards``)."""
    return Shards(getattr(settings, "queue_prefix", DEFAULT_PREFIX),
                  int(getattr(settings, "queue_shards", 1) or 1))
