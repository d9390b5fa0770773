"""What the live views show, read from Redis only: task counters, the due sets, workers, the
event stream, the last fair-share reorder.

1. ``read_tasks(client, keys, ids)``: each task's hash and parked list in one pipelined round
   trip, as :class:`TaskProgress`, whose counts and state come from ``scheduler.progress``
   (``from_task_hash``: ``failed`` by the host, ``lost`` with the worker, each job once).
2. ``list_task_ids(client, keys)``: the tasks Redis holds (``SCAN`` over ``{P}:task:*``, in
   pages, so Redis is never blocked).
3. ``task_totals`` (and ``scheduler.queue.depth.queue_counts``): the bounded reads a frame is
   made of, shared with the fleet exporter (``scheduler.monitoring``): one count for both.
4. ``take_snapshot(...)``: one frame of ``fleetsched top``: due now, overdue (late by more than
   the overload threshold), waiting for a later time (service windows, ``--at``, retry
   backoff), running, parked, held, dead; the unfinished tasks and the most recently finished;
   live workers (``Keys.workers`` heartbeats); recorder lag; the ``Keys.stats`` figures.

Each takes the keys of one shard or a queue's ``Shards`` (``scheduler.queue.shards``): a task's
hash, parked list and held set are read in the task's shard (``Shards.of_task``), the task ids
are listed shard by shard, and the counts, the recorder lag and the stream length are summed
over the shards; presence is read in shard 0. A queue of one shard: the reads of an unsharded
queue, key for key.

``take_snapshot`` first asks which shards answer (``scheduler.queue.depth.answering``: one
EXISTS per shard) and reads those only: a shard whose master is failing over, or down, is in
the frame's ``shards_down`` (its number, hash tag and the error) and left out of its figures,
instead of failing the whole frame (its tasks are not listed; shard 0 down: no workers).
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

import redis

from scheduler.progress import Progress, from_task_hash
from scheduler.queue.depth import QueueCounts, ShardsAnswering, answering, as_shards, queue_counts
from scheduler.queue.keys import Keys
from scheduler.queue.shards import Shards

RECENT_FINISHED = 3  # finished tasks top keeps showing
SCAN_PAGE = 1000


@dataclass
class TaskProgress:
    """One task's live counters (``{P}:task:<id>`` and the length of its parked list)."""

    task_id: str
    state: str = "unknown"
    prio: str = "normal"
    operator: str = ""
    action: str = ""
    total: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0  # failed by the host; the jobs lost with their worker are in `lost`
    lost: int = 0
    cancelled: int = 0
    losses: int = 0  # times a worker was lost while running one of its jobs (not a count of jobs)
    parked: int = 0
    created_ms: int = 0
    wave: int = 0  # a rollout in waves: the current wave, of `waves` (0: not in waves)
    waves: int = 0
    wave_state: str = ""
    wave_why: str = ""
    # The hosts running now, longest first, at most RUNNING_SHOWN (``read_running``): each
    # {"host", "job", "worker", "for_s"}; ``running`` counts them all.
    running_hosts: list[dict[str, Any]] = field(default_factory=list)

    @property
    def progress(self) -> Progress:
        """The counts and state every view prints (``scheduler.progress``)."""
        return Progress(total=self.total, succeeded=self.succeeded, failed=self.failed,
                        lost=self.lost, cancelled=self.cancelled, running=self.running,
                        recorded_state=self.state, rollout=self.wave_state)

    def wave_line(self) -> str:
        """``task 12 wave 2/3 gated: <why>`` ("" for a task not in waves)."""
        if not self.waves:
            return ""
        why = f": {self.wave_why}" if self.wave_why else ""
        return f"task {self.task_id} wave {self.wave}/{self.waves} {self.wave_state}{why}"

    @property
    def done(self) -> int:
        return self.progress.done

    @property
    def pending(self) -> int:
        """Jobs waiting (due, parked, held or deferred to a later time)."""
        return self.progress.pending

    @property
    def finished(self) -> bool:
        return self.progress.finished

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, **self.progress.counts(), "recorded_state": self.state,
                "finished": self.finished}


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def progress_from(task_id: str, data: dict[str, str], parked: int) -> TaskProgress | None:
    if not data:
        return None
    try:
        action = str(json.loads(data.get("spec") or "{}").get("action") or "")
    except (ValueError, AttributeError):
        action = ""
    counts = from_task_hash(data)
    return TaskProgress(
        task_id=task_id, state=data.get("state", "unknown"), prio=data.get("prio", "normal"),
        operator=data.get("operator", ""), action=action, parked=parked,
        created_ms=_int(data.get("created")),
        losses=_int(data.get("lost")),
        wave=_int(data.get("wave")), waves=_int(data.get("waves")),
        wave_state=data.get("wave_state", ""), wave_why=data.get("wave_why", ""),
        total=counts.total, running=counts.running, succeeded=counts.succeeded,
        failed=counts.failed, lost=counts.lost, cancelled=counts.cancelled)


