"""What a claimed job needs before it can run: its task's spec and its host's connection data.

1. The task's spec, timeout and idempotent flag are read once per task and cached (a task's
   spec never changes after it is created; a bounded LRU).
2. Host connection data (``P:host:<name>``, in the shard of the job's task) is read for every
   claimed job every time (an operator may fix a host's address while its task runs): the
   master's claim reads it in its own call (``claim(with_hosts=True)``); what that did not give
   is read here in one pipelined round trip with the task hashes not yet cached. A claim of a
   cached task's jobs costs no round trip here, a new task's one (this is on the path from a
   job's due time to its start).
3. A job whose task has no usable spec, or whose host is unknown, cannot run: it is reported
   with a clear message, for the master to fail it for good.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import redis

from scheduler.queue.shards import Shards

if TYPE_CHECKING:
    from scheduler.queue.sharded import AnyQueue

TASK_CACHE = 10_000
"""Tasks whose spec a node remembers (a few KiB each at most)."""

DEFAULT_TIMEOUT_MS = 3_600_000


@dataclass(frozen=True)
class TaskInfo:
    """The run-time facts of one task."""

    spec: dict[str, Any]
    timeout_ms: int
    idempotent: bool


@dataclass(frozen=True)
class Inputs:
    """One job's inputs, or the reason it cannot run."""

    task: TaskInfo | None
    host_data: dict[str, str] | None
    problem: str | None = None


def _flag(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.strip().lower() in ("1", "true", "yes")


def task_info_from(task_id: str, state: dict[str, str]) -> TaskInfo | str:
    """A :class:`TaskInfo` from a task hash, or a message saying what is wrong with it."""
    if not state:
        return f"task {task_id} is not in Redis"
    raw = state.get("spec")
    if not raw:
        return f"task {task_id} has no spec"
    try:
        spec = json.loads(raw)
    except ValueError:
        return f"task {task_id} has a spec that is not JSON"
    if not isinstance(spec, dict):
        return f"task {task_id} has a spec that is not a JSON object"
    try:
        timeout_ms = int(state.get("timeout_ms") or DEFAULT_TIMEOUT_MS)
    except ValueError:
        return f"task {task_id} has a timeout that is not a number"
    return TaskInfo(spec=spec, timeout_ms=timeout_ms, idempotent=_flag(state.get("idempotent"), False))


class InputReader:
    """Reads specs and hosts for claimed jobs; used by the master's claim loop only."""

    def __init__(self, client: redis.Redis, shards: Shards, queue: AnyQueue) -> None:
        self.client = client
        self.shards = shards
        self.queue = queue
        self._tasks: OrderedDict[str, TaskInfo | str] = OrderedDict()

    def task(self, task_id: str) -> TaskInfo | str:
        found = self._tasks.get(task_id)
        if found is not None:
            self._tasks.move_to_end(task_id)
            return found
        found = task_info_from(task_id, self.queue.task_state(task_id))
        if isinstance(found, TaskInfo):  # a missing task may still be created: do not cache
            self._remember(task_id, found)
        return found

    def _remember(self, task_id: str, info: TaskInfo) -> None:
        self._tasks[task_id] = info
        if len(self._tasks) > TASK_CACHE:
            self._tasks.popitem(last=False)

    def read(self, jobs: Sequence[Any], hosts_read: Mapping[str, dict[str, str]] | None = None
             ) -> list[Inputs]:
        """Inputs of each of ``jobs`` (``ClaimedJob``s), in order. ``hosts_read``: host data
        the claim already read, by job id (``Claim.hosts``); the rest is read here."""
        if not jobs:
            return []
        known = hosts_read or {}
        unread = [job for job in jobs if job.job_id not in known]
        new = list(dict.fromkeys(j.task_id for j in jobs if j.task_id not in self._tasks))
        replies: list[Any] = []
        if unread or new:
            pipe = self.client.pipeline(transaction=False)
            for job in unread:
                pipe.hgetall(self.shards.of_task(job.task_id).host(job.host))
            for task_id in new:
                pipe.hgetall(self.shards.of_task(task_id).task(task_id))
            replies = pipe.execute()
        fetched = dict(zip((job.job_id for job in unread), replies))
        hosts = [known[job.job_id] if job.job_id in known else fetched[job.job_id]
                 for job in jobs]
        read = {task_id: task_info_from(task_id, _text(state))
                for task_id, state in zip(new, replies[len(unread):])}
        for task_id, info in read.items():
            if isinstance(info, TaskInfo):  # a missing task may still be created: not cached
                self._remember(task_id, info)
        out: list[Inputs] = []
        for job, host_data in zip(jobs, hosts):
            info = read.get(job.task_id) or self.task(job.task_id)
            if isinstance(info, str):
                out.append(Inputs(None, None, info))
            elif not host_data:
                out.append(Inputs(info, None, f"unknown host {job.host!r}: it has no connection "
                                  "data in Redis (was it removed from the inventory?)"))
            else:
                out.append(Inputs(info, _text(host_data)))
        return out


def _text(data: dict[Any, Any]) -> dict[str, str]:
    """A hash as str -> str whether or not the client decodes responses."""
    return {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
            for k, v in data.items()}
