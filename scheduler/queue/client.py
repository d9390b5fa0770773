"""The Python face of the queue's Lua verbs (``scheduler/queue/lua/<verb>.lua``): ``Queue``.

Owns, for every verb:
1. validating the arguments before any script runs (bad input raises ``BadArgumentError`` and
   writes nothing; the scripts validate again before their first write);
2. packing KEYS (every key a script touches, named by ``scheduler.queue.keys.Keys``) and ARGV;
3. splitting big batches into script-sized chunks (enqueue, extend, ack, release, cancel);
4. turning negative script codes into typed errors (``scheduler.errors.error_for``);
5. waiting for work on the ``{P}:wake`` channel until the earliest due time, without polling.

Scripts come from the registry (``scheduler.queue.scripts``: registered once per client; redis-py
reloads one that a ``SCRIPT FLUSH`` or a restart dropped). Time is the Redis clock, read inside
the scripts.
"""

from __future__ import annotations

import json
import os
import random
import secrets
import time
from collections.abc import Sequence
from typing import Any

import redis

from scheduler.config import LEASE_MS
from scheduler.errors import Code, error_for
from scheduler.queue.keys import PRIORITY_CLASSES, Keys
from scheduler.queue.scripts import raise_if_error, scripts_for
from scheduler.queue.types import (
    MAX_BATCH,
    OUTPUT_MAX,
    Carried,
    Claim,
    ClaimedJob,
    ClaimedSchedule,
    FailOutcome,
    JobResult,
    JobSpec,
    TaskSpec,
    ack_entries,
    bad,
    check_job_id,
    check_leases,
    check_ms,
    check_task_id,
    check_worker,
    enqueue_entries,
    signed,
    text,
)
from scheduler.principal import Principal
from scheduler.redisdb.connect import SOCKET_TIMEOUT_S

__all__ = ["Carried", "Claim", "ClaimedJob", "FailOutcome", "JobResult", "JobSpec", "Queue", "TaskSpec"]


ENQUEUE_CHUNK = 1_000  # jobs per enqueue script call: one call stays well under a millisecond
ACK_CHUNK = 200  # jobs per ack / extend / release call
CANCEL_CHUNK = 500  # job ids per cancel call
RETRY_CHUNK = 500  # job ids per retry_failed call
RESUME_CHUNK = 1_000  # held jobs moved back per resume call
REPRIORITIZE_CHUNK = 500  # job ids walked per reprioritize call
BACKOFF_CAP_MS = 3_600_000  # exponential retry backoff never waits longer than an hour
OUTPUT_CAP = OUTPUT_MAX  # characters of job output one event carries (valid JSON kept so)
ERROR_CAP = 8_192  # characters of an error or a deferral reason kept in an event
SCAN_FACTOR = 4  # claim visits at most batch * SCAN_FACTOR + SCAN_EXTRA due entries per call
SCAN_EXTRA = 64
MEMO_CAP_MS = 600_000  # a reply memo lives at most 10 minutes (one key per ended run)
REPLY_WAIT_MS = int(2 * SOCKET_TIMEOUT_S * 1000)  # a node waits this long for a reply, and retries




CODES = {int(code): code for code in Code}  # a dict lookup is cheaper than Code(value) per job
_json = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode
"""Compact JSON for script arguments; text passes through as UTF-8 (as a plain argument would)."""




