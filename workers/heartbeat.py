"""Heartbeats: renew the leases of this node's running jobs, and say the node is alive.

Every ``heartbeat_ms`` (a third of the lease by default), one thread:

1. renews every running job's lease with ``Queue.extend`` in batches of :data:`EXTEND_BATCH`,
   so the lease can stay short (tens of seconds) while a job runs for hours;
2. marks a job whose lease could not be renewed (stale token: another worker claimed it after
   this node missed its lease) so nobody renews it again; its late ack will be refused. A job
   Redis does not know (``UNKNOWN_JOB``: Redis lost its data) is renewed again at every beat:
   reconcile brings it back under this node's token when the presence lists it. On a sharded
   queue, first, the claimed jobs that never started and that their claim could not give back
   (``ShardedQueue.keep_unstarted``) are renewed and given back;
3. checks that the queue's shard count is still the node's (a node left running with another
   ``queue_shards`` stops, ``ConfigError``);
4. sweeps the aborted tasks whose sweep nobody finished (``Queue.aborting``): the node that
   aborted a task sweeps it at once, but its reply may have been lost, or the node died;
5. writes the node's presence into the workers hash (``P:workers``: worker id -> JSON with
   node, pid, slots, busy, ms, ``running``: each running job's token, and ``since``: when
   each started, on the Redis clock) for ``fleetsched top``, ``tasks watch``, status and
   reconcile (which never queues again a job a live node runs), and removes it on exit;
6. watches the queue's epoch (``scheduler.record.epoch``; the one the node started on, else the
   first it reads): gone or another means Redis lost or replaced its data while the node ran.
   It logs one error line then (and one when reconcile has written the epoch back) and goes
   on: the jobs running here finish on their hosts (their ends are refused and reconcile
   decides about them), and stopping would cut them short for nothing.

A Redis hiccup costs one beat, not the thread: the next try comes within half a second. Any
other error ends the thread, and the node stops with it (``Node.fail``): a node whose leases
are no longer renewed must not go on claiming.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis

from scheduler.errors import Code, QueueError
from scheduler.queue.keys import Keys
from scheduler.queue.presence import redis_now_ms
from scheduler.queue.sharded import PartlyAnswered, ShardedQueue, recheck_shard_count
from scheduler.queue.shards import Shards
from scheduler.queue.types import text
from scheduler.redisdb.connect import REDIS_ERRORS, is_permanent
from workers.config import NodeConfig
from workers.slots import Slots

if TYPE_CHECKING:
    from scheduler.queue.sharded import AnyQueue

log = logging.getLogger(__name__)

EXTEND_BATCH = 500


class Heartbeat:
    def __init__(self, queue: AnyQueue, client: redis.Redis, keys: Keys, config: NodeConfig,
                 slots: Slots, extra: Callable[[], dict[str, Any]] | None = None,
                 shards: Shards | None = None) -> None:
        self.queue = queue
        self.shards = shards or Shards(keys.prefix, 1)
        self.client = client
        self.keys = keys
        self.config = config
        self.slots = slots
        self.extra = extra or dict
        self.beats = 0
        self.lost_leases = 0
        self._unknown: set[str] = set()  # running jobs Redis did not know at the last beat
        self.epoch: str | None = None  # the queue epoch this node runs on (step 6)
        self.epoch_lost = False

    def renew(self) -> int:
        """Extend every running job's lease; the number renewed."""
        leases = self.slots.leases()
        self._unknown &= {job_id for job_id, _ in leases}
        renewed = 0
        partly: Exception | None = None
        for i in range(0, len(leases), EXTEND_BATCH):
            chunk = leases[i:i + EXTEND_BATCH]
            try:
                codes = self.queue.extend(self.config.worker_id, chunk,
                                          lease_ms=self.config.lease_ms)
            except PartlyAnswered as exc:
                # A shard did not answer: its leases wait for the retry, the others renew.
                partly, codes = exc, exc.codes
            except REDIS_ERRORS as exc:
                if is_permanent(exc):
                    raise
                # This chunk's leases all live where nothing answered (a task's jobs share
                # a shard): the next chunks may live elsewhere, so go on.
                partly, codes = exc, [None] * len(chunk)
            for (job_id, token), code in zip(chunk, codes):
                if code is None:
                    continue
                if int(code) < 0 and not self.slots.holds(job_id, token):
                    # It ended while the renewal was on its way: the finisher takes a job out
                    # of the slots before its ack deletes the job hash, so this is not a loss.
                    continue
                if code == Code.UNKNOWN_JOB:
                    # Redis lost its data (or the job ended elsewhere): keep renewing, since
                    # reconcile may bring it back under this token (the presence lists it)
                    if job_id not in self._unknown:
                        self._unknown.add(job_id)
                        log.warning("job %s: Redis does not know it any more (did it lose its "
                                    "data?); it runs on here, and its lease is renewed again "
                                    "once reconcile brings it back", job_id)
                    continue
                if int(code) < 0:
                    self.lost_leases += 1
                    self.slots.mark_lease_lost(job_id)
                    log.warning("job %s: lease could not be renewed (%s); another worker may "
                                "have it now", job_id, getattr(code, "name", code))
                else:
                    renewed += 1
        if partly is not None:
            raise partly  # retried within half a second, like any Redis hiccup
        return renewed

    def sweep_aborted(self) -> int:
        """Sweep every aborted task still waiting for its sweep; how many jobs it cancelled.
        Usually there is none: one SMEMBERS per shard."""
        cancelled = 0
        try:
            aborting = self.queue.aborting()
        except REDIS_ERRORS as exc:
            if is_permanent(exc):
                raise
            return 0  # a shard that does not answer: its aborted tasks wait for the next beat
        for task_id in aborting:
            try:
                n = self.queue.sweep_aborted(task_id)
            except QueueError as exc:  # a refused sweep must not stop the heartbeat
                log.warning("task %s: its sweep after an abort was refused (%s)", task_id, exc)
                continue
            if n:
                log.warning("task %s: swept after its abort (%d waiting jobs cancelled)",
                            task_id, n)
            cancelled += n
        return cancelled

    def presence(self, now_ms: int) -> dict[str, Any]:
        """The presence record; ``ms`` is the Redis clock, which every reader compares with."""
        snap = self.slots.snapshot()
        return {"node": socket.gethostname(), "pid": os.getpid(), "slots": snap["slots"],
                "busy": snap["busy"], "ms": now_ms, "lease_ms": self.config.lease_ms,
                "heartbeat_ms": self.config.heartbeat_ms,
                "running": self.slots.tokens(), "since": self.slots.since(now_ms),
                **self.extra()}

    def beat(self) -> None:
        failed: Exception | None = None
        if isinstance(self.queue, ShardedQueue):
            # First, in the jobs' own shards: claimed jobs a claim could not give back (their
            # places not settled, their shard silent then) are renewed and given back.
            self.queue.keep_unstarted(self.config.worker_id, lease_ms=self.config.lease_ms)
        try:
            self.renew()
        except REDIS_ERRORS as exc:
            if is_permanent(exc):
                raise
            failed = exc  # some leases wait for the retry; the node is alive all the same
        recheck_shard_count(self.client, self.shards)  # ConfigError: the node stops
        self.client.hset(self.keys.workers, self.config.worker_id,
                         json.dumps(self.presence(redis_now_ms(self.client, self.keys))))
        self.watch_epoch()
        self.beats += 1
        self.sweep_aborted()  # after the presence: a silent shard must not make the node look dead
        if failed is not None:
            raise failed

    def expect_epoch(self, epoch: str | None) -> None:
        """The queue epoch the node started on (``workers.serve``, after its check); None: the
        first one a beat reads."""
        self.epoch = epoch

    def watch_epoch(self) -> None:
        """Step 6: one GET; one log line when the epoch goes or changes, one when it is back."""
        raw = self.client.get(self.keys.epoch)
        have = text(raw) if raw is not None else None
        if self.epoch is None:
            self.epoch = have
        elif have == self.epoch:
            if self.epoch_lost:
                self.epoch_lost = False
                log.warning("the queue's epoch %s is back in Redis (reconciled): claiming from "
                            "the repaired queue", self.epoch)
        elif not self.epoch_lost:
            self.epoch_lost = True
            now = "no epoch" if have is None else f"another queue's epoch {have}"
            log.error("the queue lost its data: Redis holds %s at %s, this node started on %s "
                      "(Redis restarted empty or was replaced); nothing queued before runs "
                      "again until fleetsched reconcile, which puts the jobs running here back "
                      "under this node's leases",
                      now, self.keys.epoch, self.epoch)

    def leave(self) -> None:
        try:
            self.client.hdel(self.keys.workers, self.config.worker_id)
        except REDIS_ERRORS as exc:
            log.warning("could not remove this worker from %s: %s", self.keys.workers, exc)

    def run(self, stop: threading.Event) -> None:
        interval = self.config.heartbeat_ms / 1000
        while True:
            wait = interval
            try:
                self.beat()
            except REDIS_ERRORS as exc:
                if is_permanent(exc):
                    raise  # the node stops: leases it cannot renew must run out, not linger
                wait = min(interval, 0.5)  # a lease does not survive many missed beats
                log.warning("heartbeat failed (%s); retrying in %.1fs", exc, wait)
            if stop.wait(wait):
                return