# The task hash fields progress_from reads, but the spec (the action's name is in it): what a
# reader that needs no action name asks for, so a scrape of thousands of live tasks does not
# carry their specs.
PROGRESS_FIELDS = ("state", "prio", "operator", "created", "lost", "wave", "waves", "wave_state",
                   "wave_why", "total", "running", "succeeded", "failed", "lost_failed",
                   "cancelled")


def read_tasks(client: redis.Redis, where: Keys | Shards, task_ids: list[str], *,
               with_action: bool = True) -> list[TaskProgress | None]:
    """The progress of each task (None where Redis has no such task), in one round trip.
    ``with_action=False``: leave the action's name out and read only the counters' fields."""
    pipe = client.pipeline(transaction=False)
    shards = as_shards(where)
    for tid in task_ids:
        keys = shards.of_task(tid)
        if with_action:
            pipe.hgetall(keys.task(tid))
        else:
            pipe.hmget(keys.task(tid), PROGRESS_FIELDS)
        pipe.llen(keys.parked(tid))
    replies = pipe.execute() if task_ids else []
    if not with_action:
        replies[0::2] = [{k: v for k, v in zip(PROGRESS_FIELDS, r) if v is not None}
                         for r in replies[0::2]]
    return [progress_from(tid, replies[2 * i], _int(replies[2 * i + 1]))
            for i, tid in enumerate(task_ids)]


RUNNING_SHOWN = 8  # hosts running now that tasks watch names under a task's bar


def read_running(client: redis.Redis, where: Keys | Shards, tasks: list[TaskProgress], *,
                 limit: int = RUNNING_SHOWN, hosts: Collection[str] | None = None) -> None:
    """Fill in each task's ``running_hosts``: the jobs its shard holds a lease on (``leases``,
    which holds every running job: exact, not a heartbeat late), each job's host and owner
    (its hash), and how long it has run from its worker's presence (``since``, on the Redis
    clock; None until the worker's next beat). At most ``limit`` per task, longest running
    first, among ``hosts`` when given (a customer's: chosen before the cut, so its own hosts
    are never crowded out by others'). Four round trips, made only when a watched task has
    running jobs."""
    from scheduler.queue.presence import read_workers, redis_now_ms

    busy = [t for t in tasks if t.running > 0]
    for t in tasks:
        t.running_hosts = []
    if not busy:
        return
    shards = as_shards(where)
    lease_keys = sorted({shards.of_task(t.task_id).leases for t in busy})
    pipe = client.pipeline(transaction=False)
    for key in lease_keys:
        pipe.zrange(key, 0, -1)
    held = {str(j.decode() if isinstance(j, bytes) else j)
            for ids in pipe.execute() for j in ids}
    jobs = {t.task_id: sorted((j for j in held if j.rpartition(".")[0] == t.task_id),
                              key=_job_number)
            for t in busy}
    pipe = client.pipeline(transaction=False)
    order = [(tid, j) for tid, ids in jobs.items() for j in ids]
    for _tid, j in order:
        pipe.hmget(shards.of_job(j).job(j), ("host", "owner", "state"))
    replies = pipe.execute() if order else []
    workers = {w["worker"]: w for w in read_workers(client, shards.prefix)}
    now_ms = redis_now_ms(client, shards.coord)
    rows: dict[str, list[dict[str, Any]]] = {t.task_id: [] for t in busy}
    for (tid, job), reply in zip(order, replies):
        host, owner, state = (v.decode() if isinstance(v, bytes) else v for v in reply)
        if state != "running" or not host or (hosts is not None and host not in hosts):
            continue
        since = (workers.get(owner or "") or {}).get("since") or {}
        started = since.get(job) if isinstance(since, dict) else None
        rows[tid].append({"host": host, "job": job, "worker": owner or "",
                          "for_s": (round(max(0, now_ms - int(started)) / 1000, 1)
                                    if isinstance(started, int) else None)})
    for t in busy:
        found = rows[t.task_id]
        found.sort(key=lambda r: -(r["for_s"] if r["for_s"] is not None else -1))
        t.running_hosts = found[:limit]


