"""The node master: one per worker node (seed 002). Claims jobs and hands them to children.

Responsibilities, in the order a job meets them:

1. Wait without a fixed polling interval: ``Queue.wait_for_work`` sleeps until the earliest
   due time or a wake notification; a full node waits for a free slot instead.
2. Claim as many jobs as there are free slots (``Queue.claim(worker, batch)``), in one call
   that also reads their hosts' connection data.
3. Give every claimed job with a window to the deferral hook (``workers.deferral``); read the
   task specs the jobs need (cached; a new task's in one pipelined read); fail for good a job
   whose task or host is unknown.
4. Place the jobs on child processes (started up to the node's limit) and send each child its
   share in one message.
5. Meanwhile the finisher acks and fails finished jobs in batches, the heartbeat renews the
   leases and the node's presence, the watchdog stops jobs past their timeout, and a recorder
   given to the constructor copies events into SQL in a thread (``fleetsched worker`` runs its
   recorder in a process of its own instead: ``workers.recorder_process``).
6. On :meth:`stop`: stop claiming, let running jobs finish within the grace period, then kill
   the children and give back the leases of the rest (``Queue.release``, no attempt counted;
   a non-idempotent job that was interrupted fails for good instead of running twice).
7. After every claim, the overload check (``scheduler.queue.fairshare.maybe_reorder``): free unless
   the claim shows the queue's head late by more than the threshold; a reorder it starts runs
   in a thread of its own.
8. Schedule entries a claim returns (``Claim.schedules``) go to the firer thread
   (``workers.firer``), which creates each occurrence's task and moves the entry on.
9. The wave controller thread (``workers.waver``) moves rollouts in waves on: releases the
   next wave, pauses, gates, health checks, stops.
10. With ``metrics_port`` set, every count above also goes to the node's metrics
    (``workers.metrics``): outcomes through ``NodeStats``, the claim's round trip and each
    claimed job's wait here, durations in the finisher.

Every thread that talks to Redis has its own ``Queue`` object; children never touch the queue
(they only append their jobs' lines to the tasks' output streams, ``workers.liveout``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

import redis

from scheduler.errors import ConfigError
from scheduler.logs import job_context
from scheduler.queue import fairshare
from scheduler.queue.client import JobResult
from scheduler.queue.keys import Keys
from scheduler.queue.sharded import check_shard_count, open_queue
from scheduler.queue.shards import Shards, shards_of
from scheduler.redact import redact_exception
from scheduler.redisdb.connect import REDIS_ERRORS, is_permanent
from scheduler.windows.wire import HOST_FREEZES
from workers.config import NodeConfig
from workers.deferral import window_deferral
from workers.finisher import Finisher
from workers.firer import Firer
from workers.heartbeat import Heartbeat
from workers.inputs import InputReader
from workers.metrics import NO_METRICS, NodeMetrics
from workers.pool import ChildHandle, Pool
from workers.protocol import Order
from workers.slots import Running, Slots
from workers.stats import NodeStats
from workers.watchdog import Watchdog
from workers.waver import Waver

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from scheduler.queue.types import Claim, ClaimedJob
    from scheduler.record.recorder import Recorder

log = logging.getLogger(__name__)

WAIT_CAP_S = 0.5
"""Longest single wait for work: how late a stop request may be noticed while idle."""

WARM_UP_S = 30.0
"""Longest wait at start for the warm children to load actions and executors."""


class Node:
    """One worker node's master. ``run()`` blocks until ``stop()`` and the shutdown are done."""

    def __init__(self, config: NodeConfig, client: redis.Redis, keys: Keys | None = None,
                 *, recorder: Recorder | None = None, pool: Pool | None = None) -> None:
        """``pool``: children booted before the node (``workers.serve``); its lock must be
        the one its ``Slots`` share."""
        self.config = config
        self.client = client
        settings = config.settings
        self.shards = shards_of(settings) if keys is None else Shards(keys.prefix,
                                                                         settings.queue_shards)
        self.keys = self.shards.coord  # presence and schedules: shard 0
        check_shard_count(client, self.shards)
        self.stats = NodeStats()
        self.slots = Slots(config.slots, lock=pool.lock if pool is not None else None)
        self.metrics: Any = NO_METRICS
        if config.settings.metrics_port:
            self.metrics = NodeMetrics(self.slots)
            self.stats.listener = self.metrics.counted
        self.finisher = Finisher(self._queue(), config, self.slots, None, self.stats,
                                 self.metrics)
        self.pool = pool if pool is not None else Pool(config, self.slots.lock)
        self.pool.attach(self.finisher.done, self.finisher.exited)
        self.finisher.pool = self.pool
        self.inputs = InputReader(client, self.shards, self._queue())
        self.heartbeat = Heartbeat(self._queue(), client, self.keys, config, self.slots,
                                   extra=self._presence_extra, shards=self.shards)
        self.watchdog = Watchdog(self.slots, self.pool, self.finisher)
        self.recorder = recorder
        self.firer = Firer(config.settings, client, self.shards, config.worker_id,
                           getattr(recorder, "engine", None))
        self.waver = Waver(config.settings, client, self.keys)
        self._claimq = self._queue()
        self._stopping = threading.Event()
        self._background_stop = threading.Event()
        self._grace_until: float | None = None
        self._threads: list[threading.Thread] = []
        self.started = threading.Event()
        self.fatal: str | None = None  # why the node stopped on its own, if it did

    def _queue(self) -> Any:
        """A queue object of this thread's own (a ``ShardedQueue`` for a sharded queue)."""
        return open_queue(self.client, self.shards, lease_ms=self.config.lease_ms, check=False)

    def use_engine(self, engine: Engine) -> None:
        """The SQL engine the schedule firer records occurrences with (before ``run``)."""
        self.firer = Firer(self.config.settings, self.client, self.shards, self.config.worker_id,
                           engine)

    def _presence_extra(self) -> dict[str, Any]:
        return {"processes": len(self.pool.children), "acked": self.stats.acked,
                "failed": self.stats.failed}

    # ------------------------------------------------------------------------------ control

    def stop(self, fast: bool = False) -> None:
        """First call: stop claiming, let running jobs finish within the grace period.
        A second call, or ``fast``: give running jobs' leases back now."""
        now = time.monotonic()
        if fast or self._stopping.is_set():
            self._grace_until = now
        elif self._grace_until is None:
            self._grace_until = now + self.config.grace_s
        self._stopping.set()

    def fail(self, why: str) -> None:
        """Stop the node because a part of it cannot go on: loudly, giving leases back now.

        A node half alive (claiming while its heartbeat is dead, or retrying a refused claim
        forever while it reports itself alive) is worse than a stopped one: the queue sees a
        stopped node and its jobs come back after their leases."""
        if self.fatal is None:
            self.fatal = why
            log.critical("stopping the node: %s", why)
        self.stop(fast=True)

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def run(self) -> NodeStats:
        """Serve until stopped. Call it from a thread that lives until it returns: children die
        with the thread that started them (``PR_SET_PDEATHSIG``)."""
        self.finisher.start()
        try:  # whatever fails from here, the shutdown stops what was started
            self._spawn("watchdog", self.watchdog.run)
            if self.recorder is not None:
                self._spawn("recorder", self.recorder.run)
            # Claim nothing before a child can run it: a lease and a timeout start at the
            # claim. A stop meanwhile (a signal at start-up) ends the wait and claims nothing.
            self.pool.ensure_warm()
            self.pool.wait_ready(WARM_UP_S, until=self._stopping)
            if not self._stopping.is_set():
                self._spawn("heartbeat", self.heartbeat.run)  # it shows up in P:workers now
                self._spawn("waver", self.waver.run)
            self.started.set()
            self._claim_loop()
        finally:
            self._shutdown()
        return self.stats

    def _spawn(self, name: str, target: Any) -> None:
        def guarded(stop: threading.Event) -> None:
            try:
                target(stop)
            except ConfigError as exc:  # a setting to change (the shard count): one line
                self.fail(f"{exc}" + (f" ({exc.hint})" if getattr(exc, "hint", None) else ""))
            except BaseException as exc:  # noqa: BLE001 - no thread of a node dies silently
                log.exception("the %s thread died", name)
                self.fail(f"the {name} thread died: {type(exc).__name__}: "
                          f"{redact_exception(exc)}")

        t = threading.Thread(target=guarded, args=(self._background_stop,), name=name, daemon=True)
        t.start()
        self._threads.append(t)

    # ------------------------------------------------------------------------- claim loop

    def _claim_loop(self) -> None:
        idle_claims = 0
        while not self._stopping.is_set():
            free = self.slots.wait_free(timeout=0.2)
            if free <= 0 or self._stopping.is_set():
                continue
            asked = min(free, self.config.claim_batch)
            try:
                t0 = time.perf_counter()
                claim = self._claimq.claim(self.config.worker_id, asked,
                                           lease_ms=self.config.lease_ms, with_hosts=True)
                self.metrics.claimed_jobs(claim.now_ms, [j.due_ms for j in claim.jobs],
                                          time.perf_counter() - t0)
            except REDIS_ERRORS as exc:
                if is_permanent(exc):
                    self.fail(f"Redis refuses the claim: {redact_exception(exc)}")
                    break
                log.warning("claim failed (%s); retrying", redact_exception(exc))
                self._stopping.wait(0.5)
                continue
            for part_queue, part in claim.parts or [(self._claimq, claim)]:
                fairshare.maybe_reorder(part_queue, part, self.config.settings,
                                        worker=self.config.worker_id)
            if claim.schedules:
                self.firer.submit(claim)  # fired in its own thread (workers/firer.py)
            if claim.lost:
                self.stats.add(lost_seen=len(claim.lost))
                log.warning("jobs found lost by their worker and failed: %s", " ".join(claim.lost))
            if claim.jobs:
                idle_claims = 0
                self.stats.add(claimed=len(claim.jobs))
                try:
                    self._start(claim)
                except REDIS_ERRORS as exc:
                    self._give_back(claim, exc)
            if len(claim.jobs) >= asked:
                continue
            if claim.next_due_ms is not None and claim.next_due_ms <= claim.now_ms:
                # Due jobs are left, but this claim took none of them (parked, lost, skipped):
                # back off a little so a queue we cannot take from is not hammered.
                if not claim.jobs:
                    idle_claims += 1
                    self._stopping.wait(min(0.002 * 2 ** min(idle_claims, 5), 0.05))
                continue
            try:
                self._claimq.wait_for_work(WAIT_CAP_S)
            except REDIS_ERRORS as exc:
                if is_permanent(exc):
                    self.fail(f"Redis refuses to wait for work: {redact_exception(exc)}")
                    break
                log.warning("waiting for work failed (%s); retrying", redact_exception(exc))
                self._stopping.wait(0.5)

    def _start(self, claim: Claim) -> None:
        jobs = self._defer_outside_windows(claim)
        if self._stopping.is_set():
            # Stopped while claiming: give these back before anything runs.
            self._claimq.release(self.config.worker_id, [(j.job_id, j.token) for j in jobs])
            self.stats.add(released=len(jobs))
            return
        inputs = self.inputs.read(jobs, claim.hosts)
        now = time.monotonic()
        orders: list[Order] = []
        runs: list[Running] = []
        for job, inp in zip(jobs, inputs):
            if inp.problem is not None or inp.task is None or inp.host_data is None:
                self._fail_now(job, inp.problem or "no inputs")
                continue
            timeout_s = inp.task.timeout_ms / 1000
            orders.append(Order(job.job_id, job.token, job.task_id, job.host, inp.host_data,
                                inp.task.spec, timeout_s, job.due_ms, job.attempt, now))
            runs.append(Running(job.job_id, job.token, job.task_id, job.due_ms,
                                inp.task.idempotent, timeout_s, started=now,
                                deadline=now + timeout_s + self.config.kill_margin_s,
                                attempt=job.attempt))
        if not orders:
            return
        targets = self.pool.place([o.host for o in orders])
        if len(targets) < len(orders):
            # No child could take these (one failed to start): never run, so give them back.
            left = [(o.job_id, o.token) for o in orders[len(targets):]]
            self._claimq.release(self.config.worker_id, left)
            self.stats.add(released=len(left))
            orders, runs = orders[:len(targets)], runs[:len(targets)]
        by_child: dict[ChildHandle, list[int]] = defaultdict(list)
        for i, child in enumerate(targets):
            runs[i].child = child
            by_child[child].append(i)
        self.slots.add(runs)
        for child, idx in by_child.items():
            batch = [runs[i] for i in idx]

            def delivered(batch: list[Running] = batch) -> None:
                for r in batch:
                    r.delivered = True

            if not self.pool.dispatch(child, [orders[i] for i in idx], delivered):
                self.finisher.undelivered(batch, f"child pid {child.pid} is gone")

    def _give_back(self, claim: Claim, exc: Exception) -> None:
        """Redis failed between the claim and the start: none of these jobs has started."""
        leases = [(j.job_id, j.token) for j in claim.jobs if not self.slots.has(j.job_id)]
        log.warning("could not start %d claimed jobs (%s); giving them back", len(leases), exc)
        try:
            self._claimq.release(self.config.worker_id, leases)
            self.stats.add(released=len(leases))
        except REDIS_ERRORS:
            log.error("could not give %d jobs back either; their leases will expire",
                      len(leases))

    def _defer_outside_windows(self, claim: Claim) -> list[ClaimedJob]:
        keep = []
        for job in claim.jobs:
            frozen = claim.hosts.get(job.job_id, {}).get(HOST_FREEZES, "")  # freezes since
            if job.window is None and job.wclose_ms is None and not frozen:
                keep.append(job)
                continue
            info = self.inputs.task(job.task_id)
            expected = int(info.spec.get("expected_ms") or 0) if not isinstance(info, str) else 0
            deferral = window_deferral(self.client, self.keys, job, claim.now_ms, expected,
                                       frozen)
            if deferral is None:
                keep.append(job)
                continue
            if deferral.fail:
                self._fail_now(job, deferral.reason)
                continue
            self._claimq.defer(self.config.worker_id, job.job_id, job.token, deferral.due_ms,
                               wclose_ms=deferral.wclose_ms, reason=deferral.reason)
            self.stats.add(deferred=1)
        return keep

    def _fail_now(self, job: ClaimedJob, problem: str) -> None:
        with job_context(task=job.task_id, job=job.job_id, host=job.host, attempt=job.attempt):
            self._fail_job_now(job, problem)

    def _fail_job_now(self, job: ClaimedJob, problem: str) -> None:
        try:
            self._claimq.fail(self.config.worker_id, job.job_id, job.token, JobResult(),
                              error=problem, retryable=False)
            self.stats.add(failed=1)
        except Exception as exc:  # noqa: BLE001 - logged; the lease expiry is the backstop
            log.error("job %s could not be failed (%s): %s", job.job_id, problem, exc)

    # --------------------------------------------------------------------------- shutdown

    def _shutdown(self) -> None:
        if self._grace_until is None:
            self._grace_until = time.monotonic() + self.config.grace_s
        # Running jobs may finish within the grace period (a second stop() shortens it).
        while len(self.slots) and time.monotonic() < (self._grace_until or 0):
            self.slots.wait_empty(until=min(self._grace_until or 0, time.monotonic() + 0.1))
        busy = len(self.slots)
        if busy:
            log.warning("shutting down: %d jobs still running are given back", busy)
        self.pool.kill_all("the worker is shutting down")
        if not self.pool.wait_all_exited(10):
            log.error("some child processes did not exit")
        self.finisher.stop()
        self.firer.stop()
        self._background_stop.set()
        for t in self._threads:
            t.join(5)
        self.heartbeat.leave()