def _score(value: float) -> str:
    """A sorted-set score as exact text (integral ms without a trailing .0)."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _wake_score(data: Any) -> float:
    """The due time a wake message announces (0, i.e. wake now, if it is not a number)."""
    try:
        return float(text(data))
    except ValueError:
        return 0.0


class Queue:
    """The queue of one shard: jobs waiting in due sets, claimed under leases, acknowledged.

    Responsibilities:
    1. create tasks and enqueue their jobs (``create_task``, ``enqueue``);
    2. hand due jobs to workers with a fencing token (``claim``), renew (``extend``) and end
       their leases (``ack``, ``fail``, ``defer``, ``release``); a stale token changes nothing;
    3. operator verbs on a task (``pause``, ``resume``, ``cancel_task``, ``reprioritize``,
       ``retry_failed``);
    4. tell workers when to look again (``next_due``, ``wait_for_work``);
    5. apply fair-share reorder chunks (``reorder_chunk``; the reorder is scheduler/queue/fairshare.py).
    """

    def __init__(self, client: redis.Redis, keys: Keys = Keys(), *,
                 lease_ms: int = LEASE_MS) -> None:
        self.client = client
        self.keys = keys
        self.lease_ms = self._lease(lease_ms)
        self._scripts = scripts_for(client)
        self._task_key_cache: dict[str, list[str]] = {}
        self._pubsub: redis.client.PubSub | None = None
        self._pubsub_pid = 0
        self._claim_request: str | None = None  # a claim whose reply never came: replayed

    def _lease(self, lease_ms: int | None) -> int:
        """A verb's lease: ``lease_ms``, else this queue's; an integer of ms like every ms
        argument (how long a lease must be is the rule of ``scheduler.config.check_lease``)."""
        lease = self.lease_ms if lease_ms is None else lease_ms
        check_ms("lease_ms", lease, minimum=1)
        return lease

    @property
    def memo_ms(self) -> int:
        """How long ack, fail, release and defer remember their outcome, and a claim its reply,
        for a repeat (their reply lost): a lease (a node retries a verb for that long) plus
        ``REPLY_WAIT_MS`` (a reply that stalled past the socket timeout is sent again after it),
        capped by ``MEMO_CAP_MS`` so a long lease does not keep a key per ended run for hours."""
        return min(self.lease_ms + REPLY_WAIT_MS, MEMO_CAP_MS)

    def call(self, verb: str, keys: list[str], args: list[Any]) -> Any:
        """Run a verb's script (``lua/<verb>.lua``); an error reply raises its typed error."""
        return raise_if_error(self._scripts[verb](keys=keys, args=args))

    def _job_keys(self, job_id: str) -> list[str]:
        """[job hash, task hash, parked list] of a job; the task's two are cached per task."""
        task_id = job_id.rpartition(".")[0]
        task_keys = self._task_key_cache.get(task_id)
        if task_keys is None:
            if len(self._task_key_cache) > 1_000:
                self._task_key_cache.clear()
            task_keys = self._task_key_cache[task_id] = [self.keys.task(task_id), self.keys.parked(task_id)]
        return [self.keys.job(job_id), *task_keys]

    # ---------------------------------------------------------------- tasks and jobs in

    def create_task(self, spec: TaskSpec, carried: Carried | None = None) -> bool:
        """Write the task's live state once. False: the task existed and is left unchanged.
        ``carried``: a task recreated from SQL starts with its ended jobs counted, and paused
        if SQL says so, in the same step (reconcile)."""
        args = [*spec.script_args(), carried.script_arg() if carried else ""]
        reply = self.call("create_task", [self.keys.task(spec.task_id), self.keys.events], args)
        return reply[0] == 1

    def enqueue(self, task_id: str, jobs: Sequence[JobSpec]) -> int:
        """Queue jobs of a task at their due time; returns how many were new (duplicates skip).

        Every job is validated before the first chunk is sent, so bad input writes nothing.
        """
        check_task_id(task_id)
        entries = enqueue_entries(task_id, jobs)
        added = 0
        keys = [self.keys.task(task_id), *self.keys.all_due(), self.keys.stats, self.keys.events]
        for start in range(0, len(entries), ENQUEUE_CHUNK):
            args = [self.keys.tag, task_id, self.keys.wake, _json(entries[start:start + ENQUEUE_CHUNK])]
            added += int(self.call("enqueue", keys, args)[0])
        return added

    def restore(self, task_id: str, jobs: Sequence[tuple[Any, ...]]) -> int:
        """Reconcile: put back jobs of a task that Redis lost and that may not simply be queued
        again: ``(mode, job id, host, attempt, token, owner, due_ms[, result])``, mode "run" (a
        live node reports it running: back under its token and owner), "lost" (it may have run
        and nobody runs it: failed as lost), "ack" or "fail" (its late result, refused and
        recorded, decides it; ``result``: exit_code, duration_ms, output, error) or "cancel"
        (its task had ended: cancelled). How many came back; see ``lua/restore.lua``."""
        check_task_id(task_id)
        entries: list[list[str]] = []
        for mode, job_id, host, attempt, token, owner, due_ms, *result in jobs:
            check_job_id(job_id, task_id)
            if mode not in ("run", "lost", "ack", "fail", "retry", "cancel"):
                raise bad(f"restore mode must be run, lost, ack, fail, retry or cancel, not "
                          f"{mode!r}")
            entry = [mode, job_id, host, str(int(attempt)), str(int(token)), owner,
                     str(int(due_ms))]
            if mode in ("ack", "fail"):
                entry.append(_json({k: str(v) for k, v in result[0].items()}))
            entries.append(entry)
        if not entries:
            return 0
        keys = [self.keys.task(task_id), *self.keys.all_due(), self.keys.dead, self.keys.events]
        return int(self.call("restore", keys,
                             [self.keys.tag, task_id, self.lease_ms, _json(entries)])[0])

    # ---------------------------------------------------------------- worker verbs

    def claim(self, worker: str, batch: int, *, lease_ms: int | None = None,
              shard_mode: str = "", with_hosts: bool = False) -> Claim:
        """Take up to ``batch`` due jobs, urgent first; see scheduler/queue/lua/claim.lua.
        ``shard_mode`` ('coord', 'remote'): this queue is one shard of a sharded queue
        (scheduler/queue/sharded.py). ``with_hosts``: also read each claimed job's host hash
        in the same call (``Claim.hosts``).

        Every call carries a request id. When a call gets no reply (a reset, a timeout: it may
        have run), the id is kept, and the next claim sends it again: Redis answers with what
        the first call claimed, so no job is claimed for a node that never heard of it. redis-
        py's own retries of the call send the same id too."""
        check_worker(worker)
        if isinstance(batch, bool) or not isinstance(batch, int) or not 1 <= batch <= MAX_BATCH:
            raise bad(f"batch must be an integer from 1 to {MAX_BATCH}, not {batch!r}")
        lease = self._lease(lease_ms)
        if self._claim_request is None:
            self._claim_request = secrets.token_hex(8)
        keys = [*self.keys.all_due(), self.keys.dead, self.keys.events]
        args = [self.keys.tag, worker, batch, lease, batch * SCAN_FACTOR + SCAN_EXTRA, self.keys.wake,
                shard_mode, "1" if with_hosts else "", self._claim_request, self.memo_ms]
        try:
            now, next_due, claimed, lost, fires, *more = self.call("claim", keys, args)
        except (redis.ConnectionError, redis.TimeoutError):
            raise  # no reply: the next claim replays this request id
        except BaseException:
            self._claim_request = None  # a reply came (an error one): nothing to replay
            raise
        self._claim_request = None
        rows = json.loads(claimed) or []
        if len(rows) > batch:  # a replay of a claim that asked for more: the rest go back
            self.release(worker, [(row[0], int(row[3])) for row in rows[batch:]])
            rows = rows[:batch]
        jobs = ClaimedJob.from_replies(rows)
        hosts = {job.job_id: dict(zip(flat[::2], flat[1::2])) if flat else {}  # {}: unknown
                 for job, flat in zip(jobs, json.loads(more[0]) or ())} if more else {}
        places = [(job, row[9] == "1", row[10]) for job, row in zip(jobs, rows) if len(row) > 9]
        return Claim(now_ms=int(now), jobs=jobs, next_due_ms=None if next_due < 0 else int(next_due),
                     lost=[text(x) for x in lost],
                     schedules=[ClaimedSchedule.from_reply(f) for f in json.loads(fires) or ()],
                     places=places, hosts=hosts)

    def places(self, mode: str, entries: Sequence[Sequence[Any]], *,
               lease_ms: int | None = None) -> list[Any]:
        """Shard 0 of a sharded queue: take, free or extend the places of other shards' jobs
        (scheduler/queue/lua/places.lua); one result per entry."""
        if not entries:
            return []
        lease = self._lease(lease_ms)
        reply = self.call("places", [self.keys.events],
                          [self.keys.tag, self.keys.wake, mode, lease, _json(list(entries))])
        return json.loads(reply) or []

    def extend(self, worker: str, leases: Sequence[tuple[str, int]], *,
               lease_ms: int | None = None) -> list[Code]:
        """Renew leases (heartbeat): one code per job; STALE_TOKEN means the lease is gone."""
        check_worker(worker)
        check_leases(leases)
        lease = self._lease(lease_ms)
        codes: list[Code] = []
        for start in range(0, len(leases), ACK_CHUNK):
            chunk = leases[start:start + ACK_CHUNK]
            keys, args = list(self.keys.all_due()), [lease, len(chunk)]
            for job_id, token in chunk:
                keys += self._job_keys(job_id)[:2]
                args += [job_id, token]
            codes += [CODES[c] for c in self.call("extend", keys, args)]
        return codes

    def ack(self, worker: str, done: Sequence[tuple[str, int, JobResult]]) -> list[Code]:
        """Jobs succeeded: one code per job (OK, or STALE_TOKEN / NOT_RUNNING / UNKNOWN_JOB)."""
        check_worker(worker)
        entries = ack_entries(done, OUTPUT_CAP)
        keys = [self.keys.events, *self.keys.all_due()]
        codes: list[Code] = []
        for start in range(0, len(entries), ACK_CHUNK):
            jobs = _json(entries[start:start + ACK_CHUNK])  # one argument: see ack.lua
            args = [self.keys.tag, worker, self.keys.wake, jobs, self.memo_ms]
            codes += [CODES[c] for c in self.call("ack", keys, args)]
        return codes

    def fail_job(self, worker: str, job_id: str, token: int, result: JobResult, *, error: str,
                 retryable: bool = True, blame: str = "host") -> FailOutcome:
        """A running job failed: retried with backoff, or failed for good (see FailOutcome).

        ``blame``: "host" (what the host did counts against max_failures and wave limits) or
        "worker" (the run was lost with its worker: counts against max_attempts only; see
        ``workers.blame``). Raises StaleTokenError when the job was claimed again since this
        worker's claim. The same token's fail again answers the first outcome (fail.lua).
        """
        if blame not in ("host", "worker"):
            raise bad(f"blame must be 'host' or 'worker', not {blame!r}")
        check_worker(worker)
        check_leases([(job_id, token)])
        task_id = job_id.rpartition(".")[0]
        keys = [self.keys.job(job_id), self.keys.task(task_id), *self.keys.all_due(),
                self.keys.parked(task_id), self.keys.dead, self.keys.events]
        args = [self.keys.tag, worker, self.keys.wake, job_id, token, 1 if retryable else 0,
                error[:ERROR_CAP], *result.script_args(OUTPUT_CAP), random.random(), BACKOFF_CAP_MS,
                self.memo_ms, blame]
        outcome, due_ms = self.call("fail", keys, args)
        return FailOutcome(outcome="retry" if outcome == 1 else "failed",
                           due_ms=int(due_ms) if outcome == 1 else None, aborted=outcome == 3)

    def fail(self, worker: str, job_id: str, token: int, result: JobResult, *, error: str,
             retryable: bool = True, blame: str = "host") -> str:
        """``fail_job(...).outcome``: "retry" or "failed". StaleTokenError if claimed again."""
        return self.fail_job(worker, job_id, token, result, error=error, retryable=retryable,
                             blame=blame).outcome

    def defer(self, worker: str, job_id: str, token: int, due_ms: int, *, wclose_ms: int | None,
              reason: str) -> Code:
        """Pending again at ``due_ms`` (0 = now) without counting an attempt; OK or why not."""
        check_worker(worker)
        check_leases([(job_id, token)])
        check_ms("due_ms", due_ms)
        if wclose_ms is not None:
            check_ms("wclose_ms", wclose_ms)
        task_id = job_id.rpartition(".")[0]
        keys = [self.keys.job(job_id), self.keys.task(task_id), *self.keys.all_due(),
                self.keys.parked(task_id), self.keys.events]
        args = [self.keys.tag, worker, self.keys.wake, job_id, token, due_ms,
                "" if wclose_ms is None else wclose_ms, reason[:ERROR_CAP], self.memo_ms]
        reply = self._scripts["defer"](keys=keys, args=args)
        if reply[0] == Code.BAD_ARGUMENT:
            raise error_for(reply[0], text(reply[1]))
        return Code(reply[0])

    def release(self, worker: str, leases: Sequence[tuple[str, int]]) -> list[Code]:
        """Give leases back without counting an attempt (shutdown): pending at their due time."""
        check_worker(worker)
        check_leases(leases)
        codes: list[Code] = []
        for start in range(0, len(leases), ACK_CHUNK):
            chunk = leases[start:start + ACK_CHUNK]
            keys = [self.keys.events, *self.keys.all_due()]
            args: list[Any] = [self.keys.tag, worker, self.keys.wake, len(chunk), self.memo_ms]
            for job_id, token in chunk:
                keys += self._job_keys(job_id)
                args += [job_id, token]
            codes += [CODES[c] for c in self.call("release", keys, args)]
        return codes

    # ---------------------------------------------------------------- operator verbs

    def _task_keys(self, task_id: str) -> list[str]:
        return [self.keys.task(task_id), *self.keys.all_due(), self.keys.parked(task_id),
                self.keys.held(task_id), self.keys.events]

    def sweep_aborted(self, task_id: str) -> int:
        """After a failure aborted the task (``FailOutcome.aborted``, or found in the shard's
        aborting set by ``aborting()``): cancel its pending, parked and held jobs; the task
        stays ``aborted``. Nothing happens when an operator's retry-failed revived it first
        (it is not aborted any more). Safe to run twice, or on two nodes at once."""
        return self.cancel_task(task_id, "", _abort_sweep=True)

    def aborting(self) -> list[str]:
        """The aborted tasks of this shard whose sweep has not finished (``Keys.aborting``):
        what ``sweep_aborted`` still has to do, whoever's reply was lost."""
        return sorted(text(x) for x in self.client.smembers(self.keys.aborting))

    def cancel_task(self, task_id: str, operator: Principal | str, *,
                    _abort_sweep: bool = False) -> int:
        """Cancel the task and its pending, parked and held jobs; returns how many were cancelled.

        Also the way to sweep the pending jobs of a task that a failure aborted (its state stays
        ``aborted``). Running jobs finish. Walks the job ids in chunks: Redis is never blocked long.
        """
        check_task_id(task_id)
        first = 2 if _abort_sweep else 1
        name, principal = signed(operator)
        _, span, going_on = self.call("cancel", self._task_keys(task_id),
                                      [task_id, name, first, 0, principal])
        if not int(going_on):
            return 0
        cancelled = 0
        starts = range(0, int(span), CANCEL_CHUNK) or [0]
        for start in starts:
            ids = [f"{task_id}.{k}" for k in range(start, min(start + CANCEL_CHUNK, int(span)))]
            last = 1 if start == starts[-1] else 0
            keys = self._task_keys(task_id) + [self.keys.job(i) for i in ids]
            count, _, going_on = self.call("cancel", keys,
                                           [task_id, name, 0, last, principal, *ids])
            cancelled += int(count)
            if not int(going_on):
                break  # revived meanwhile (retry-failed): its jobs are queued again, not ours
        return cancelled

    def set_group_limit(self, group: str, limit: int | None, operator: str) -> None:
        """Most jobs running at once on ``group``'s hosts, across all tasks (None: no limit);
        the jobs waiting for the group go back to their due sets. Hosts name their limited
        groups in their hash's ``limits`` field (``scheduler.queue.hosts``)."""
        if not isinstance(group, str) or not group or "," in group:
            raise bad(f"group name {group!r} must be non-empty text without a comma")
        if limit is not None and (type(limit) is not int or limit < 1):
            raise bad(f"group limit must be an integer >= 1 or None, not {limit!r}")
        self.call("group_limit", [self.keys.glimit, self.keys.events],
                  [self.keys.tag, group, "" if limit is None else limit, self.keys.wake,
                   operator])

    def pause(self, task_id: str, operator: Principal | str) -> None:
        """Pause an active task (no-op if paused); its due jobs are held until resume."""
        check_task_id(task_id)
        self.call("pause", [self.keys.task(task_id), self.keys.events],
                  [task_id, *signed(operator)])

    def resume(self, task_id: str, operator: Principal | str) -> int:
        """Resume a paused task; returns how many held jobs went back into their due set."""
        check_task_id(task_id)
        keys = [self.keys.task(task_id), self.keys.held(task_id), *self.keys.all_due(), self.keys.events]
        moved, first = 0, 1
        name, principal = signed(operator)
        while True:
            args = [self.keys.tag, task_id, name, RESUME_CHUNK, first, self.keys.wake, principal]
            count, remaining = self.call("resume", keys, args)
            moved += int(count)
            first = 0
            if int(count) == 0 or int(remaining) == 0:
                return moved

    def reprioritize(self, task_id: str, priority: str, operator: Principal | str) -> int:
        """Move a task to another class (urgent, normal, bulk); returns the pending jobs moved.

        The task's class changes at once (event ``reprioritize``), then its pending jobs move in
        chunks, each keeping its score; claims meanwhile are safe (see reprioritize.lua).
        """
        check_task_id(task_id)
        if priority not in PRIORITY_CLASSES:
            raise bad(f"priority must be one of {', '.join(PRIORITY_CLASSES)}, not {priority!r}")
        fixed = [self.keys.task(task_id), *self.keys.all_due(), self.keys.events]
        name, principal = signed(operator)
        args: list[Any] = [task_id, priority, name, 1, self.keys.wake, principal]
        moved, span = self.call("reprioritize", fixed, args)[:2]
        for start in range(0, int(span), REPRIORITIZE_CHUNK):
            stop = min(start + REPRIORITIZE_CHUNK, int(span))
            ids = [f"{task_id}.{k}" for k in range(start, stop)]
            reply = self.call("reprioritize", fixed + [self.keys.job(i) for i in ids],
                              [task_id, priority, name, 0, self.keys.wake, principal, *ids])
            moved += int(reply[0])
        return int(moved)

    def retry_failed(self, task_id: str, operator: Principal | str
                     ) -> list[tuple[str, list[str]]]:
        """Queue the task's failed jobs again, each with a new attempt budget, walking its job
        ids in chunks (see retry_failed.lua); an aborted task becomes active again. Returns
        (event id, job ids) for each chunk that queued any failed job again."""
        span = int(self.task_state(task_id).get("span") or 0)
        fixed = [self.keys.task(task_id), *self.keys.all_due(), self.keys.dead, self.keys.events]
        moved: list[tuple[str, list[str]]] = []
        name, principal = signed(operator)
        for start in range(0, max(span, 1), RETRY_CHUNK):
            ids = [f"{task_id}.{k}" for k in range(start, min(start + RETRY_CHUNK, span))]
            reply = self.call("retry_failed", fixed + [self.keys.job(i) for i in ids],
                              [task_id, name, self.keys.wake, principal, *ids])
            if int(reply[0]):
                event_id = text(reply[1])
                entry = self.client.xrange(self.keys.events, min=event_id, max=event_id)
                jobs = text(entry[0][1].get("jobs", "")).split() if entry else []
                moved.append((event_id, jobs))
        return moved

    def reorder_chunk(self, priority: str, token: str, lock_ms: int,
                      moves: Sequence[tuple[str, float, float]]) -> int | None:
        """Apply fair-share moves (job id, expected score, new score) to one class's due set.

        Returns how many jobs moved (a job claimed, finished or moved since it was read is
        skipped), or None when the overload lock ``token`` no longer holds (nothing written).
        Renews the lock for ``lock_ms``. See scheduler/queue/lua/reorder.lua and scheduler/queue/fairshare.py.
        """
        keys = [self.keys.due(priority), self.keys.overload_lock]
        keys += [self.keys.job(job_id) for job_id, _, _ in moves]
        args: list[Any] = [token, lock_ms, len(moves)]
        for job_id, expected, new in moves:
            args += [job_id, _score(expected), _score(new)]
        moved, owned = self.call("reorder", keys, args)
        return int(moved) if owned else None

    # ---------------------------------------------------------------- waiting and reading

    def next_due(self) -> tuple[float, int | None]:
        """(Redis now in ms, to the microsecond; earliest score of any due set or None when
        all are empty)."""
        now, earliest, micros = self.call("next_due", self.keys.all_due(), [])
        return int(now) + int(micros) / 1000, None if earliest < 0 else int(earliest)

    def wait_for_work(self, timeout_s: float) -> None:
        """Sleep until the earliest due time, a wake message, or ``timeout_s``, whichever first.

        Subscribed to ``{P}:wake`` before reading the earliest due time, so a job queued in
        between wakes us. A wake announcing a due time later than the planned wake-up (an old
        one, or a job far in the future) is ignored. Returns at once if something is due now.
        """
        if not isinstance(timeout_s, (int, float)) or timeout_s < 0:
            raise bad(f"timeout must be a non-negative number of seconds, not {timeout_s!r}")
        pubsub = self._subscription()
        try:
            while pubsub.get_message(timeout=0.0) is not None:
                pass  # wakes that arrived while we were busy are stale now
            now, earliest = self.next_due()
            sleep = timeout_s if earliest is None else min(timeout_s, max(0, earliest - now) / 1000)
            wake_at_ms = now + sleep * 1000
            deadline = time.monotonic() + sleep
            while (left := deadline - time.monotonic()) > 0:
                message = pubsub.get_message(timeout=left)
                if message is not None and message["type"] == "message" \
                        and _wake_score(message["data"]) < wake_at_ms:
                    return  # a job due before we planned to wake (a later one can wait)
        except (redis.ConnectionError, redis.exceptions.RedisClusterException):
            self._close_subscription()
            raise

    def _subscription(self) -> redis.client.PubSub:
        if self._pubsub is not None and self._pubsub_pid == os.getpid():
            return self._pubsub
        pubsub = self.client.pubsub()
        pubsub.subscribe(self.keys.wake)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the subscription is active once confirmed
            message = pubsub.get_message(timeout=max(0.0, deadline - time.monotonic()))
            if message is not None and message["type"] == "subscribe":
                break
        self._pubsub, self._pubsub_pid = pubsub, os.getpid()
        return pubsub

    def _close_subscription(self) -> None:
        if self._pubsub is not None and self._pubsub_pid == os.getpid():
            self._pubsub.close()
        self._pubsub = None

    def close(self) -> None:
        """Drop the wake subscription's connection (the client stays the caller's)."""
        self._close_subscription()

    def task_state(self, task_id: str) -> dict[str, str]:
        """The task hash (state, counters, policy); empty if there is no such task."""
        check_task_id(task_id)
        return {text(k): text(v) for k, v in self.client.hgetall(self.keys.task(task_id)).items()}

    def job_state(self, job_id: str) -> dict[str, str]:
        """The job hash; empty once the job succeeded or was cancelled (its hash is deleted).

        Fields the hash leaves out to stay small are filled in: ``task`` (the id's prefix), and
        ``attempt`` and ``token`` ("0" until the first claim).
        """
        check_job_id(job_id)
        found = {text(k): text(v) for k, v in self.client.hgetall(self.keys.job(job_id)).items()}
        if not found:
            return found
        return {"task": job_id.rpartition(".")[0], "attempt": "0", "token": "0", **found}

