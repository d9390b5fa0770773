"""Model-based test of the queue core: random sequences of verbs on real Redis (7 and 6.2)
against a plain Python model of what each verb must do (hypothesis.stateful).

Rules: create_task (random policy: class, max_running 0-3, max_failures 0-3, max_attempts 1-3,
idempotent or not; backoff_ms 1), enqueue (due a minute ago or now), claim (batch 1-5 by one of
three workers, under a long lease or a 1-2 ms one that has run out when the rule ends), extend,
ack, fail (retryable or not; after an abort, sometimes the worker's sweep
``cancel_task(task, "")``), a late sweep of an aborted task, defer, release, and the operator's
pause, resume, cancel_task, retry-failed (``Queue.retry_failed``),
reprioritize and create_task again. A created task is sometimes rolled out in waves, as submit
does it (``scheduler.queue.waves.stage``: 1-2 later waves of 1-3 hosts staged ``waiting``, a
wave failure limit as typed: none, a count or a percentage); rules for its controller and
operator: ``release_wave`` (the next wave or a stale one, from various states, whether or not
the current wave has ended), ``move`` steps (check, a failed check's stop, gate, done; sometimes
with a stale wave) and ``tasks continue`` (a gate or a stop, resuming what the stop held).
Workers keep every (job, token) a claim gave them, so late answers with a stale token (lease
lost and the job claimed again, failed as lost, or finished) come up naturally next to live
ones.

The model follows docs/architecture.md ("Job states", "Events", "Priority classes", "Queue
API") and the headers of scheduler/queue/lua/*.lua. A claim is predicted exactly from the Redis
clock it reports (``Claim.now_ms``): expired leases first, then urgent, normal, bulk by score and
member; which jobs are taken, parked, held, cancelled or lost, with tokens and attempts. Times a
script reads from the Redis clock itself (a retry's or deferral's due time, an extended lease)
are read back and checked against the clock around the call. Every due time or lease expiry near
now is waited out before the rule returns, so an example replays the same whatever the speed.

Invariants after every step, against Redis: every job is in exactly the places its state says
(pending: its task class's due set at its due time; running: a due set and ``{P}:leases`` at its
lease expiry; parked: its task's parked list, once; held: its task's held set; failed:
``{P}:dead``; succeeded or cancelled: no hash, in no set), with the model's state, token, attempt
and owner; every task hash has the model's state, class and counters (running, succeeded,
failed, cancelled, lost, overshoot, total, span); from Redis alone, running and failed match the
job hashes, total = succeeded + cancelled + jobs with a hash, running <= max_running; fencing
tokens only grow; the new events are exactly the expected ones, by kind, job and what tells them
apart (token, worker, attempt, lost outcome, stale verb, reason and tokens; a pause's operator;
a wave event's wave, state, jobs, why and operator). Rollouts: the task hash's wave fields
(failures, limit, failed hosts, why, wave_held), ``{P}:waves:<task>`` and ``{P}:waving`` are the
model's; a job of a later wave is waiting (or cancelled) and was never claimed, and no waiting
job is of a released wave.

The model found four defects, fixed since, each with its regression test at the end of this
file: a job unparked after a loss went into its task's old class mid-reprioritize; an abort by
a lost job left parked and held jobs waiting forever (since then a lost job never aborts: it is
the worker's loss, docs/reliability.md section 12); the sweep after an abort cancelled a task
that retry-failed had revived first; a claim whose lost job stopped a wave, pausing the task,
went on claiming the task's pending jobs (a lost job no longer stops a wave either).

300 examples by default, the same on every run (derandomized; about 9 s per Redis version); ``FLEETSCHED_MODEL_EXAMPLES=N``
runs N random ones instead, for long runs.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from scheduler.errors import Code, QueueError, StaleTokenError, UnknownJobError
from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from scheduler.queue.keys import PRIORITY_CLASSES
from scheduler.queue.waves import move, release_wave, stage
from tests.queue_support import KEYS, events, make_task, redis_now_ms

WORKERS = ("w1", "w2", "w3")
LONG_LEASE = 60_000
MAX_TASKS = 4
MAX_SPAN = 8  # jobs per task at most: the claim's scan limit (batch * 4 + 64) is never reached
LIVE = ("pending", "running", "parked", "held")

POLICY = st.fixed_dictionaries({
    "priority": st.sampled_from(PRIORITY_CLASSES),
    "max_running": st.integers(0, 3),
    "max_failures": st.integers(0, 3),
    "max_attempts": st.integers(1, 3),
    "idempotent": st.booleans(),
    "count_failures": st.sampled_from(["attempts", "final"]),
    "exclusive": st.booleans(),
})
# due times: the base (a minute ago) + 1..30 ms, or 0 (now by the Redis clock)
OFFSETS = st.lists(st.sampled_from([0, *range(1, 31)]), min_size=1, max_size=3)
PICK = st.integers(0, 63)  # an index into a list of the model's, taken modulo its length
# rollouts: the host counts of waves 2.. (wave 1: the jobs enqueued; none: not in waves) and
# --max-failures as typed
LATER_WAVES = st.one_of(st.just([]), st.lists(st.integers(1, 3), min_size=1, max_size=2)
                        .filter(lambda c: sum(c) <= 5))
WAVE_LIMITS = st.sampled_from([None, "1", "2", "34%", "34%", "50%", "50%", "100%"])  # a count: the task's
WAVE_FIELDS = ("waves", "wave", "wave_state", "wave_size", "wave_limit", "wave_failures",
               "wave_failed_names", "wave_held", "wave_why", "wave_until")

EXAMPLES = os.environ.get("FLEETSCHED_MODEL_EXAMPLES")
SETTINGS = settings(
    max_examples=int(EXAMPLES or 300),
    derandomize=EXAMPLES is None,  # the same 300 examples on every run; long runs explore anew
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)

COVERED: Counter[str] = Counter()  # paths the runs went through (checked at the end)


def wait_past(client: redis.Redis, ms: int) -> None:
    """Sleep until the Redis clock is past ``ms``."""
    while redis_now_ms(client) <= ms:
        time.sleep(0.001)


@dataclass
class MJob:
    id: str
    task: str
    host: str
    due: int
    state: str = "pending"  # pending running parked held failed succeeded cancelled
    attempt: int = 0
    token: int = 0
    owner: str | None = None
    zset: str | None = None  # the class whose due set holds its entry (pending, running)
    score: int | None = None  # its score there: due time, or lease expiry when running
    failed_once: bool = False  # an attempt failed: its host counts in the task's failed_hosts
    waitq: str | None = None  # hostwait: the list it waits in (a host's or a group's)
    wave: int | None = None  # a rollout's job: its wave (waiting until the wave is released)
    lost: bool = False  # failed for good because its worker lost it (the hash's `lost` mark)


@dataclass
class MRollout:
    """A task's rollout in waves: the task hash's wave fields, {P}:waves:<task>, {P}:waving."""
    waves: int
    asked: str | None  # the policy's max_failures as typed
    wave: int = 1
    state: str = "running"
    size: int = 0
    limit: int = 0
    failures: int = 0
    names: list[str] = field(default_factory=list)
    held: bool = False
    why: str | None = None  # wave_why and wave_until: unset until the first release or move
    until: str | None = None
    staged: bool = True  # {P}:waves:<task> exists (cancel's last chunk drops it)
    waving: bool = True

    def fields(self) -> dict[str, str | None]:
        return {"waves": str(self.waves), "wave": str(self.wave), "wave_state": self.state,
                "wave_size": str(self.size), "wave_limit": str(self.limit),
                "wave_failures": str(self.failures), "wave_failed_names": ",".join(self.names),
                "wave_held": "1" if self.held else None, "wave_why": self.why,
                "wave_until": self.until}


@dataclass
class MTask:
    id: str
    prio: str
    max_running: int
    max_failures: int
    max_attempts: int
    idempotent: bool
    count_failures: str = "attempts"
    exclusive: bool = True
    state: str = "active"
    total: int = 0
    span: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    lost: int = 0
    lost_failed: int = 0  # jobs failed for good because their worker lost them (no threshold)
    overshoot: int = 0
    failed_hosts: int = 0
    parked: list[str] = field(default_factory=list)
    rollout: MRollout | None = None


def normalize(fields: dict[str, str]) -> list[tuple]:
    """One stream event as comparable tuples (one per job for events that list jobs)."""
    kind, task, job = fields["kind"], fields.get("task"), fields.get("job")
    if kind.startswith("wave-") or kind == "continue":
        jobs = " ".join(sorted(fields["jobs"].split())) if "jobs" in fields else None
        return [(kind, task, None, fields["wave"], fields["state"], jobs, fields.get("error"),
                 fields.get("operator"))]
    if kind == "pause":
        return [(kind, task, None, fields["operator"])]
    if "jobs" in fields:
        return [(kind, task, j) for j in fields["jobs"].split()]
    if kind in ("claim", "ack"):
        return [(kind, task, job, fields["token"], fields["worker"], fields["attempt"])]
    if kind == "lost":
        return [(kind, task, job, fields["outcome"], fields["token"], fields["worker"],
                 fields["attempt"])]
    if kind == "stale":
        return [(kind, task, job, fields["verb"], fields["reason"], fields["token"],
                 fields.get("current_token"))]
    if kind in ("retry", "fail", "defer", "release"):
        return [(kind, task, job, fields["token"], fields["attempt"])]
    if kind == "reprioritize":
        detail = json.loads(fields["detail"])
        return [(kind, task, None, detail["from"], detail["to"])]
    return [(kind, task, job)]


class QueueMachine(RuleBasedStateMachine):
    client: redis.Redis  # set by the test function (the qclient fixture's server)

    def __init__(self) -> None:
        super().__init__()
        self.client.flushall()
        self.q = Queue(self.client, lease_ms=LONG_LEASE)
        self.tasks: dict[str, MTask] = {}
        self.jobs: dict[str, MJob] = {}
        self.tickets: list[tuple[str, str, int]] = []  # (worker, job, token) of every claim
        # (job, token) -> (verb, outcome) of the ack, fail, release or defer that ended that
        # run (_lib.lua fs_remember, one memo per run): the same token's same verb again
        # answers the outcome and writes nothing (the reply-lost repeat). Drawn tickets repeat
        # verbs all the time.
        self.memos: dict[tuple[str, int], tuple[str, Any]] = {}
        self.busy: dict[str, str] = {}  # host -> the exclusive job running there
        self.waiting: dict[str, list[str]] = defaultdict(list)  # wait list key -> its jobs
        self.glimit: dict[str, int] = {}  # group -> most jobs running at once on its hosts
        self.gbusy: Counter[str] = Counter()
        self.gholds: dict[str, list[str]] = {}  # running job -> the groups it counts in
        # group -> how many of its jobs ran when its limit was lowered below that (they finish)
        self.over: dict[str, int] = {}
        # Every host h<n> is in group g<n % 2> (its hash's limits field, as submit writes it).
        for n in range(MAX_SPAN):
            self.client.hset(KEYS.host(f"h{n}"), mapping={"address": "", "limits": f"g{n % 2}"})
        self.expected: list[tuple] = []
        # during a claim: tasks a lost job's wave stop paused (claim.lua still sees them active)
        self.last_event = "0-0"
        self.tokens_seen: dict[str, int] = {}
        self.base = self.now() - 60_000

    def teardown(self) -> None:
        self.q.close()

    # ------------------------------------------------------------------ model helpers

    def expect(self, kind: str, task: str, job: str | None = None, *extra: object) -> None:
        self.expected.append((kind, task, job, *(None if x is None else str(x) for x in extra)))

    def now(self) -> int:
        return redis_now_ms(self.client)

    def pass_time(self, ms: int) -> None:
        """Every due time or lease expiry near now is followed by this, so whether it has come
        and its order against the next one do not depend on how fast the steps run: a replayed
        example behaves the same."""
        wait_past(self.client, ms)

    def task_of(self, job: MJob) -> MTask:
        return self.tasks[job.task]

    def unpark(self, t: MTask, into: str) -> str | None:
        """fs_unpark: one parked job of the task back into a due set at its due time."""
        for _ in range(8):
            if not t.parked:
                return None
            j = self.jobs[t.parked.pop(0)]
            if j.state == "parked":
                j.state, j.zset, j.score = "pending", into, j.due
                self.expect("unpark", t.id, j.id)
                COVERED["unpark"] += 1
                return j.id
        return None

    def host_busy(self, j: MJob) -> str | None:
        holder = self.busy.get(j.host)
        if holder is None or holder == j.id or self.jobs[holder].state != "running":
            return None
        return holder

    @staticmethod
    def groups_of(j: MJob) -> list[str]:
        return [f"g{int(j.host[1:]) % 2}"]

    def group_full(self, j: MJob) -> str | None:
        for g in self.groups_of(j):
            if g in self.glimit and self.gbusy[g] >= self.glimit[g]:
                return g
        return None

    def release_waiters(self, q: str) -> None:
        """fs_release_waiters: every job waiting in list ``q`` back to its due set."""
        for wid in self.waiting.pop(q, []):
            w = self.jobs[wid]
            if w.state == "hostwait" and w.waitq == q:
                w.state, w.zset, w.score, w.waitq = "pending", self.task_of(w).prio, w.due, None
                self.expect("unpark", w.task, w.id)
                COVERED["waiter back"] += 1

    def wait_in(self, j: MJob, q: str) -> None:
        j.state, j.zset, j.score, j.waitq = "hostwait", None, None, q
        self.waiting[q].append(j.id)
        self.expect("park", j.task, j.id)

    def free_host(self, j: MJob) -> None:
        """fs_free_host: the job stops running on its host: it gives back the host and the group
        counts it held, and their waiters go back to their due sets."""
        if self.busy.get(j.host) == j.id:
            del self.busy[j.host]
            self.release_waiters(KEYS.hostq(j.host))
        for g in self.gholds.pop(j.id, []):
            self.gbusy[g] -= 1
            if self.gbusy[g] <= 0:
                del self.gbusy[g]
            self.release_waiters(KEYS.gq(g))

    def bury(self, j: MJob) -> None:
        j.state, j.owner, j.zset, j.score = "failed", None, None, None

    @staticmethod
    def note_failed_host(t: MTask, j: MJob) -> tuple[int, bool]:
        """fs_note_failed_host: a job's first failed attempt counts its host; the count, and
        whether this was the job's first failed attempt."""
        first = not j.failed_once
        if first:
            j.failed_once = True
            t.failed_hosts += 1
        return t.failed_hosts, first

    def attempt_crosses_limit(self, t: MTask, j: MJob) -> bool:
        """fs_attempt_crosses_limit: a failed attempt about to be retried reaches the limit."""
        hosts, first = self.note_failed_host(t, j)
        crosses = t.count_failures == "attempts" and 0 < t.max_failures <= hosts
        if crosses:
            COVERED["attempt reaches the limit"] += 1
        elif first and t.count_failures == "attempts":
            self.wave_failed(t, j)
        return crosses

    def count_failure(self, t: MTask, j: MJob) -> bool:
        """fs_count_failure: True if this failure aborted the task (the abort comes before
        the wave's limit)."""
        t.failed += 1
        hosts, first = self.note_failed_host(t, j)
        if t.state == "aborted":
            t.overshoot += 1
            COVERED["overshoot"] += 1
            return False
        counted = hosts if t.count_failures == "attempts" else t.failed - t.lost_failed
        if 0 < t.max_failures <= counted and t.state in ("active", "paused"):
            t.state = "aborted"
            self.expect("abort", t.id)
            COVERED["abort"] += 1
            return True
        if t.count_failures != "attempts" or first:
            self.wave_failed(t, j)
        return False

    def wave_failed(self, t: MTask, j: MJob) -> None:
        """fs_wave_failed: one more failure in the current wave; reaching its limit while the
        wave runs stops the rollout and pauses an active task (wave_held)."""
        r = t.rollout
        if r is None:
            return
        r.failures += 1
        if r.failures <= 10:
            r.names.append(j.host)
        if r.state != "running" or not 0 < r.limit <= r.failures \
                or t.state not in ("active", "paused"):
            return
        how = "failed an attempt" if t.count_failures == "attempts" else "failed"
        more = ", ..." if r.failures > 10 else ""
        r.why = (f"wave {r.wave}: {r.failures} of {r.size} hosts {how} ({','.join(r.names)}"
                 f"{more}), the limit is {r.limit}")
        if t.state == "active":
            r.why += "; its pending jobs are held, running ones finish"
        r.state, r.until = "stopped", ""
        self.expect("wave-stop", t.id, None, r.wave, "stopped", None, r.why, None)
        COVERED["wave stop"] += 1
        if t.state == "active":
            t.state, r.held = "paused", True
            self.expect("pause", t.id, None, "rollout")
            COVERED["wave stop pauses"] += 1

    @staticmethod
    def wave_begins(t: MTask, size: int) -> None:
        """fs_wave_begins with fs_wave_limit: the wave's failure count starts again; its limit
        is --max-failures of its hosts when a percentage (rounded up, at least 1), else the
        task's max_failures (a count is the task's)."""
        r = t.rollout
        assert r is not None
        r.size, r.failures, r.names = size, 0, []
        if r.asked and r.asked.endswith("%"):
            r.limit = min(size, max(1, math.ceil(size * int(r.asked[:-1]) / 100)))
        else:
            r.limit = t.max_failures

    def pend(self, j: MJob, due: int) -> None:
        t = self.task_of(j)
        j.state, j.owner, j.due, j.zset, j.score = "pending", None, due, t.prio, due

    def repeat_of(self, j: MJob, token: int, verb: str) -> tuple[bool, Any]:
        """fs_recall: (True, first outcome) when this is a refused call that repeats the verb
        that last took effect for the job under this token."""
        refused = j.state in ("succeeded", "cancelled") or j.token != token or j.state != "running"
        memo = self.memos.get((j.id, token))
        if refused and memo is not None and memo[0] == verb:
            COVERED[f"repeat {verb}"] += 1
            return True, memo[1]
        return False, None

    @staticmethod
    def answer(j: MJob, token: int) -> Code:
        """What extend, release (and ack, but for a repeat) answer a worker for one job."""
        if j.state in ("succeeded", "cancelled"):
            return Code.UNKNOWN_JOB
        if j.token != token:
            return Code.STALE_TOKEN
        return Code.OK if j.state == "running" else Code.NOT_RUNNING

    @staticmethod
    def forget_failed_host(t: MTask, j: MJob) -> None:
        """fs_forget_failed_host: a cancelled or retried job's host no longer counts."""
        if j.failed_once:
            j.failed_once = False
            t.failed_hosts -= 1

    def cancel_waiting(self, t: MTask) -> int:
        """What a cancel walk does to the model: pending, parked, held, waiting jobs cancelled."""
        count = 0
        for k in range(t.span):
            j = self.jobs[f"{t.id}.{k}"]
            if j.state in ("pending", "parked", "held", "hostwait", "waiting"):
                if j.state == "hostwait":
                    self.waiting[j.waitq].remove(j.id)
                    j.waitq = None
                self.forget_failed_host(t, j)
                j.state, j.zset, j.score = "cancelled", None, None
                t.cancelled += 1
                count += 1
                self.expect("cancel", t.id, j.id)
        t.parked.clear()
        return count

    def sweep(self, t: MTask, operator: str) -> None:
        """cancel_task: cancels an active or paused task, then its pending, parked, held jobs."""
        if t.state in ("active", "paused"):
            t.state = "cancelled"
            self.expect("cancel", t.id)
        count = self.cancel_waiting(t)
        if t.rollout:
            t.rollout.staged = False  # the last chunk drops {P}:waves:<task>
        assert self.q.cancel_task(t.id, operator) == count

    def abort_sweep(self, t: MTask) -> None:
        """Queue.sweep_aborted: cancels the jobs of a task still aborted; nothing otherwise."""
        count = self.cancel_waiting(t) if t.state == "aborted" else 0
        if t.rollout and t.state == "aborted":
            t.rollout.staged = False
        assert self.q.sweep_aborted(t.id) == count

    # ------------------------------------------------------------------ drawing

    # Draws do not depend on the model's state (indices taken modulo), and every rule draws
    # the same things whatever the state: hypothesis replays an example without surprises.

    def pick_task(self, data: st.DataObject) -> MTask:
        tasks = sorted(self.tasks)
        return self.tasks[tasks[data.draw(PICK, label="task") % len(tasks)]]

    def pick_rollout(self, data: st.DataObject) -> MTask:
        rollouts = sorted(tid for tid, t in self.tasks.items() if t.rollout)
        return self.tasks[rollouts[data.draw(PICK, label="rollout") % len(rollouts)]]

    def pick_tickets(self, data: st.DataObject, most: int) -> tuple[str, list[tuple[str, int]]]:
        """A worker and 1..most of its (job, token) tickets: mostly a live one first, or any."""
        fresh = data.draw(st.integers(0, 3), label="live") > 0
        first = data.draw(PICK, label="ticket")
        more = data.draw(st.lists(PICK, max_size=most - 1), label="more")
        live = [tk for tk in self.tickets
                if self.jobs[tk[1]].state == "running" and self.jobs[tk[1]].token == tk[2]]
        pool = live if live and fresh else self.tickets
        worker, job, token = pool[first % len(pool)]
        mine = [(j, tok) for w, j, tok in self.tickets if w == worker]
        return worker, [(job, token), *(mine[i % len(mine)] for i in more)]

    # ------------------------------------------------------------------ rules

    def _create(self, policy: dict) -> MTask:
        tid = f"t{len(self.tasks)}"
        spec = TaskSpec(tid, backoff_ms=1, operator="ops", **policy)
        assert self.q.create_task(spec) is True
        t = MTask(tid, policy["priority"], policy["max_running"], policy["max_failures"],
                  policy["max_attempts"], policy["idempotent"], policy["count_failures"],
                  policy["exclusive"])
        self.tasks[tid] = t
        self.expect("create", tid)
        return t

    def _enqueue(self, t: MTask, offsets: list[int], again: bool = False) -> None:
        now = self.now()
        specs = [JobSpec(f"{t.id}.{t.span + i}", f"h{t.span + i}",
                         due_ms=off and self.base + off) for i, off in enumerate(offsets)]
        if again and t.span:
            specs.append(JobSpec(f"{t.id}.0", "h0"))  # queued once already: skipped
        if t.state not in ("active", "paused"):
            with pytest.raises(QueueError) as refused:
                self.q.enqueue(t.id, specs)
            assert refused.value.code == Code.TASK_NOT_ACTIVE
            return
        assert self.q.enqueue(t.id, specs) == len(offsets)
        for spec in specs[:len(offsets)]:
            due = spec.due_ms or int(self.client.hget(KEYS.job(spec.job_id), "due"))
            assert spec.due_ms or now <= due <= self.now()
            self.jobs[spec.job_id] = MJob(spec.job_id, t.id, spec.host, due, zset=t.prio,
                                          score=due)
            self.expect("enqueue", t.id, spec.job_id)
            self.pass_time(due)
        t.total += len(offsets)
        t.span += len(offsets)

    @initialize(policy=POLICY, offsets=OFFSETS, later=LATER_WAVES, asked=WAVE_LIMITS)
    def first_task(self, policy: dict, offsets: list[int], later: list[int],
                   asked: str | None) -> None:
        self._enqueue(self._create(policy), offsets)
        if later:
            self._stage(self.tasks["t0"], later, asked)

    @precondition(lambda self: len(self.tasks) < MAX_TASKS)
    @rule(policy=POLICY, offsets=OFFSETS, later=LATER_WAVES, asked=WAVE_LIMITS)
    def create_task(self, policy: dict, offsets: list[int], later: list[int],
                    asked: str | None) -> None:
        t = self._create(policy)
        self._enqueue(t, offsets)
        if later:
            self._stage(t, later, asked)

    def _stage(self, t: MTask, later: list[int], asked: str | None) -> None:
        """A task rolled out in waves, queued as submit does it: wave 1's jobs enqueued, then
        every job listed by wave and those of the later waves staged (waiting)."""
        counts = [t.span, *later]
        wave_policy: dict = {"counts": counts}
        if asked is not None:
            wave_policy["max_failures"] = asked
        rows = [(JobSpec(f"{t.id}.{k}", f"h{k}"), wave) for k, wave in
                enumerate(w for w, n in enumerate(counts, 1) for _ in range(n))]
        assert stage(self.q, t.id, len(counts), wave_policy, rows) == sum(later)
        t.rollout = MRollout(len(counts), asked)
        self.wave_begins(t, counts[0])
        for spec, wave in rows:
            if wave == 1:
                self.jobs[spec.job_id].wave = 1
            else:
                self.jobs[spec.job_id] = MJob(spec.job_id, t.id, spec.host, 0, "waiting",
                                              wave=wave)
                self.expect("enqueue", t.id, spec.job_id)
        t.total += sum(later)
        t.span += sum(later)

    def op_create_again(self, t: MTask, data: st.DataObject) -> None:
        assert self.q.create_task(TaskSpec(t.id, priority="bulk")) is False  # left unchanged

    @rule(data=st.data(), offsets=OFFSETS, again=st.booleans())
    def enqueue(self, data: st.DataObject, offsets: list[int], again: bool) -> None:
        t = self.pick_task(data)
        offsets = offsets[:MAX_SPAN - t.span]
        if offsets:
            self._enqueue(t, offsets, again)

    @rule(worker=st.sampled_from(WORKERS), batch=st.integers(1, 5))
    def claim(self, worker: str, batch: int) -> None:
        self._claim(worker, batch, LONG_LEASE)

    @rule(worker=st.sampled_from(WORKERS), batch=st.integers(1, 5), lease=st.integers(1, 2))
    def claim_short_lease(self, worker: str, batch: int, lease: int) -> None:
        self._claim(worker, batch, lease)  # lost at a claim after it runs out

    def _claim(self, worker: str, batch: int, lease: int) -> None:
        claim = self.q.claim(worker, batch, lease_ms=lease)
        taken, lost = self.simulate_claim(worker, batch, claim.now_ms + lease, claim.now_ms)
        got = [(j.job_id, j.task_id, j.host, j.token, j.attempt, j.due_ms, j.after_loss)
               for j in claim.jobs]
        assert got == taken
        assert claim.lost == lost
        scores = [j.score for j in self.jobs.values() if j.zset is not None]
        assert claim.next_due_ms == (min(scores) if scores else None)
        self.tickets += [(worker, j.job_id, j.token) for j in claim.jobs]
        if claim.jobs and lease < LONG_LEASE:
            self.pass_time(claim.now_ms + lease)

    def simulate_claim(self, worker: str, batch: int, expiry: int, now: int
                       ) -> tuple[list[tuple], list[str]]:
        """claim.lua, as its header and docs/architecture.md "Job states" describe it."""
        taken: list[tuple] = []
        lost: list[str] = []
        cancels: dict[str, list[str]] = {}
        visited, scan_limit = 0, batch * 4 + 64
        def take(j: MJob, t: MTask, after_loss: bool) -> None:
            j.attempt, j.token = j.attempt + 1, j.token + 1
            j.state, j.owner, j.score = "running", worker, expiry
            if t.exclusive:
                self.busy[j.host] = j.id
            held = [g for g in self.groups_of(j) if g in self.glimit]
            for g in held:
                self.gbusy[g] += 1
            if held:
                self.gholds[j.id] = held
            t.running += 1
            self.expect("claim", t.id, j.id, j.token, worker, j.attempt)
            taken.append((j.id, t.id, j.host, j.token, j.attempt, j.due, after_loss))

        def cancel(j: MJob, t: MTask, quiet: bool = False) -> None:
            self.forget_failed_host(t, j)
            j.state, j.zset, j.score = "cancelled", None, None
            t.cancelled += 1
            if not quiet:  # a lost job's end is its lost event (outcome cancelled) alone
                cancels.setdefault(t.id, []).append(j.id)

        def lose(cls: str, j: MJob, t: MTask) -> bool:
            t.running -= 1
            t.lost += 1
            self.free_host(j)
            retry = t.idempotent and j.attempt < t.max_attempts
            token, owner, state = j.token, j.owner, t.state
            if retry and state == "active":
                self.expect("lost", t.id, j.id, "retry", token, owner, j.attempt)
                COVERED["lost retry"] += 1
                return True
            if retry and state == "paused":
                self.expect("lost", t.id, j.id, "held", token, owner, j.attempt)
                COVERED["lost held"] += 1
                j.state, j.owner, j.zset, j.score = "held", None, None, None
            elif state not in ("active", "paused"):
                self.expect("lost", t.id, j.id, "cancelled", token, owner, j.attempt)
                COVERED["lost cancelled"] += 1
                cancel(j, t, quiet=True)
            else:
                j.token += 1  # the lost worker's late answers are stale
                self.expect("lost", t.id, j.id, "failed", token, owner, j.attempt)
                COVERED["lost failed"] += 1
                self.bury(j)
                t.failed += 1  # the worker's loss: no threshold counts it, nothing aborts
                t.lost_failed += 1
                j.lost = True
                lost.append(j.id)
            if t.max_running > 0:
                self.unpark(t, t.prio)  # into the task's class now, even mid-reprioritize
            return False

        def visit(cls: str, j: MJob) -> None:
            t = self.task_of(j)
            state = t.state
            if t.prio != cls and j.state == "pending" and state == "active":
                j.zset = t.prio  # reprioritize under way: filed into its class, not claimed
            elif j.state == "running":
                if lose(cls, j, t):
                    admit(j, t, True)
            elif state not in ("active", "paused"):
                cancel(j, t)
            elif state == "paused":
                j.state, j.zset, j.score = "held", None, None
                COVERED["held"] += 1
            elif 0 < t.max_running <= t.running:
                j.state, j.zset, j.score = "parked", None, None
                t.parked.append(j.id)
                self.expect("park", t.id, j.id)
                COVERED["park"] += 1
            else:
                admit(j, t, False)

        def admit(j: MJob, t: MTask, after_loss: bool) -> None:
            """claim.lua admit: take the job unless a limit across tasks makes it wait."""
            if t.exclusive and self.host_busy(j):
                self.wait_in(j, KEYS.hostq(j.host))
                COVERED["host busy"] += 1
            elif self.group_full(j):
                self.wait_in(j, KEYS.gq(self.group_full(j)))  # type: ignore[arg-type]
                COVERED["group full" if not after_loss else "lost, group full"] += 1
            else:
                take(j, t, after_loss)

        def due_in(cls: str | None, running_only: bool = False) -> list[MJob]:
            found = [j for j in self.jobs.values() if j.zset is not None
                     and (cls is None or j.zset == cls) and j.score <= now
                     and (j.state == "running" or not running_only)]
            return sorted(found, key=lambda j: (j.score, j.id))

        for j in due_in(None, running_only=True)[:batch]:  # expired leases first
            if len(taken) >= batch:
                break
            visited += 1
            visit(j.zset, j)
        for cls in PRIORITY_CLASSES:
            while len(taken) < batch and visited < scan_limit:
                ids = due_in(cls)[:min(batch - len(taken), scan_limit - visited)]
                if not ids:
                    break
                for j in ids:
                    visited += 1
                    visit(cls, j)
        for tid, ids in cancels.items():
            for jid in ids:
                self.expect("cancel", tid, jid)
        return taken, lost

    @precondition(lambda self: self.tickets)
    @rule(data=st.data(), lease=st.sampled_from([1, LONG_LEASE]))
    def extend(self, data: st.DataObject, lease: int) -> None:
        worker, leases = self.pick_tickets(data, 3)
        before = self.now()
        codes = self.q.extend(worker, leases, lease_ms=lease)
        after = self.now()
        want = []
        for job_id, token in leases:
            j = self.jobs[job_id]
            want.append(self.answer(j, token))
            if want[-1] is Code.OK:
                expiry = int(self.client.zscore(KEYS.leases, job_id))
                assert before + lease <= expiry <= after + lease
                j.score = expiry
                if lease < LONG_LEASE:
                    self.pass_time(expiry)
        assert codes == want

    @precondition(lambda self: self.tickets)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        worker, done = self.pick_tickets(data, 3)
        codes = self.q.ack(worker, [(job, token, JobResult(0, 1, "ok")) for job, token in done])
        want, acked = [], set()
        for job_id, token in done:
            j = self.jobs[job_id]
            t = self.task_of(j)
            if job_id in acked:
                want.append(Code.NOT_RUNNING)  # twice in one batch
            elif self.repeat_of(j, token, "ack")[0]:
                want.append(Code.OK)  # a repeat: nothing written
            elif j.state in ("succeeded", "cancelled"):
                want.append(Code.UNKNOWN_JOB)
                self.expect("stale", t.id, job_id, "ack", "unknown_job", token, None)
                COVERED["stale ack"] += 1
            elif j.token != token:
                want.append(Code.STALE_TOKEN)
                self.expect("stale", t.id, job_id, "ack", "stale_token", token, j.token)
                COVERED["stale ack"] += 1
            elif j.state != "running":
                want.append(Code.NOT_RUNNING)
            else:
                want.append(Code.OK)
                acked.add(job_id)
                self.memos[(job_id, token)] = ("ack", None)
                self.expect("ack", t.id, job_id, token, worker, j.attempt)
                self.free_host(j)
                j.state, j.owner, j.zset, j.score = "succeeded", None, None, None
                t.running -= 1
                t.succeeded += 1
                if t.max_running > 0:
                    self.unpark(t, t.prio)
        assert codes == want

    @precondition(lambda self: self.tickets)
    @rule(data=st.data(), retryable=st.booleans(), sweep=st.booleans(),
          blame=st.sampled_from(["host", "host", "host", "worker"]))
    def fail(self, data: st.DataObject, retryable: bool, sweep: bool, blame: str) -> None:
        worker, [(job_id, token), *_] = self.pick_tickets(data, 1)
        j = self.jobs[job_id]
        t = self.task_of(j)
        result = JobResult(1, 1, "boom")
        before = self.now()
        repeat, first = self.repeat_of(j, token, "fail")
        if repeat:
            outcome = self.q.fail_job(worker, job_id, token, result, error="boom",
                                      retryable=retryable, blame=blame)
            assert (outcome.outcome, outcome.due_ms, outcome.aborted) == first
            if outcome.aborted and sweep:
                self.abort_sweep(t)
            return
        if j.state in ("succeeded", "cancelled"):
            with pytest.raises(UnknownJobError):
                self.q.fail_job(worker, job_id, token, result, error="boom", retryable=retryable)
            self.expect("stale", t.id, job_id, "fail", "unknown_job", token, None)
            COVERED["stale fail"] += 1
            return
        if j.token != token:
            with pytest.raises(StaleTokenError):
                self.q.fail_job(worker, job_id, token, result, error="boom", retryable=retryable)
            self.expect("stale", t.id, job_id, "fail", "stale_token", token, j.token)
            COVERED["stale fail"] += 1
            return
        if j.state != "running":
            with pytest.raises(QueueError) as refused:
                self.q.fail_job(worker, job_id, token, result, error="boom", retryable=retryable)
            assert refused.value.code == Code.NOT_RUNNING
            return
        outcome = self.q.fail_job(worker, job_id, token, result, error="boom", retryable=retryable,
                                  blame=blame)
        self.memos[(job_id, token)] = ("fail", (outcome.outcome, outcome.due_ms, outcome.aborted))
        t.running -= 1
        self.free_host(j)
        retry = retryable and j.attempt < t.max_attempts and t.state in ("active", "paused")
        if retry and blame == "host" and self.attempt_crosses_limit(t, j):
            retry = False
        if retry:
            assert (outcome.outcome, outcome.aborted) == ("retry", False)
            # backoff_ms 1: 2^(attempt-1) ms, times a jitter factor in [0.8, 1.2)
            assert before <= outcome.due_ms <= self.now() + 2 ** (j.attempt - 1) * 1.2
            self.expect("retry", t.id, job_id, token, j.attempt)
            self.pend(j, outcome.due_ms)
            self.pass_time(outcome.due_ms)
            aborted = False
        else:
            self.expect("fail", t.id, job_id, token, j.attempt)
            self.bury(j)
            if blame == "host":
                aborted = self.count_failure(t, j)
            else:  # a run lost with its worker: no threshold counts it
                COVERED["fail blamed on the worker"] += 1
                t.failed += 1
                t.lost_failed += 1
                j.lost = True
                aborted = False
            assert (outcome.outcome, outcome.due_ms, outcome.aborted) == ("failed", None, aborted)
        if t.max_running > 0:
            self.unpark(t, t.prio)
        if aborted and sweep:
            self.abort_sweep(t)  # what a worker does after an abort (workers/finisher.py)

    @precondition(lambda self: any(t.state == "aborted" for t in self.tasks.values()))
    @rule(data=st.data())
    def sweep_aborted(self, data: st.DataObject) -> None:
        aborted = sorted(tid for tid, t in self.tasks.items() if t.state == "aborted")
        self.abort_sweep(self.tasks[aborted[data.draw(PICK, label="task") % len(aborted)]])

    @precondition(lambda self: self.tickets)
    @rule(data=st.data(), later=st.sampled_from([0, 0, 2]))
    def defer(self, data: st.DataObject, later: int) -> None:
        worker, [(job_id, token), *_] = self.pick_tickets(data, 1)
        j = self.jobs[job_id]
        t = self.task_of(j)
        due_ms = 0 if later == 0 else self.now() + later
        code = self.q.defer(worker, job_id, token, due_ms, wclose_ms=None, reason="window")
        if self.repeat_of(j, token, "defer")[0]:
            assert code == Code.OK
        elif j.state in ("succeeded", "cancelled"):
            assert code == Code.UNKNOWN_JOB
        elif j.token != token:
            assert code == Code.STALE_TOKEN
        elif j.state != "running":
            assert code == Code.NOT_RUNNING
        else:
            assert code == Code.OK
            self.memos[(job_id, token)] = ("defer", None)
            j.attempt = max(j.attempt - 1, 0)
            self.expect("defer", t.id, job_id, token, j.attempt)
            self.free_host(j)
            self.pend(j, due_ms or int(self.client.hget(KEYS.job(job_id), "due")))
            self.pass_time(j.due)
            t.running -= 1
            if t.max_running > 0:
                self.unpark(t, t.prio)

    @precondition(lambda self: self.tickets)
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        worker, leases = self.pick_tickets(data, 3)
        codes = self.q.release(worker, leases)
        want = []
        for job_id, token in leases:
            j = self.jobs[job_id]
            t = self.task_of(j)
            if self.repeat_of(j, token, "release")[0]:
                want.append(Code.OK)
                continue
            want.append(self.answer(j, token))
            if want[-1] is Code.OK:
                self.memos[(job_id, token)] = ("release", None)
                j.attempt = max(j.attempt - 1, 0)
                self.expect("release", t.id, job_id, token, j.attempt)
                self.free_host(j)
                self.pend(j, j.due)  # back at its own due time
                t.running -= 1
                if t.max_running > 0:
                    self.unpark(t, t.prio)
        assert codes == want

    # A rollout's controller and operator. release_wave.lua does not wait for the current wave
    # to end (the controller does), so neither does this rule: the model holds either way.

    @precondition(lambda self: any(t.rollout for t in self.tasks.values()))
    @rule(data=st.data(), ahead=st.sampled_from([1, 1, 1, 0, 2]),
          frm=st.sampled_from([("running",), ("running",), ("continued",),
                               ("running", "continued"), ("checking",)]))
    def release_next_wave(self, data: st.DataObject, ahead: int, frm: tuple[str, ...]) -> None:
        t = self.pick_rollout(data)
        r = t.rollout
        assert r is not None
        k = max(2, r.wave + ahead)
        if t.state not in ("active", "paused"):
            with pytest.raises(QueueError) as refused:
                release_wave(self.q, t.id, k, frm)
            assert refused.value.code == Code.TASK_NOT_ACTIVE
            return
        before = self.now()
        released = release_wave(self.q, t.id, k, frm)
        if k != r.wave + 1 or k > r.waves or r.state not in frm:
            assert released is None  # compare-and-set: nothing written
            return
        members = [j for j in self.jobs.values()
                   if j.task == t.id and j.wave == k] if r.staged else []
        out = [j for j in members if j.state == "waiting"]
        assert released == len(out)
        at = int(self.client.hget(KEYS.job(out[0].id), "due")) if out else 0
        assert not out or before <= at <= self.now()
        for j in out:
            if t.state == "paused":
                j.state, j.due = "held", at
                COVERED["wave released held"] += 1
            else:
                self.pend(j, at)
        self.expect("wave-release", t.id, None, k, "running", " ".join(sorted(j.id for j in out)),
                    None, None)
        r.wave, r.state, r.why, r.until = k, "running", "", ""
        self.wave_begins(t, len(members))
        COVERED["wave release"] += 1
        if out:
            self.pass_time(at)

    def _move(self, t: MTask, wave: int, frm: tuple[str, ...], to: str, kind: str,
              why: str = "", operator: str = "") -> bool:
        """wave.lua: the wave state from one of ``frm`` to ``to``, compare-and-set."""
        r = t.rollout
        assert r is not None
        if t.state not in ("active", "paused"):
            with pytest.raises(QueueError) as refused:
                move(self.q, t.id, wave, frm, to, kind, why=why, operator=operator)
            assert refused.value.code == Code.TASK_NOT_ACTIVE
            return False
        moved = move(self.q, t.id, wave, frm, to, kind, why=why, operator=operator)
        assert moved == (wave == r.wave and r.state in frm)
        if moved:
            r.state, r.why, r.until = to, why, ""
            r.waving = r.waving and to != "done"
            self.expect(kind, t.id, None, wave, to, None, why or None, operator or None)
        return moved

    @precondition(lambda self: any(t.rollout for t in self.tasks.values()))
    @rule(data=st.data(), stale=st.booleans(), step=st.sampled_from([
        ("running", "checking", "wave-check"), ("checking", "stopped", "wave-stop"),
        ("running", "gated", "wave-wait"), ("running", "done", "wave-done")]))
    def wave_step(self, data: st.DataObject, stale: bool, step: tuple[str, str, str]) -> None:
        """The controller moves the rollout on (a stale step saw the wave before)."""
        t = self.pick_rollout(data)
        frm, to, kind = step
        assert t.rollout is not None
        self._move(t, t.rollout.wave - int(stale), (frm,), to, kind, why=f"{kind} by the model")

    @precondition(lambda self: any(t.rollout for t in self.tasks.values()))
    @rule(data=st.data())
    def continue_rollout(self, data: st.DataObject) -> None:
        """``tasks continue`` (rollout.continue_rollout): pass a gate, or go on after a stop,
        resuming the jobs the stop held back."""
        t = self.pick_rollout(data)
        r = t.rollout
        assert r is not None
        to = {"gated": "approved", "stopped": "continued"}.get(r.state)
        if to is None:
            return  # refused before any call
        held = t.state == "paused" and r.held
        if self._move(t, r.wave, (r.state,), to, "continue", why="continued", operator="ops"):
            COVERED["continue"] += 1
            if held:
                self.op_resume(t, data)

    # Operators' verbs share two rules, so that workers' verbs come up more often.

    @rule(data=st.data(), verb=st.sampled_from(["pause", "resume"]))
    def pause_or_resume(self, data: st.DataObject, verb: str) -> None:
        getattr(self, "op_" + verb)(self.pick_task(data), data)

    @rule(group=st.sampled_from(["g0", "g1"]), limit=st.sampled_from([None, 1, 1, 2]))
    def group_limit(self, group: str, limit: int | None) -> None:
        """An operator sets or removes a group's limit: its waiters go back to their sets."""
        self.q.set_group_limit(group, limit, "ops")
        if limit is None:
            self.glimit.pop(group, None)
        else:
            self.glimit[group] = limit
        self.over[group] = self.gbusy[group]
        COVERED["group limit"] += 1
        self.release_waiters(KEYS.gq(group))

    @rule(data=st.data(), verb=st.sampled_from(["cancel", "retry_failed", "reprioritize",
                                                 "create_again"]))
    def operator(self, data: st.DataObject, verb: str) -> None:
        getattr(self, "op_" + verb)(self.pick_task(data), data)

    def op_cancel(self, t: MTask, data: st.DataObject) -> None:
        self.sweep(t, "ops")

    def op_pause(self, t: MTask, data: st.DataObject) -> None:
        ended = t.state == "active" and 0 < t.total <= t.succeeded + t.failed + t.cancelled
        if t.state in ("cancelled", "aborted") or ended:  # nothing to pause once all ended
            with pytest.raises(QueueError) as refused:
                self.q.pause(t.id, "ops")
            assert refused.value.code == Code.TASK_NOT_ACTIVE
            return
        self.q.pause(t.id, "ops")
        if t.state == "active":
            t.state = "paused"
            self.expect("pause", t.id, None, "ops")

    def op_resume(self, t: MTask, data: st.DataObject) -> None:
        # a stopped rollout, paused by its failures or active after its check: continue first
        stopped = t.rollout is not None and t.rollout.state == "stopped"
        if t.state in ("cancelled", "aborted") or stopped:
            with pytest.raises(QueueError) as refused:
                self.q.resume(t.id, "ops")
            assert refused.value.code == Code.TASK_NOT_ACTIVE
            return
        moved = self.q.resume(t.id, "ops")
        held = [j for j in self.jobs.values() if j.task == t.id and j.state == "held"]
        if t.state == "paused":
            t.state = "active"
            self.expect("resume", t.id)
            if t.rollout:
                t.rollout.held = False
        for j in held:
            j.state, j.zset, j.score = "pending", t.prio, j.due
        assert moved == len(held)

    def op_retry_failed(self, t: MTask, data: st.DataObject) -> None:
        ended_clean = t.failed == 0 and 0 < t.total <= t.succeeded + t.cancelled
        if t.state == "cancelled" or ended_clean:  # nothing to retry once all ended unfailed
            with pytest.raises(QueueError) as refused:
                self.q.retry_failed(t.id, "ops")
            assert refused.value.code == Code.TASK_NOT_ACTIVE
            return
        before = self.now()
        moved = self.q.retry_failed(t.id, "ops")
        failed = [j for j in self.jobs.values() if j.task == t.id and j.state == "failed"]
        failed.sort(key=lambda j: int(j.id.rpartition(".")[2]))
        assert [ids for _, ids in moved] == ([[j.id for j in failed]] if failed else [])
        if not failed:
            return
        due = int(self.client.hget(KEYS.job(failed[0].id), "due"))
        assert before <= due <= self.now()
        t.lost_failed -= sum(j.lost for j in failed)  # a lost job queued again is lost no more
        for j in failed:
            j.lost = False
            j.attempt = 0  # a new attempt budget; the token is kept
            self.forget_failed_host(t, j)  # it counts again only when it fails again
            self.pend(j, due)
            self.expect("retry-failed", t.id, j.id)
        self.pass_time(due)
        t.failed -= len(failed)
        if t.state == "aborted":
            t.state, t.overshoot = "active", 0
            r = t.rollout
            if r is not None:  # the controllers visit it again while later waves are staged
                r.held = False
                r.waving = r.waving or (r.state != "done" and r.staged)

    def op_reprioritize(self, t: MTask, data: st.DataObject) -> None:
        prio = data.draw(st.sampled_from(PRIORITY_CLASSES), label="class")
        if t.state in ("cancelled", "aborted"):
            with pytest.raises(QueueError) as refused:
                self.q.reprioritize(t.id, prio, "ops")
            assert refused.value.code == Code.TASK_NOT_ACTIVE
            return
        moved = self.q.reprioritize(t.id, prio, "ops")
        if prio != t.prio:
            self.expect("reprioritize", t.id, None, t.prio, prio)
            t.prio = prio
        pending = [j for j in self.jobs.values()
                   if j.task == t.id and j.state == "pending" and j.zset != prio]
        for j in pending:
            j.zset = prio  # same score: its place in line
        assert moved == len(pending)
        if any(j.task == t.id and j.state == "running" and j.zset != prio
               for j in self.jobs.values()):
            COVERED["lease in old class"] += 1

    # ------------------------------------------------------------------ invariants

    @invariant()
    def limits_hold_and_no_waiter_is_stranded(self) -> None:
        """From the model's jobs alone: one exclusive job per host; a limited group runs no more
        jobs than its limit (or than ran when it was lowered); every waiting job waits for a
        job that is running, so its end will move it back."""
        running = [j for j in self.jobs.values() if j.state == "running"]
        per_host = Counter(j.host for j in running if self.task_of(j).exclusive)
        assert all(n <= 1 for n in per_host.values()), per_host
        per_group = Counter(g for j in running for g in self.gholds.get(j.id, []))
        for g, n in per_group.items():
            if g in self.glimit:
                self.over[g] = min(self.over.get(g, 0), n)  # only ever shrinks to the limit
                assert n <= max(self.glimit[g], self.over[g]), (g, n, self.glimit[g])
        for j in self.jobs.values():
            if j.state != "hostwait":
                continue
            if j.waitq == KEYS.hostq(j.host):
                holder = self.busy.get(j.host)
                assert holder and self.jobs[holder].state == "running", j.id
            else:
                group = j.waitq.rsplit(":", 1)[-1] if j.waitq else None
                assert group and per_group[group] >= 1, (j.id, j.waitq)

    @invariant()
    def later_waves_wait_and_no_released_job_is_stranded(self) -> None:
        """A rollout's jobs of the waves after its current one are staged (or cancelled with
        the task) and were never claimed; every job still waiting is of such a wave, so
        nothing released is left waiting."""
        for j in self.jobs.values():
            r = self.task_of(j).rollout
            if r and j.wave and j.wave > r.wave:
                assert j.state in ("waiting", "cancelled") and j.token == 0, j
            if j.state == "waiting":
                assert r and j.wave and j.wave > r.wave, j

    @invariant()
    def events_are_the_expected_ones(self) -> None:
        entries = self.client.xrange(KEYS.events, min="(" + self.last_event)
        got: Counter[tuple] = Counter()
        for entry_id, fields in entries:
            got.update(normalize(fields))
            self.last_event = entry_id
        want = Counter(self.expected)
        self.expected = []
        assert got == want, f"unexpected events {got - want}, missing {want - got}"

    @invariant()
    def redis_matches_model(self) -> None:
        pipe = self.client.pipeline(transaction=False)
        for prio in PRIORITY_CLASSES:
            pipe.zrange(KEYS.due(prio), 0, -1, withscores=True)
        pipe.zrange(KEYS.leases, 0, -1, withscores=True)
        pipe.zrange(KEYS.dead, 0, -1)
        pipe.keys(KEYS.job("*"))
        for tid in self.tasks:
            pipe.hgetall(KEYS.task(tid))
            pipe.lrange(KEYS.parked(tid), 0, -1)
            pipe.zrange(KEYS.held(tid), 0, -1, withscores=True)
            pipe.zrange(KEYS.waves(tid), 0, -1, withscores=True)
        pipe.smembers(KEYS.waving)
        for jid in self.jobs:
            pipe.hgetall(KEYS.job(jid))
        lists = sorted({KEYS.hostq(f"h{n}") for n in range(MAX_SPAN)}
                       | {KEYS.gq(g) for g in ("g0", "g1")})
        pipe.hgetall(KEYS.busy)
        pipe.hgetall(KEYS.gbusy)
        pipe.hgetall(KEYS.gholds)
        pipe.hgetall(KEYS.glimit)
        for q in lists:
            pipe.lrange(q, 0, -1)
        replies = iter(pipe.execute())
        places: dict[str, list[tuple]] = defaultdict(list)
        for prio in PRIORITY_CLASSES:
            for member, score in next(replies):
                places[member].append(("due", prio, int(score)))
        for member, score in next(replies):
            places[member].append(("leases", int(score)))
        for member in next(replies):
            places[member].append(("dead",))
        hashes = set(next(replies))
        task_hashes, staged = {}, {}
        for tid in self.tasks:
            task_hashes[tid] = next(replies)
            for member in next(replies):
                places[member].append(("parked", tid))
            for member, score in next(replies):
                places[member].append(("held", tid, int(score)))
            staged[tid] = {member: int(score) for member, score in next(replies)}
        assert next(replies) == {tid for tid, t in self.tasks.items()
                                 if t.rollout and t.rollout.waving}
        job_hashes = {jid: next(replies) for jid in self.jobs}
        # host exclusivity: the holder of each host, and who waits for it (in order)
        busy, gbusy, gholds, glimit = next(replies), next(replies), next(replies), next(replies)
        assert busy == self.busy
        assert all(self.jobs[j].state == "running" for j in busy.values())
        assert {g: int(n) for g, n in gbusy.items()} == dict(self.gbusy)
        assert {j: g.split(",") for j, g in gholds.items()} == self.gholds
        assert {g: int(n) for g, n in glimit.items()} == self.glimit
        # limits hold: no group runs more jobs than its limit allowed when they were claimed
        for q in lists:
            waiting = next(replies)
            assert waiting == self.waiting.get(q, []), q
            for w in waiting:
                places[w].append(("wait", q))

        assert set(places) <= set(self.jobs), f"unknown members {set(places) - set(self.jobs)}"
        assert hashes == {KEYS.job(j.id) for j in self.jobs.values()
                          if j.state in (*LIVE, "failed", "hostwait", "waiting")}
        for j in self.jobs.values():
            h = job_hashes[j.id]
            want = {
                "pending": [("due", j.zset, j.due)],
                "running": [("due", j.zset, j.score), ("leases", j.score)],
                "parked": [("parked", j.task)],
                "held": [("held", j.task, j.due)],
                "failed": [("dead",)],
                "hostwait": [("wait", j.waitq)],
            }.get(j.state, [])
            assert sorted(places.get(j.id, [])) == sorted(want), f"{j.id} is {j.state}"
            if j.state in ("succeeded", "cancelled"):
                assert h == {}
                continue
            assert (h["state"], int(h.get("token", 0)), int(h.get("attempt", 0)), int(h["due"])) \
                == (j.state, j.token, j.attempt, j.due), f"{j.id}: {h}"
            assert h.get("owner") == j.owner, f"{j.id}: {h}"
            assert h.get("failed_once") == ("1" if j.failed_once else None), f"{j.id}: {h}"
            assert h.get("lost") == ("1" if j.lost else None), f"{j.id}: {h}"
            assert h.get("waitq") == j.waitq, f"{j.id}: {h}"
            assert not (j.state == "pending" and j.zset != self.task_of(j).prio), \
                f"{j.id} is pending outside its task's class"
            # fencing tokens only grow
            assert int(h.get("token", 0)) >= self.tokens_seen.get(j.id, 0)
            self.tokens_seen[j.id] = int(h.get("token", 0))

        for t in self.tasks.values():
            h = task_hashes[t.id]
            fields = ("state", "prio", "total", "span", "running", "succeeded", "failed",
                      "cancelled", "lost", "overshoot", "failed_hosts")
            assert {f: h[f] for f in fields} == {f: str(getattr(t, f)) for f in fields}, t.id
            assert int(h.get("lost_failed") or 0) == t.lost_failed, t.id
            r = t.rollout
            assert {f: h.get(f) for f in WAVE_FIELDS} == \
                (r.fields() if r else dict.fromkeys(WAVE_FIELDS)), t.id
            assert staged[t.id] == ({f"{j.id} {j.host}": j.wave for j in self.jobs.values()
                                     if j.task == t.id and j.wave} if r and r.staged else {})
            mine = [job_hashes[j.id] for j in self.jobs.values() if j.task == t.id]
            states = Counter(jh.get("state") for jh in mine if jh)
            # from Redis alone: the counters agree with the job hashes
            assert int(h["running"]) == states["running"]
            assert int(h["failed"]) == states["failed"]
            assert int(h.get("lost_failed") or 0) == sum(1 for jh in mine if jh.get("lost"))
            assert int(h["total"]) == \
                int(h["succeeded"]) + int(h["cancelled"]) + sum(states.values())
            if t.max_running > 0:
                assert int(h["running"]) <= t.max_running