def _job_number(job_id: str) -> int:
    n = job_id.rpartition(".")[2]
    return int(n) if n.isdigit() else 0


def list_task_ids(client: redis.Redis, where: Keys | Shards) -> list[str]:
    """Every task id with a hash in Redis (in any shard), sorted numerically where they are
    numbers. On a cluster each shard is scanned on the master serving its slot only (its keys
    can be nowhere else), so a master that does not answer fails no other shard's scan."""
    from scheduler.redisdb.cluster import is_cluster_client

    ids: list[str] = []
    for keys in as_shards(where).all:
        prefix = keys.task("")
        pattern = prefix.replace("[", "\\[").replace("?", "\\?").replace("*", "\\*") + "*"
        node = ({"target_nodes": client.get_node_from_key(keys.tag)}
                if is_cluster_client(client) else {})
        ids += [k[len(prefix):] for k in client.scan_iter(match=pattern, count=SCAN_PAGE,
                                                          **node)]
    return sorted(ids, key=lambda t: (0, int(t), t) if t.isdigit() else (1, 0, t))


@dataclass
class QueueSnapshot:
    """One frame of ``fleetsched top``."""

    now_ms: int
    due_now: int = 0
    overdue: int = 0
    oldest_late_ms: int = 0
    later: int = 0
    running: int = 0
    parked: int = 0
    held: int = 0
    dead: int = 0
    tasks: list[TaskProgress] = field(default_factory=list)
    finished_tasks: int = 0
    workers: list[dict[str, Any]] = field(default_factory=list)
    stream_length: int = 0
    recorder_lag: int = 0
    recorder_pending: int = 0
    stats: dict[str, str] = field(default_factory=dict)
    by_class: dict[str, int] = field(default_factory=dict)
    # Shards that did not answer, left out of every figure: {"shard", "tag", "error"} each.
    shards_down: list[dict[str, Any]] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "tasks"}
        out["tasks"] = [t.as_dict() for t in self.tasks]
        return out


@dataclass
class TaskTotals:
    """Jobs running, parked and held, summed over the given tasks."""

    running: int = 0
    parked: int = 0
    held: int = 0

    def later(self, counts: QueueCounts) -> int:
        """Jobs waiting for a later time (service windows, ``--at``, retry backoff): the due
        sets' future scores less the running jobs, which sit there at their lease expiry."""
        return max(0, counts.future - self.running)


