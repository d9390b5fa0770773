"""The finisher: the one thread that ends jobs in the queue (ack, fail, release).

Everything that ends a running job arrives here as a message, in order, and is handled in
batches (a burst of finished jobs becomes one ``Queue.ack`` call):

1. ``done``: outcomes from a child. A job still on this node under the same token is acked
   (``ok``) or failed (retryable as the action said); an outcome for a job already ended here
   (timed out, interrupted) is dropped. The outcome of a run this node claimed again since
   (its lease ran out while the master was stopped) is sent under its old token all the same:
   Redis refuses it and records it as ``stale``, so the first run's result is in the record.
   Who a failure counts against (the host or the worker) is ``workers.blame``'s one rule.
2. ``timeout``: the watchdog found a job past its timeout: fail it with a timeout error
   (retryable only if the task is idempotent) and retire its child, which is killed once its
   other jobs are done or the grace period is over.
3. ``exit``: a child process ended. Its jobs still here are never left hanging:
   - if their orders never reached it (it died as the master sent them): released;
   - if the master killed it on purpose (shutdown, a timed-out job): *interrupted*: an
     idempotent job's lease is given back (``release``, no attempt counted), a non-idempotent
     job fails for good, since part of it may already have run;
   - if it died unexpectedly (kill -9, out of memory, a crash): *lost*: an idempotent job fails
     retryably (an attempt is counted, so a job that kills its process cannot loop forever),
     a non-idempotent one fails for good as lost.
4. ``undelivered``: jobs that could not be sent to their child never started: released.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import TYPE_CHECKING, Any

from scheduler.errors import QueueError
from scheduler.logs import job_context
from scheduler.queue.sharded import PartlyAnswered
from scheduler.queue.types import JobResult
from scheduler.redisdb.connect import REDIS_ERRORS, is_permanent
from workers.blame import Ending, blame_of
from workers.config import NodeConfig
from workers.metrics import NO_METRICS
from workers.pool import ChildHandle, Pool
from workers.protocol import Outcome
from workers.slots import Running, Slots
from workers.stats import NodeStats

if TYPE_CHECKING:
    from scheduler.queue.sharded import AnyQueue
    from workers.metrics import NodeMetrics

log = logging.getLogger(__name__)

DONE, TIMEOUT, EXIT, UNDELIVERED, STOP = "done", "timeout", "exit", "undelivered", "stop"


class Finisher:
    def __init__(self, queue_: AnyQueue, config: NodeConfig, slots: Slots, pool: Pool | None,
                 stats: NodeStats, metrics: NodeMetrics = NO_METRICS) -> None:
        self.metrics = metrics
        self.queue = queue_
        self.config = config
        self.slots = slots
        self.pool = pool
        self.stats = stats
        self.inbox: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="finisher", daemon=True)

    # -------------------------------------------------------------------- posting (any thread)

    def done(self, child: ChildHandle, outcomes: list[Outcome]) -> None:
        self.inbox.put((DONE, child, outcomes))

    def exited(self, child: ChildHandle) -> None:
        self.inbox.put((EXIT, child))

    def timed_out(self, running: Running) -> None:
        self.inbox.put((TIMEOUT, running))

    def undelivered(self, jobs: list[Running], reason: str) -> None:
        self.inbox.put((UNDELIVERED, jobs, reason))

    def start(self) -> None:
        self.thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Handle everything posted so far, then end the thread."""
        self.inbox.put((STOP,))
        self.thread.join(timeout)

    # ------------------------------------------------------------------------- the thread

    def _loop(self) -> None:
        while True:
            batch = [self.inbox.get()]
            while True:
                try:
                    batch.append(self.inbox.get_nowait())
                except queue.Empty:
                    break
            stop = any(item[0] == STOP for item in batch)
            try:
                self._handle([item for item in batch if item[0] != STOP])
            except Exception:  # noqa: BLE001 - the finisher must outlive any one bad batch
                log.exception("finisher: a batch could not be handled")
            if stop:
                return

    def _handle(self, batch: list[tuple[Any, ...]]) -> None:
        acks: list[tuple[str, int, JobResult]] = []
        # Tasks whose jobs ended here: one that printed or not, the task may have ended with it
        # (its live output stream, whoever published to it, then goes soon)
        ended: list[str] = []
        for item in batch:
            kind = item[0]
            if kind == DONE:
                for o in item[2]:
                    ended.append(o.job_id.rpartition(".")[0])
                    r = self.slots.finish(o.job_id, o.token)
                    if r is None:
                        if self.slots.finish_superseded(o.job_id, o.token) is not None:
                            self._stale_outcome(o)
                        continue
                    if o.started_ms:
                        self.stats.lateness_ms.append(o.started_ms - r.due_ms)
                    self.metrics.job_done(o.duration_ms, o.error_type)
                    result = JobResult(exit_code=o.exit_code, duration_ms=o.duration_ms,
                                       output=o.output)
                    if o.ok:
                        acks.append((o.job_id, o.token, result))
                    else:
                        self._fail(r, result, o.error or "the action failed", o.retryable,
                                   "failed")
            elif kind == TIMEOUT:
                ended.append(item[1].task_id)
                self._timeout(item[1])
            elif kind == EXIT:
                ended += [r.task_id for r in self.slots.of_child(item[1])]
                self._child_exit(item[1])
            elif kind == UNDELIVERED:
                self._never_started(
                    [r for r in item[1] if self.slots.finish(r.job_id, r.token) is not None],
                    item[2])
        if acks:
            self._ack(acks)
        if ended:
            self._end_streams(ended)

    def _end_streams(self, task_ids: list[str]) -> None:
        """The live output streams of those of these tasks that ended go soon (best effort:
        a stream left behind expires an hour after its last line anyway)."""
        from scheduler.queue.livestream import end_streams
        from scheduler.queue.shards import shards_of

        try:
            end_streams(self.queue.client, shards_of(self.config.settings), task_ids)
        except REDIS_ERRORS as exc:
            log.debug("live output: the ended tasks' streams keep their hour (%s)",
                      type(exc).__name__)

    # -------------------------------------------------------------------- queue transitions

    def _retrying(self, what: str, call: Any) -> Any:
        """Call ``call()``, retrying a lost Redis connection, or a reply that goes away by
        itself (a cluster failing over, a server loading), for up to a lease."""
        deadline = time.monotonic() + self.config.lease_ms / 1000
        delay = 0.05
        while True:
            try:
                return call()
            except REDIS_ERRORS as exc:
                if is_permanent(exc):
                    raise
                if time.monotonic() > deadline:
                    log.error("%s: Redis unreachable for a whole lease (%s); the leases will "
                              "expire and the queue will treat these jobs as lost", what, exc)
                    return None
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _retrying_batch(self, what: str, items: list[Any], call: Any) -> list[Any] | None:
        """``_retrying`` for a verb over a batch that may span shards: when only some shards
        answered (``PartlyAnswered``), what they did is kept and only the rest is sent again
        (acking a job twice would record a stale run of it). None: given up after a lease;
        the replies of the positions that did answer are then lost to the caller only."""
        replies: list[Any] = [None] * len(items)
        todo = list(range(len(items)))

        def attempt() -> list[Any]:
            nonlocal todo
            try:
                got = call([items[i] for i in todo])
            except PartlyAnswered as exc:
                for i, code in zip(todo, exc.codes):
                    replies[i] = code
                todo = [i for i, code in zip(todo, exc.codes) if code is None]
                raise
            for i, code in zip(todo, got):
                replies[i] = code
            todo = []
            return replies

        return self._retrying(what, attempt)

    def _ack(self, acks: list[tuple[str, int, JobResult]]) -> None:
        codes = self._retrying_batch("ack", acks,
                                     lambda part: self.queue.ack(self.config.worker_id, part))
        if codes is None:
            return
        ok = 0
        for (job_id, _token, _r), code in zip(acks, codes):
            if int(code) < 0:
                log.warning("job %s: ack refused (%s): another worker claimed it after this "
                            "node lost its lease", job_id, getattr(code, "name", code))
            else:
                ok += 1
        self.stats.add(acked=ok)

    def _stale_outcome(self, o: Outcome) -> None:
        """The outcome of a run this node has claimed again since: its ack or fail under the
        old token is refused by Redis, which records the result (event stale)."""
        log.warning("job %s: a run under token %d ended after this node claimed the job again "
                    "(its lease had run out); its result is recorded as stale", o.job_id, o.token)
        result = JobResult(exit_code=o.exit_code, duration_ms=o.duration_ms, output=o.output)
        try:
            if o.ok:
                self._retrying("ack", lambda: self.queue.ack(self.config.worker_id,
                                                             [(o.job_id, o.token, result)]))
            else:
                self._retrying("fail", lambda: self.queue.fail_job(
                    self.config.worker_id, o.job_id, o.token, result,
                    error=o.error or "the action failed", retryable=False))
        except QueueError:
            pass  # refused, as expected: the stale event is written

    def _fail(self, r: Running, result: JobResult, error: str, retryable: bool,
              ending: Ending) -> None:
        with job_context(task=r.task_id, job=r.job_id):
            self._fail_job(r, result, error, retryable, ending)

    def _fail_job(self, r: Running, result: JobResult, error: str, retryable: bool,
                  ending: Ending) -> None:
        def call() -> Any:
            return self.queue.fail_job(self.config.worker_id, r.job_id, r.token, result,
                                       error=error, retryable=retryable,
                                       blame=blame_of(ending))

        try:
            outcome = self._retrying("fail", call)
        except QueueError as exc:
            log.warning("job %s: fail refused (%s)", r.job_id, exc)
            return
        verdict = None if outcome is None else outcome.outcome
        if outcome is not None and outcome.aborted:
            # This failure aborted the task: sweep its pending, parked and held jobs now (a
            # parked job would otherwise wait for a finish that never comes). No operator: the
            # task stays "aborted", not "cancelled".
            task_id = r.job_id.rpartition(".")[0]
            try:
                self._retrying("cancel", lambda: self.queue.sweep_aborted(task_id))
            except QueueError as exc:
                log.warning("task %s: sweeping after its abort refused (%s)", task_id, exc)
        if verdict == "retry":
            self.stats.add(retried=1)
        elif verdict is not None:
            self.stats.add(failed=1)

    def _never_started(self, runs: list[Running], reason: str) -> None:
        """Jobs that never reached a child: giving their leases back is safe whatever the
        action."""
        if runs:
            log.warning("%d jobs could not be handed to a child (%s): released", len(runs), reason)
            self._release(runs)

    def _release(self, runs: list[Running]) -> None:
        leases = [(r.job_id, r.token) for r in runs]
        try:
            codes = self._retrying_batch(
                "release", leases, lambda part: self.queue.release(self.config.worker_id, part))
        except QueueError as exc:
            log.warning("release of %d jobs refused (%s); their leases will expire",
                        len(leases), exc)
            return
        if codes is not None:
            self.stats.add(released=sum(1 for c in codes if int(c) >= 0))

    def _timeout(self, r: Running) -> None:
        if self.slots.finish(r.job_id, r.token) is None:
            return  # it finished meanwhile
        self.stats.add(timed_out=1)
        elapsed = time.monotonic() - r.started
        error = (f"timed out: still running {elapsed:.1f}s after it started (timeout "
                 f"{r.timeout_s:g}s); the worker stopped it")
        self._fail(r, JobResult(duration_ms=int(elapsed * 1000)), error, r.idempotent,
                   "timeout")
        if r.child is not None and self.pool is not None:
            self.pool.retire(r.child, self.config.grace_s)

    def _child_exit(self, child: ChildHandle) -> None:
        self.slots.forget_superseded(child)
        runs = [r for r in self.slots.of_child(child)
                if self.slots.finish(r.job_id, r.token) is not None]
        # The child died before the master could write these to it (the send fails or is
        # yet to come): they never started.
        self._never_started([r for r in runs if not r.delivered],
                            f"child pid {child.pid} {child.describe_exit()}")
        runs = [r for r in runs if r.delivered]
        if not runs:
            return
        cause = f"its worker process (pid {child.pid}) {child.describe_exit()}"
        if child.killed_because is not None:
            reason = f"{cause} because {child.killed_because}"
            # Non-idempotent jobs first: failing them must not depend on the release working.
            for r in runs:
                if not r.idempotent:
                    self._fail(r, JobResult(), f"interrupted: {reason}; not re-run because "
                               "the task is not idempotent", False, "interrupted")
            interrupted = [r for r in runs if r.idempotent]
            if interrupted:
                self._release(interrupted)
            return
        self.stats.add(children_died=1)
        log.error("child pid %s %s with %d jobs running", child.pid, child.describe_exit(), len(runs))
        for r in runs:
            if r.idempotent:
                self._fail(r, JobResult(), f"lost: {cause} while the job ran", True, "lost")
            else:
                self._fail(r, JobResult(), f"lost: {cause} while the job ran; not re-run "
                           "because the task is not idempotent", False, "lost")