@pytest.fixture
def machine(qclient: redis.Redis):
    QueueMachine.client = qclient
    yield QueueMachine
    del QueueMachine.client


# Not on the cluster: its 300 examples would double the cluster's share of the suite, and the
# cluster runs the same scripts in the other queue tests (test_cluster_runs_every_script).
@pytest.mark.parametrize("qclient", ["redis7", "redis6.2"], indirect=True)
@pytest.mark.timeout(300 + int(EXAMPLES or 0))  # long runs: about 0.1 s an example
def test_the_queue_does_what_its_model_says(machine: type[QueueMachine]) -> None:
    COVERED.clear()
    run_state_machine_as_test(machine, settings=SETTINGS)
    if SETTINGS.derandomize or SETTINGS.max_examples >= 200:
        # the examples went through the paths this test is about (stale answers, losses, aborts)
        missing = {"stale ack", "stale fail", "lost retry", "lost failed", "abort", "park",
                   "unpark", "held", "host busy", "group full", "waiter back",
                       "group limit", "wave release", "wave stop"} - set(COVERED)
        assert not missing, f"never exercised: {missing} ({dict(COVERED)})"


# -------------------------------------------------------- defects found (fixed)
#
# Each test sets the scene with plain asserts, then checks the documented behaviour with
# documented(): only a Defect is the expected failure, so a changed scene fails loudly.