def task_totals(client: redis.Redis, where: Keys | Shards,
                tasks: list[TaskProgress]) -> TaskTotals:
    """Sum the tasks' running and parked counts; ZCARD each one's held set (one round trip)."""
    out = TaskTotals(running=sum(t.running for t in tasks), parked=sum(t.parked for t in tasks))
    pipe = client.pipeline(transaction=False)
    shards = as_shards(where)
    for t in tasks:
        pipe.zcard(shards.of_task(t.task_id).held(t.task_id))
    out.held = sum(int(n) for n in pipe.execute()) if tasks else 0
    return out


def take_snapshot(client: redis.Redis, where: Keys | Shards, *, overload_threshold_ms: int = 100,
                  task_ids: list[str] | None = None) -> QueueSnapshot:
    """Read one frame (see the module docstring); ``task_ids`` limits the tasks shown. A shard
    that stops answering between the question and the read is asked about once more."""
    from scheduler.redisdb.connect import REDIS_ERRORS

    try:
        return _read_snapshot(client, answering(client, where), overload_threshold_ms, task_ids)
    except REDIS_ERRORS:
        return _read_snapshot(client, answering(client, where), overload_threshold_ms, task_ids)


def _read_snapshot(client: redis.Redis, shards: ShardsAnswering, overload_threshold_ms: int,
                   task_ids: list[str] | None) -> QueueSnapshot:
    from scheduler.queue.presence import read_workers
    from scheduler.record.sharded import total_backlog

    down = [{"shard": i, "tag": shards.queue.all[i].tag, "error": why} for i, why in shards.down]
    if not shards.all:  # no shard answers: a frame of nothing but that
        return QueueSnapshot(now_ms=int(time.time() * 1000), shards_down=down)
    counts = queue_counts(client, shards, overload_threshold_ms)
    snap = QueueSnapshot(now_ms=counts.now_ms, due_now=counts.due_now, overdue=counts.overdue,
                         oldest_late_ms=counts.oldest_late_ms, dead=counts.dead,
                         stream_length=counts.stream_length, stats=counts.stats,
                         by_class=counts.by_class, shards_down=down)
    if task_ids is None:
        ids = list_task_ids(client, shards)
    else:
        up = set(shards.all)
        ids = [t for t in task_ids if shards.of_task(t) in up]
    tasks = [t for t in read_tasks(client, shards, ids) if t is not None]
    totals = task_totals(client, shards, tasks)
    snap.running, snap.parked, snap.held = totals.running, totals.parked, totals.held
    snap.later = totals.later(counts)
    unfinished = [t for t in tasks if not t.finished]
    finished = [t for t in tasks if t.finished]
    snap.finished_tasks = len(finished)
    snap.tasks = unfinished + finished[-RECENT_FINISHED:] if task_ids is None else tasks
    if not shards.coord_down:
        snap.workers = [w for w in read_workers(client, shards.prefix) if not w["stale"]]
    snap.recorder_lag, snap.recorder_pending = total_backlog(client, shards)
    return snap


class RateMeter:
    """Jobs finished per second per task, over a sliding window of recent samples."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._samples: dict[str, deque[tuple[float, int]]] = {}

    def add(self, task_id: str, done: int, at: float | None = None) -> None:
        at = time.monotonic() if at is None else at
        samples = self._samples.setdefault(task_id, deque())
        samples.append((at, done))
        while len(samples) > 2 and at - samples[1][0] >= self.window_s:
            samples.popleft()

    def rate(self, task_id: str) -> float:
        samples = self._samples.get(task_id)
        if not samples or len(samples) < 2:
            return 0.0
        (t0, d0), (t1, d1) = samples[0], samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else 0.0

    def eta_s(self, task: TaskProgress) -> float | None:
        rate = self.rate(task.task_id)
        if task.finished:
            return 0.0
        return (task.total - task.done) / rate if rate > 0 else None


__all__ = ["RUNNING_SHOWN", "QueueSnapshot", "RateMeter", "TaskProgress", "TaskTotals",
           "list_task_ids", "progress_from", "read_running", "read_tasks", "take_snapshot",
           "task_totals"]
