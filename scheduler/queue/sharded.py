"""A queue of N shards behind the verbs of one: ``ShardedQueue``, and ``open_queue``.

Owns, for a queue whose ``queue_shards`` setting is above 1 (docs/architecture.md "Shards"):
1. routing: a task's verbs and its jobs' verbs go to the shard holding the task
   (``scheduler.queue.shards``); a batch spanning shards is split and its replies put back in
   the caller's order;
2. claiming across shards: each claim starts at a rotating shard (so no shard is always last)
   and visits the shards in turn until the batch is full (an empty shard's claim is a cheap
   script call; skipping shards believed idle would make a job landing there wait for a wake
   message that may arrive a moment after the claim);
3. the limits that hold across tasks: a job of shard s >= 1 that needs a host to itself or room
   in a limited group takes its places in shard 0 (places.lua) after its claim; a job refused
   is deferred in its shard by ``PLACE_RETRY_MS`` (no attempt counted) and tried again then;
   its place is freed when it stops running and renewed with its lease; a job that cannot
   take its places (shard 0 silent, or slower than ``PLACES_WAIT`` of the lease) is given back,
   and one that cannot be given back either is kept (renewed, and given back again at every
   heartbeat: ``keep_unstarted``): a job that never started is never left to be found lost;
4. waiting on every shard's wake channel until the earliest due time of any shard;
5. one shard failing (its master failing over) while the others answer: a verb that spans
   shards does its work in every shard that answers and raises ``PartlyAnswered`` with their
   replies, so the caller retries only the rest (a claim keeps what it took; a heartbeat still
   renews the leases and places it can).

A queue of one shard is a plain ``scheduler.queue.client.Queue``: ``open_queue`` returns one,
so the unsharded path pays nothing for this module.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import redis

from scheduler.config import LEASE_MS
from scheduler.errors import Code, ConfigError
from scheduler.principal import Principal
from scheduler.progress import from_task_hash
from scheduler.queue.client import Queue
from scheduler.queue.shards import Shards
from scheduler.queue.types import Carried, Claim, FailOutcome, JobResult, TaskSpec, text
from scheduler.redact import redact_exception
from scheduler.redisdb.connect import REDIS_ERRORS, is_permanent

log = logging.getLogger(__name__)

PLACE_RETRY_MS = 1_000
"""A job refused its places (its host busy with another shard's job, a group full) is tried
again this much later. Waiters of shard 0's own jobs are woken when room frees up; waiters of
other shards poll at this pace instead (a wake across shards could be lost in a crash)."""

DOWN_RETRY_MS = 500
"""A shard that did not answer is looked at again this soon (its master failing over)."""

_placed: dict[str, int] = {}
"""Job id -> token of this process's running jobs that hold places in shard 0: their end frees
them. Shared by every ShardedQueue of the process (the claim loop claims, the finisher acks)."""
_entries: dict[str, list[Any]] = {}
"""Job id -> its ``places.lua`` take entry, for the jobs in ``_placed``: a place found gone at a
renewal (it ran out, or shard 0 lost its data) is taken again with it."""
_owed: dict[str, int] = {}
"""Job id -> token of jobs this process claimed, never started, and could not give back (their
shard did not answer the release: a cluster failing over refuses every slot for a moment, a
script not loaded yet cannot be loaded while a master is down). The heartbeat renews their
leases and gives them back again (``ShardedQueue.keep_unstarted``) until their shard answers:
left to run out, a non-idempotent one would be failed as lost although it never ran."""
_placed_lock = threading.Lock()

PLACES_WAIT = 0.25
"""The share of a claim's lease that the claim waits for shard 0 to take its jobs' places.
Longer (shard 0 stalled: a paused or unreachable master, a call waiting for its socket
timeout), the jobs are given back at once while their own shard still holds their leases; a
take that lands later is freed again by the call's own thread. No places call is started while
an earlier one still hangs: shard 0 counts as silent."""


class PartlyAnswered(redis.exceptions.ConnectionError):
    """A verb over many shards reached some of them only. ``codes`` has the reply for each
    input position whose shard answered and None where it did not: the caller retries only
    the None positions (retrying the others would ack or release them twice). A connection
    error, so every retry loop treats it as the transient fault it is."""

    def __init__(self, codes: list[Any], cause: BaseException) -> None:
        super().__init__(f"{sum(c is None for c in codes)} of {len(codes)} not done: "
                         f"a shard did not answer ({redact_exception(cause)})")
        self.codes = codes


def check_shard_count(client: redis.Redis, shards: Shards) -> None:
    """Refuse (``ConfigError``, one line) a shard count other than the one the queue has.

    The first sharded user records the count in shard 0; an unsharded queue records nothing,
    so this costs one GET where nothing changes."""
    key = shards.count_key
    if shards.sharded and client.get(key) is None:
        live = _live_unsharded_task(client, shards)
        if live is not None:
            raise ConfigError(
                f"the queue {shards.coord.tag} still runs task {live} unsharded; "
                f"queue_shards = {shards.count} would lose track of it",
                hint="let its tasks end (or cancel them) before the first start with "
                     "queue_shards above 1")
        client.set(key, shards.count, nx=True)
    stored = client.get(key)
    have = int(text(stored)) if stored is not None else 1
    if have != shards.count:
        raise ConfigError(
            f"the queue {shards.coord.tag} has {have} shards, but queue_shards = {shards.count} here",
            hint="every node and CLI of one queue must use the same queue_shards; to change it, "
                 "drain the queue and delete the key " + key)


def recheck_shard_count(client: redis.Redis, shards: Shards, *, missing_ok: bool = False) -> None:
    """A running node's check (every heartbeat): ``ConfigError`` if the queue's recorded shard
    count is not this node's any more (a rolling change of ``queue_shards``: a node still
    running with the old count would fire tasks into shards the others never look at). One
    GET; records nothing. ``missing_ok``: a reader (the exporter) only refuses another count,
    not a count that is not recorded."""
    stored = client.get(shards.count_key)
    if stored is None:
        if not shards.sharded or missing_ok:
            return  # an unsharded queue records no count
        # Deleted to change queue_shards (the documented way), or lost with shard 0's data:
        # either way this node must not go on routing by a count nobody vouches for. A
        # restart records it again (check_shard_count) if the queue is still this count's.
        raise ConfigError(
            f"the queue {shards.coord.tag} no longer records its shard count "
            f"({shards.count_key}: deleted to change queue_shards, or lost with shard 0's "
            f"data); this node runs with queue_shards = {shards.count}; stopping",
            hint="start the node again with the queue_shards the queue is to have")
    have = int(text(stored))
    if have != shards.count:
        raise ConfigError(
            f"the queue {shards.coord.tag} now has {have} shards, but this node runs with "
            f"queue_shards = {shards.count}; stopping",
            hint="every node and CLI of one queue must use the same queue_shards: restart this "
                 "node with the new setting")


def _live_unsharded_task(client: redis.Redis, shards: Shards) -> str | None:
    """A task of shard 0 with jobs still to end, before the queue was sharded (scanned once,
    on the first sharded start: its id would route it to another shard from then on). A task
    whose jobs have all ended keeps its hash `active` in Redis: its counters say it is over
    (``scheduler.progress``, the one rule every view uses)."""
    prefix = f"{shards.coord.tag}:task:"
    for key in client.scan_iter(match=prefix + "*", count=1_000):
        name = text(key)
        task_id = name[len(prefix):]
        if shards.index_of_task(task_id) == 0:
            continue
        live = {text(k): text(v) for k, v in client.hgetall(name).items()}
        if live.get("state") in ("active", "paused") and not from_task_hash(live).finished:
            return task_id
    return None


def open_queue(client: redis.Redis, shards: Shards, *, lease_ms: int = LEASE_MS,
               check: bool = True) -> AnyQueue:
    """The queue to use: a ``Queue`` for one shard, else a ``ShardedQueue``."""
    if check:
        check_shard_count(client, shards)
    if not shards.sharded:
        return Queue(client, shards.coord, lease_ms=lease_ms)
    return ShardedQueue(client, shards, lease_ms=lease_ms)


class ShardedQueue:
    """The verbs of ``Queue`` over the shards of one queue (see the module docstring)."""

    def __init__(self, client: redis.Redis, shards: Shards, *, lease_ms: int = LEASE_MS) -> None:
        self.client = client
        self.shards = shards
        self.lease_ms = lease_ms
        self.parts = [Queue(client, keys, lease_ms=lease_ms) for keys in shards.all]
        self.coord = self.parts[0]
        self._modes = ["coord"] + ["remote"] * (len(self.parts) - 1)
        # Per shard: the earliest due time its last claim or look reported (None: nothing due).
        self._due: list[int | None] = [0] * len(self.parts)
        self._next = random.randrange(len(self.parts))
        self._down: set[int] = set()  # shards whose last claim did not answer (logged once)
        self._hanging: threading.Thread | None = None  # a places take past its wait (_take_in_time)
        self._pubsub: Any = None
        self._channels = {keys.wake: i for i, keys in enumerate(shards.all)}

    # ------------------------------------------------------------------------ routing

    def shard_of_task(self, task_id: str) -> Queue:
        return self.parts[self.shards.index_of_task(task_id)]

    def shard_of_job(self, job_id: str) -> Queue:
        return self.shard_of_task(job_id.rpartition(".")[0])

    def _by_shard(self, items: Sequence[Any], job_id: Any) -> dict[int, list[int]]:
        """Positions of ``items`` grouped by the shard of ``job_id(item)``."""
        groups: dict[int, list[int]] = defaultdict(list)
        for i, item in enumerate(items):
            groups[self.shards.index_of_task(job_id(item).rpartition(".")[0])].append(i)
        return groups

    def create_task(self, spec: TaskSpec, carried: Carried | None = None) -> bool:
        return self.shard_of_task(spec.task_id).create_task(spec, carried)

    def enqueue(self, task_id: str, jobs: Sequence[Any]) -> int:
        return self.shard_of_task(task_id).enqueue(task_id, jobs)

    def pause(self, task_id: str, operator: Principal | str) -> None:
        self.shard_of_task(task_id).pause(task_id, operator)

    def resume(self, task_id: str, operator: Principal | str) -> int:
        return self.shard_of_task(task_id).resume(task_id, operator)

    def cancel_task(self, task_id: str, operator: Principal | str) -> int:
        return self.shard_of_task(task_id).cancel_task(task_id, operator)

    def sweep_aborted(self, task_id: str) -> int:
        return self.shard_of_task(task_id).sweep_aborted(task_id)

    def aborting(self) -> list[str]:
        """Every answering shard's aborted tasks not swept yet (a silent shard's wait)."""
        found: list[str] = []
        for part in self.parts:
            try:
                found += part.aborting()
            except REDIS_ERRORS as exc:
                if is_permanent(exc):
                    raise
        return sorted(found)

    def reprioritize(self, task_id: str, priority: str, operator: Principal | str) -> int:
        return self.shard_of_task(task_id).reprioritize(task_id, priority, operator)

    def set_group_limit(self, group: str, limit: int | None, operator: str) -> None:
        self.coord.set_group_limit(group, limit, operator)

    def task_state(self, task_id: str) -> dict[str, str]:
        return self.shard_of_task(task_id).task_state(task_id)

    def job_state(self, job_id: str) -> dict[str, str]:
        return self.shard_of_job(job_id).job_state(job_id)

    # ------------------------------------------------------------------------ claiming

    def claim(self, worker: str, batch: int, *, lease_ms: int | None = None,
              with_hosts: bool = False) -> Claim:
        """Up to ``batch`` due jobs from the shards, starting at a rotating one; ``parts`` of
        the result holds each shard's own claim (for the fair-share check, per shard).

        A shard that does not answer is passed over (``next_due`` looks at it again within
        ``DOWN_RETRY_MS``): what the others gave is kept and returned, never dropped with the
        error. Only when no shard answers does the claim raise."""
        n = len(self.parts)
        start = self._next
        self._next = (self._next + 1) % n
        left, parts = batch, []
        jobs: list[Any] = []
        lost: list[str] = []
        schedules: list[Any] = []
        hosts: dict[str, dict[str, str]] = {}
        now_ms = 0
        failed: BaseException | None = None
        for step in range(n):
            if left <= 0:
                break
            i = (start + step) % n
            try:
                part = self.parts[i].claim(worker, left, lease_ms=lease_ms,
                                           shard_mode=self._modes[i], with_hosts=with_hosts)
            except REDIS_ERRORS as exc:
                if is_permanent(exc):
                    self._give_back(worker, jobs)
                    raise
                failed = failed or exc
                self._due[i] = None  # next_due (while waiting) looks at it again soon
                self._unanswered(i, exc)
                continue
            self._answered(i)
            self._due[i] = part.next_due_ms
            now_ms = max(now_ms, part.now_ms)
            try:
                got = self._take_places(worker, part, lease_ms) if part.places else part.jobs
            except REDIS_ERRORS as exc:
                # Taking or refusing places failed past what _take_places recovers itself:
                # this shard's jobs go back, the other shards' are kept.
                self._give_back(worker, jobs + part.jobs if is_permanent(exc) else part.jobs)
                if is_permanent(exc):
                    raise
                log.warning("shard %d: the places of its claimed jobs could not be settled "
                            "(%s); gave them back", i, redact_exception(exc))
                got = []
            parts.append((self.parts[i], part))
            jobs += got
            lost += part.lost
            schedules += part.schedules
            hosts.update(part.hosts)
            left -= len(got) + len(part.schedules)
        if failed is not None and not parts:
            raise failed
        known = [d for d in self._due if d is not None]
        return Claim(now_ms=now_ms, jobs=jobs, next_due_ms=min(known) if known else None,
                     lost=lost, schedules=schedules, parts=parts, hosts=hosts)

    def _unanswered(self, i: int, exc: BaseException) -> None:
        """Log a shard that stopped answering once, not at every claim while it is down."""
        if i not in self._down:
            self._down.add(i)
            log.warning("shard %d did not answer (%s); claiming from the others meanwhile",
                        i, redact_exception(exc))

    def _answered(self, i: int) -> None:
        if i in self._down:
            self._down.discard(i)
            log.warning("shard %d answers again", i)

    def _give_back(self, worker: str, jobs: Sequence[Any]) -> None:
        """Release claimed jobs that will not run now, in one try (the claim loop never waits
        for a shard). Those whose shard did not answer are kept in ``_owed``: the heartbeat
        renews their leases and gives them back when their shard answers (``keep_unstarted``),
        so a job that never started is never left to be found lost."""
        if not jobs:
            return
        leases = [(j.job_id, j.token) for j in jobs]
        try:
            self.release(worker, leases)
            return
        except PartlyAnswered as exc:
            left = [lease for lease, code in zip(leases, exc.codes) if code is None]
            failed: BaseException = exc
        except REDIS_ERRORS as exc:
            if is_permanent(exc):
                raise
            left, failed = leases, exc
        with _placed_lock:
            _owed.update(left)
        log.warning("could not give back %d claimed jobs (%s); they are kept (renewed) and given "
                    "back at the next heartbeat", len(left), redact_exception(failed))

    def keep_unstarted(self, worker: str, *, lease_ms: int | None = None) -> int:
        """Heartbeat: renew the leases of the claimed jobs a claim could not give back
        (``_owed``), then give them back; how many are still kept. A shard that does not
        answer keeps its jobs for the next beat; a job that is not this claim's any more (a
        code other than OK: claimed again, ended) is forgotten."""
        with _placed_lock:
            owed = list(_owed.items())
        if not owed:
            return 0
        try:
            self._per_shard(owed, lambda q, part: q.extend(worker, part, lease_ms=lease_ms))
        except REDIS_ERRORS as exc:
            if is_permanent(exc):
                raise  # PartlyAnswered: what answered is renewed, the release tries all
        try:
            codes = self.release(worker, owed)
        except PartlyAnswered as exc:
            codes = exc.codes
        except REDIS_ERRORS as exc:
            if is_permanent(exc):
                raise
            codes = [None] * len(owed)
        with _placed_lock:
            for (job_id, token), code in zip(owed, codes):
                if code is not None and _owed.get(job_id) == token:
                    del _owed[job_id]
            left = len(_owed)
        given = sum(code == Code.OK for code in codes)
        if given:
            log.warning("gave back %d claimed jobs that could not be given back at their claim",
                        given)
        return left

    def _take_places(self, worker: str, part: Claim, lease_ms: int | None) -> list[Any]:
        """Take in shard 0 the places of ``part``'s jobs that need them; defer the refused.

        Shard 0 not answering: the jobs that need places are given back in their shard (no
        attempt counted) and the others run. A job whose place is held under a newer token
        was claimed again since this claim: it is left to that claim, neither run nor
        deferred."""
        entries = [[job.job_id, job.token, job.host, "1" if exclusive else "0", groups]
                   for job, exclusive, groups in part.places]
        needing = {job.job_id for job, _, _ in part.places}
        results = self._take_in_time(entries, lease_ms,
                                     f"for the places of {len(needing)} jobs; giving them back")
        if results is None:
            self._give_back(worker, [j for j in part.jobs if j.job_id in needing])
            return [j for j in part.jobs if j.job_id not in needing]
        refused: dict[str, list[Any]] = {}
        with _placed_lock:
            for (job, _, _), entry, result in zip(part.places, entries, results):
                if result[0] == 1:
                    _placed[job.job_id] = job.token
                    _entries[job.job_id] = entry
                else:
                    refused[job.job_id] = result
        if not refused:
            return part.jobs
        shard = self.shard_of_job(part.places[0][0].job_id)
        retry_at = part.now_ms + PLACE_RETRY_MS
        kept = []
        for job in part.jobs:
            why = refused.get(job.job_id)
            if why is None:
                kept.append(job)
                continue
            if why[1] == "stale":
                log.warning("job %s: claimed again (token %s) since this claim (token %s); "
                            "left to that claim", job.job_id, why[2], job.token)
                continue
            reason = (f"host {job.host} is busy with job {why[2]} of another shard"
                      if why[1] == "host_busy" else f"group {why[2]} is at its limit")
            try:
                shard.defer(worker, job.job_id, job.token, retry_at, wclose_ms=job.wclose_ms,
                            reason=reason)
            except REDIS_ERRORS as exc:
                if is_permanent(exc):
                    raise
                log.warning("job %s: could not defer it after its place was refused (%s); "
                            "giving it back", job.job_id, redact_exception(exc))
                self._give_back(worker, [job])
        return kept

    def _take_in_time(self, entries: list[Any], lease_ms: int | None,
                      failing: str) -> list[Any] | None:
        """``_places("take", ...)``, waited for at most ``PLACES_WAIT`` of the lease: None
        (shard 0 silent) past it, or while an earlier take still hangs. The call goes on in its
        own thread; if it takes the places after this claim gave up, it frees them again."""
        hanging = self._hanging
        if hanging is not None and hanging.is_alive():
            log.warning("shard 0 still has not answered an earlier call %s", failing)
            return None
        lock = threading.Lock()
        outcome: dict[str, Any] = {}

        def call() -> None:
            try:
                got: Any = self.coord.places("take", entries, lease_ms=lease_ms)
            except BaseException as exc:  # noqa: BLE001 - handed to the claim, or logged
                got = exc
            with lock:
                late = outcome.setdefault("got", got) is not got
            if late and not isinstance(got, BaseException):
                taken = [[e[0], e[1]] for e, r in zip(entries, got) if r[0] == 1]
                if taken:  # the claim gave these jobs back: their places must not hold
                    self._places("free", taken, None, f"to free {len(taken)} places taken "
                                 "after their claim gave up; they run out with their lease")

        thread = threading.Thread(target=call, name="places", daemon=True)
        thread.start()
        thread.join(self._lease_s(lease_ms) * PLACES_WAIT)
        with lock:
            got = outcome.setdefault("got", None)
        if got is None:
            self._hanging = thread
            log.warning("shard 0 did not answer within %.1fs %s",
                        self._lease_s(lease_ms) * PLACES_WAIT, failing)
            return None
        if isinstance(got, BaseException):
            if not isinstance(got, REDIS_ERRORS) or is_permanent(got):
                raise got
            log.warning("shard 0 did not answer (%s) %s", redact_exception(got), failing)
            return None
        return got

    def _lease_s(self, lease_ms: int | None) -> float:
        return (self.lease_ms if lease_ms is None else lease_ms) / 1000

    def _note(self, message: dict[str, Any]) -> float | None:
        """The due time a wake message announces, marked on its shard; None if not a wake."""
        if message["type"] != "message":
            return None
        try:
            score = float(text(message["data"]))
        except ValueError:
            score = 0.0
        shard = self._channels.get(text(message["channel"]))
        if shard is not None:
            due = self._due[shard]
            self._due[shard] = int(score) if due is None else min(due, int(score))
        return score

    # ------------------------------------------------------------------ ending a run

    def _free(self, done: Sequence[tuple[str, int]]) -> None:
        """Free the places these runs held (if they held any). Best effort: the runs have
        ended in their shards already, so shard 0 not answering must not make the caller
        retry them; such a place runs out with its lease (docs/architecture.md "Shards")."""
        with _placed_lock:
            mine = [[job_id, token] for job_id, token in done if _placed.get(job_id) == token]
            for job_id, _ in mine:
                _placed.pop(job_id, None)
                _entries.pop(job_id, None)
        if not mine:
            return
        self._places("free", mine, None,
                     f"to free the places of {len(mine)} ended jobs; they run out with their lease")

    def _places(self, mode: str, entries: list[Any], lease_ms: int | None,
                failing: str) -> list[Any] | None:
        """``places.lua`` in shard 0; None (and one warning line ending in ``failing``) when
        shard 0 does not answer. A permanent refusal raises."""
        try:
            return self.coord.places(mode, entries, lease_ms=lease_ms)
        except REDIS_ERRORS as exc:
            if is_permanent(exc):
                raise
            log.warning("shard 0 did not answer (%s) %s", redact_exception(exc), failing)
            return None

    def _per_shard(self, items: Sequence[Any], call: Any) -> list[Any]:
        """``call(shard queue, its items)`` for each shard holding some of ``items``; the
        replies in the order of ``items``. A shard that does not answer leaves None at its
        positions: raised as ``PartlyAnswered`` after every other shard has been called (or
        the shard's own error, if no shard answered)."""
        codes: list[Any] = [None] * len(items)
        failed: BaseException | None = None
        answered = False
        for i, positions in self._by_shard(items, lambda x: x[0]).items():
            try:
                got = call(self.parts[i], [items[p] for p in positions])
            except REDIS_ERRORS as exc:
                if is_permanent(exc):
                    raise
                failed = failed or exc
                continue
            answered = True
            for p, code in zip(positions, got):
                codes[p] = code
        if failed is not None and not answered:
            raise failed
        if failed is not None:
            raise PartlyAnswered(codes, failed)
        return codes

    def _done_where_answered(self, items: Sequence[Any], call: Any) -> list[Any]:
        """``_per_shard``, then the places of the runs that ended freed (also when a shard did
        not answer: those that did are over)."""
        try:
            codes = self._per_shard(items, call)
        except PartlyAnswered as exc:
            self._free([(x[0], x[1]) for x, c in zip(items, exc.codes) if c is not None])
            raise
        self._free([(x[0], x[1]) for x in items])
        return codes

    def ack(self, worker: str, done: Sequence[tuple[str, int, JobResult]]) -> list[Code]:
        return self._done_where_answered(done, lambda q, part: q.ack(worker, part))

    def fail_job(self, worker: str, job_id: str, token: int, result: JobResult, *, error: str,
                 retryable: bool = True, blame: str = "host") -> FailOutcome:
        outcome = self.shard_of_job(job_id).fail_job(worker, job_id, token, result, error=error,
                                                     retryable=retryable, blame=blame)
        self._free([(job_id, token)])
        return outcome

    def fail(self, worker: str, job_id: str, token: int, result: JobResult, *, error: str,
             retryable: bool = True, blame: str = "host") -> str:
        return self.fail_job(worker, job_id, token, result, error=error,
                             retryable=retryable, blame=blame).outcome

    def defer(self, worker: str, job_id: str, token: int, due_ms: int, *, wclose_ms: int | None,
              reason: str) -> Code:
        code = self.shard_of_job(job_id).defer(worker, job_id, token, due_ms, wclose_ms=wclose_ms,
                                               reason=reason)
        self._free([(job_id, token)])
        return code

    def release(self, worker: str, leases: Sequence[tuple[str, int]]) -> list[Code]:
        return self._done_where_answered(leases, lambda q, part: q.release(worker, part))

    def extend(self, worker: str, leases: Sequence[tuple[str, int]], *,
               lease_ms: int | None = None) -> list[Code]:
        """Renew leases, and the places they hold in shard 0. The places come first, so a
        shard slow to answer (its master failing over) cannot make them lapse while their
        jobs run; a place renewed for a lease that turns out stale holds nothing from the new
        owner (places are token-checked, and its claim took the place under its own token).
        Every shard that answers is renewed whatever another shard does (``PartlyAnswered``
        then). A place found gone is taken again (``_take_again``)."""
        with _placed_lock:
            held = [[job_id, token] for job_id, token in leases if _placed.get(job_id) == token]
        if held:
            renewed = self._places("extend", held, lease_ms,
                                   f"to renew the places of {len(held)} running jobs; "
                                   "retrying at the next beat") or [1] * len(held)
            with _placed_lock:  # (not ended meanwhile)
                gone = [_entries[job_id] for (job_id, token), ok in zip(held, renewed)
                        if not ok and _placed.get(job_id) == token and job_id in _entries]
            if gone:
                self._take_again(gone, lease_ms)
        return self._per_shard(leases, lambda q, part: q.extend(worker, part, lease_ms=lease_ms))

    def _take_again(self, entries: list[list[Any]], lease_ms: int | None) -> None:
        """Take again the places of running jobs that were found gone at a renewal (they ran
        out while shard 0 did not answer for a lease, or shard 0 lost its data): their hosts
        and groups count them again from now on. Refused, the job shares its host or overfills
        its group until it ends: said loudly, since nothing can undo that now. A job claimed
        again since (a newer token) is refused as stale: its lease is gone too."""
        results = self._places("take", entries, lease_ms,
                               f"to take again the places of {len(entries)} running jobs; "
                               "retrying at the next beat")
        if results is None:
            return
        for entry, result in zip(entries, results):
            job_id, host = entry[0], entry[2]
            if result[0] == 1:
                log.warning("job %s: its place in shard 0 was gone (it ran out, or shard 0 "
                            "lost its data); taken again", job_id)
            elif result[1] == "host_busy":
                log.error("job %s runs on host %s, which job %s of another shard holds now: "
                          "its place in shard 0 was gone", job_id, host, result[2])
            elif result[1] == "group_full":
                log.error("job %s runs beyond the limit of group %s: its place in shard 0 was "
                          "gone", job_id, result[2])

    # ------------------------------------------------------------------ waiting

    def next_due(self) -> tuple[float, float | None]:
        """(Redis now in ms, the earliest due time of any shard or None). A shard that does not
        answer counts as due in ``DOWN_RETRY_MS`` (the node looks again then); only when none
        answers does this raise."""
        now: float = 0
        earliest: float | None = None
        failed: BaseException | None = None
        down = []
        for i, part in enumerate(self.parts):
            try:
                shard_now, due = part.next_due()
            except REDIS_ERRORS as exc:
                if is_permanent(exc):
                    raise
                failed = failed or exc
                down.append(i)
                continue
            self._due[i] = due
            now = max(now, shard_now)
            if due is not None and (earliest is None or due < earliest):
                earliest = due
        if failed is not None and len(down) == len(self.parts):
            raise failed
        if down:
            soon = now + DOWN_RETRY_MS
            earliest = soon if earliest is None else min(earliest, soon)
        return now, earliest

    def wait_for_work(self, timeout_s: float) -> None:
        """Sleep until the earliest due time of any shard, a wake from any, or ``timeout_s``."""
        pubsub = self._subscription()
        try:
            while pubsub.get_message(timeout=0.0) is not None:
                pass  # stale: next_due reads every shard now
            now, earliest = self.next_due()
            sleep = timeout_s if earliest is None else min(timeout_s, max(0, earliest - now) / 1000)
            wake_at_ms = now + sleep * 1000
            deadline = time.monotonic() + sleep
            while (left := deadline - time.monotonic()) > 0:
                message = pubsub.get_message(timeout=left)
                score = None if message is None else self._note(message)
                if score is not None and score < wake_at_ms:
                    return
        except (redis.ConnectionError, redis.exceptions.RedisClusterException):
            self.close()
            raise

    def _subscription(self) -> Any:
        if self._pubsub is None:
            pubsub = self.client.pubsub()
            channels = [keys.wake for keys in self.shards.all]
            pubsub.subscribe(*channels)
            confirmed, deadline = 0, time.monotonic() + 5
            while confirmed < len(channels) and time.monotonic() < deadline:
                message = pubsub.get_message(timeout=max(0.0, deadline - time.monotonic()))
                if message is not None and message["type"] == "subscribe":
                    confirmed += 1
            self._pubsub = pubsub
        return self._pubsub

    def close(self) -> None:
        if self._pubsub is not None:
            self._pubsub.close()
        self._pubsub = None
        for part in self.parts:
            part.close()


# What ``open_queue`` returns: one shard's ``Queue``, or the ``ShardedQueue`` over several.
AnyQueue = Queue | ShardedQueue
