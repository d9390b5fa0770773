"""Where the write side sends what it writes: one shard's ``Keys`` or a queue's ``Shards``.

The functions that write tasks, windows, schedules and group limits take ``keys: Keys |
Shards``. A ``Keys`` is one shard, exactly as before the queue had shards (tests, callers of
one shard); a ``Shards`` (``scheduler.queue.shards.shards_of(settings)``) routes:

- :func:`task_keys`: a task, its jobs and its hosts' copies go to the shard of the task;
- :func:`every_shard`: copies every shard keeps (service windows, a host's ``limits`` field);
- :func:`coord`: what holds across tasks (schedules, group limits, presence): shard 0;
- :func:`task_reader`: per-task key names for reading many tasks in one pipeline, each in its
  own shard (``tasks watch``/``wait``); a plain ``Keys`` when there is one shard.

With one shard every function returns the very ``Keys`` of today's queue: no extra round trip.
"""

from __future__ import annotations

from typing import Union

from scheduler.queue.keys import Keys
from scheduler.queue.shards import Shards

__all__ = ["TaskRouter", "Where", "as_shards", "coord", "every_shard", "task_keys",
           "task_reader"]

Where = Union[Keys, Shards]


def as_shards(where: Where) -> Shards:
    """The shards ``where`` names (a ``Keys``: that one shard)."""
    return where if isinstance(where, Shards) else Shards(where.prefix, 1)


def task_keys(where: Where, task_id: int | str) -> Keys:
    """The keys of the shard holding ``task_id``."""
    return where.of_task(str(task_id)) if isinstance(where, Shards) else where


def every_shard(where: Where) -> tuple[Keys, ...]:
    """Every shard's keys, shard 0 first."""
    return where.all if isinstance(where, Shards) else (where,)


def coord(where: Where) -> Keys:
    """Shard 0: schedules, group limits, node presence."""
    return where.coord if isinstance(where, Shards) else where


class TaskRouter:
    """The per-task key names of ``Keys`` (``task``, ``parked``, ``held``, ``waves``,
    ``job``), each in the shard of its task, for code that reads tasks of several shards
    with one ``Keys``-like object (``scheduler.views.snapshot.read_tasks``)."""

    def __init__(self, shards: Shards) -> None:
        self.shards = shards

    def task(self, task_id: str) -> str:
        return self.shards.of_task(task_id).task(task_id)

    def parked(self, task_id: str) -> str:
        return self.shards.of_task(task_id).parked(task_id)

    def held(self, task_id: str) -> str:
        return self.shards.of_task(task_id).held(task_id)

    def waves(self, task_id: str) -> str:
        return self.shards.of_task(task_id).waves(task_id)

    def job(self, job_id: str) -> str:
        return self.shards.of_job(job_id).job(job_id)


def task_reader(shards: Shards) -> Keys | TaskRouter:
    """Key names to read tasks by id: shard 0's ``Keys`` for one shard, else a router."""
    return TaskRouter(shards) if shards.sharded else shards.coord