class Defect(AssertionError):
    """The documented behaviour is not there."""


def documented(ok: bool, what: str) -> None:
    if not ok:
        raise Defect(what)


def test_a_job_unparked_after_a_loss_comes_back_into_its_tasks_class(queue: Queue) -> None:
    # Given a task limited to one running job: t.0 runs under a 1 ms lease, t.1 is parked
    make_task(queue, "t", 2, max_running=1, idempotent=False)
    first = queue.claim("w1", 2, lease_ms=1)
    assert [j.job_id for j in first.jobs] == ["t.0"]
    assert queue.job_state("t.1")["state"] == "parked"
    # and the task moved to the urgent class while t.0 runs, next to another urgent task
    assert queue.reprioritize("t", "urgent", "ops") == 0
    make_task(queue, "u", 1, priority="urgent")
    wait_past(queue.client, first.now_ms + 1)
    # When a claim of one job finds t.0 lost (failed: not idempotent), which frees its slot
    claim = queue.claim("w2", 1)
    assert claim.lost == ["t.0"]
    # Then t.1 comes back into its task's class (docs/architecture.md "Priority classes":
    # parked and held jobs come back into the task's current class), where the same claim
    # takes it ahead of u.0, due later; it was pending in the normal set, behind every normal
    # job due before it
    documented([j.job_id for j in claim.jobs] == ["t.1"]
               and queue.client.zscore(KEYS.due("normal"), "t.1") is None,
               "t.1 is not claimed from its urgent class")


def test_a_lost_job_never_aborts_its_task_and_frees_its_place_for_a_parked_job(
        queue: Queue) -> None:
    # Given a task limited to one running job that aborts at its first failure: t.0 runs under
    # a 1 ms lease, t.1 and t.2 are parked
    make_task(queue, "t", 3, max_running=1, max_failures=1, idempotent=False)
    first = queue.claim("w1", 3, lease_ms=1)
    assert [j.job_id for j in first.jobs] == ["t.0"]
    wait_past(queue.client, first.now_ms + 1)
    # When a claim finds t.0 lost: failed for good as lost (not idempotent)
    claim = queue.claim("w2", 5)
    assert claim.lost == ["t.0"]
    # Then the loss is the worker's, not the host's: the task is not aborted, and the place
    # t.0 held goes to t.1 (docs/reliability.md, "Host failure or worker loss")
    t = queue.task_state("t")
    assert (t["state"], t["failed"], t["lost_failed"], t.get("failed_hosts", "0")) == \
        ("active", "1", "1", "0")
    assert [j.job_id for j in claim.jobs] == ["t.1"]
    assert queue.aborting() == []


def test_the_sweep_after_an_abort_leaves_a_task_revived_by_retry_failed_alone(
        queue: Queue) -> None:
    # Given a job whose failure aborts its task: its worker is to sweep (FailOutcome.aborted)
    make_task(queue, "t", 2, max_failures=1)
    [job] = queue.claim("w1", 1).jobs
    outcome = queue.fail_job("w1", job.job_id, job.token, JobResult(1), error="boom",
                             retryable=False)
    assert outcome.aborted
    # When an operator's retry-failed comes first, then the worker's sweep (workers/finisher.py)
    assert [ids for _, ids in queue.retry_failed("t", "ops")] == [["t.0"]]
    assert queue.task_state("t")["state"] == "active"
    assert queue.sweep_aborted("t") == 0
    # Then the revived task and its jobs are left alone, as they are when retry-failed comes
    # in the middle of the sweep (cancel.lua); instead the task and both jobs are cancelled
    documented(queue.task_state("t")["state"] == "active", "the revived task is cancelled")
    documented(queue.job_state("t.0").get("state") == "pending", "the retried job is cancelled")
    documented(events(queue.client, "cancel") == [], "cancel events by operator ''")


def test_a_lost_job_does_not_count_against_its_waves_limit(queue: Queue) -> None:
    # Given a rollout in waves [t.0, t.1], [t.2] whose wave may lose 1 host; t.0 runs under a
    # 1 ms lease, t.1 is pending
    queue.create_task(TaskSpec("t", idempotent=False))
    specs = [JobSpec(f"t.{k}", f"h{k}") for k in range(3)]
    queue.enqueue("t", specs[:2])
    stage(queue, "t", 2, {"counts": [2, 1], "max_failures": "50%"},
          list(zip(specs, [1, 1, 2])))
    first = queue.claim("w1", 1, lease_ms=1)
    assert [j.job_id for j in first.jobs] == ["t.0"]
    wait_past(queue.client, first.now_ms + 1)
    # When a claim finds t.0 lost: failed for good as lost
    claim = queue.claim("w2", 5)
    assert claim.lost == ["t.0"]
    # Then the wave goes on (a lost worker is no failed host) and the same claim takes t.1
    t = queue.task_state("t")
    assert (t["state"], t["wave_state"], t.get("wave_failures", "0")) == ("active", "running", "0")
    assert [j.job_id for j in claim.jobs] == ["t.1"]
