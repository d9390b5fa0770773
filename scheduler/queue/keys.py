"""Every Redis key name fleetsched uses. Nothing else in the code base concatenates key names.

All keys of one shard share the hash tag ``{<prefix>}`` (``{fs}`` by default), so every Lua
script touches one cluster slot and runs unchanged on Redis Cluster. A shard holds whole tasks:
the jobs of a task never span shards, which keeps per-task counters atomic.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

PRIORITY_CLASSES: tuple[str, ...] = ("urgent", "normal", "bulk")
"""Priority classes, highest first. Claims drain a higher class before looking at a lower one."""

DEFAULT_PREFIX = "fs"


@dataclass(frozen=True)
class Keys:
    """Key names of one queue shard. ``Keys("fs").due("normal") == "{fs}:due:normal"``."""

    prefix: str = DEFAULT_PREFIX

    @cached_property
    def tag(self) -> str:
        """The hash tag every key of this shard starts with (computed once: keys are hot)."""
        return "{" + self.prefix + "}"

    def due(self, priority: str = "normal") -> str:
        """ZSET job id -> ms epoch: pending jobs at their due time, running ones at lease expiry."""
        if priority not in PRIORITY_CLASSES:
            raise ValueError(f"unknown priority class {priority!r}")
        return f"{self.tag}:due:{priority}"

    def all_due(self) -> list[str]:
        """The due sets of every class, highest priority first."""
        return [self.due(p) for p in PRIORITY_CLASSES]

    def job(self, job_id: str) -> str:
        """HASH of one job (fields in docs/architecture.md, "Job hash")."""
        return f"{self.tag}:job:{job_id}"

    def task(self, task_id: str) -> str:
        """HASH of one task's live state and counters."""
        return f"{self.tag}:task:{task_id}"

    def output(self, task_id: str) -> str:
        """STREAM of a task's output lines as the workers' jobs print them, secrets masked
        (``workers.liveout``; ``tasks output --follow`` reads it): capped (XADD MAXLEN ~),
        expiring an hour after its last line, and a minute after its task ended."""
        return f"{self.tag}:output:{task_id}"

    def parked(self, task_id: str) -> str:
        """LIST of jobs held back by the task's concurrency limit, oldest first."""
        return f"{self.tag}:parked:{task_id}"

    def held(self, task_id: str) -> str:
        """ZSET of a paused task's pending jobs at their due time, so resume keeps their order."""
        return f"{self.tag}:held:{task_id}"

    def waves(self, task_id: str) -> str:
        """ZSET job id -> wave number (1-based) of a task rolled out in waves: every job of
        waves 2.. is staged here (state ``waiting``, in no due set) until its wave is
        released; released members stay, so the controller can list a wave's jobs."""
        return f"{self.tag}:waves:{task_id}"

    def wave_lock(self, task_id: str) -> str:
        """STRING: the wave controller's short lock on one task (SET NX PX)."""
        return f"{self.tag}:lock:wave:{task_id}"

    @property
    def waving(self) -> str:
        """SET of the ids of tasks whose rollout in waves is not over: what controllers visit."""
        return f"{self.tag}:waving"

    @property
    def leases(self) -> str:
        """ZSET running job id (or ``sched:<name>``) -> lease expiry ms: the claim script visits
        expired ones first, so a dead worker's jobs are found whatever the due backlog."""
        return f"{self.tag}:leases"

    def memo(self, job_id: str, token: int) -> str:
        """STRING "<verb> <a> <b>": the outcome the ack, fail, release or defer of one run (a
        job and its token) gave, kept for ``Queue.memo_ms``, so the same token's repeat (its
        first reply was lost) answers it and writes nothing (_lib.lua fs_remember, fs_recall)."""
        return f"{self.tag}:memo:{job_id}:{token}"

    def claim_request(self, request_id: str) -> str:
        """STRING: the reply of a claim that took or failed jobs, by its request id, kept for
        ``Queue.memo_ms``, so a claim sent again after a lost reply gets the jobs that still run
        under its tokens, their leases renewed (claim.lua)."""
        return f"{self.tag}:claimreq:{request_id}"

    @property
    def aborting(self) -> str:
        """SET of the ids of aborted tasks whose pending, parked and held jobs are not swept
        yet: an abort adds its task, the sweep's last chunk or a revival removes it; nodes sweep
        what it holds (``Queue.aborting``), so no lost reply strands a parked job."""
        return f"{self.tag}:aborting"

    @property
    def dead(self) -> str:
        """ZSET job id -> ms epoch of jobs that failed for good (the dead letter set)."""
        return f"{self.tag}:dead"

    @property
    def events(self) -> str:
        """STREAM of audit events, until the recorder has them in SQL."""
        return f"{self.tag}:events"

    @property
    def wake(self) -> str:
        """Pub/sub channel: published when a job becomes due earlier than the sleeping workers know."""
        return f"{self.tag}:wake"

    @property
    def stats(self) -> str:
        """HASH of queue-wide counters (``enqueued`` sequence, last reorder summary)."""
        return f"{self.tag}:stats"

    @property
    def epoch(self) -> str:
        """STRING: the queue's identity, a random id written once (SET NX) and kept in SQL too
        (``scheduler.record.epoch``; only shard 0's is used). Gone or another: Redis lost or
        replaced its data."""
        return f"{self.tag}:epoch"

    @property
    def overload_lock(self) -> str:
        """STRING: the overload-handling lock (seed 002), held with a TTL."""
        return f"{self.tag}:lock:overload"

    @property
    def workers(self) -> str:
        """HASH worker id -> JSON heartbeat (host, pid, slots, busy, ms epoch)."""
        return f"{self.tag}:workers"

    def host(self, name: str) -> str:
        """HASH: how to reach a host (address, port, user, vars JSON), copied from SQL at submit."""
        return f"{self.tag}:host:{name}"

    @property
    def busy(self) -> str:
        """HASH host -> the job of an exclusive task running there (claim.lua, _lib.lua)."""
        return f"{self.tag}:busy"

    def hostq(self, host: str) -> str:
        """LIST of the jobs waiting for ``host`` to be free (state hostwait)."""
        return f"{self.tag}:hostq:{host}"

    @property
    def glimit(self) -> str:
        """HASH group -> its limit: most jobs running at once on its hosts, across tasks."""
        return f"{self.tag}:glimit"

    @property
    def gbusy(self) -> str:
        """HASH group -> jobs running on its hosts now (counted at claim, given back at end)."""
        return f"{self.tag}:gbusy"

    @property
    def gholds(self) -> str:
        """HASH running job -> the limited groups it counts in (comma-separated)."""
        return f"{self.tag}:gholds"

    def gq(self, group: str) -> str:
        """LIST of the jobs waiting for room in ``group`` (state hostwait)."""
        return f"{self.tag}:gq:{group}"

    def window_copy_lock(self) -> str:
        """STRING: held (SET NX PX) while window copies are read from SQL and written, so the
        copies land in the order of the changes they show (``scheduler.windows.store``)."""
        return f"{self.tag}:lock:window-copy"

    def window(self, name: str) -> str:
        """HASH: a service window's definition, copied from SQL for the claim path."""
        return f"{self.tag}:window:{name}"

    def schedule(self, name: str) -> str:
        """HASH of a schedule's due entry ``sched:<name>``: occurrence (ms), token, owner, state.

        claim.lua builds the same name as ``<tag>:`` .. entry id."""
        return f"{self.tag}:sched:{name}"

    @staticmethod
    def schedule_entry(name: str) -> str:
        """The due-set member of a schedule (it lives in the ``urgent`` set)."""
        return f"sched:{name}"

    def login(self, digest: str) -> str:
        """STRING (JSON, expires) of one single sign-on login under way, under the SHA-256 of
        its state: taken once (GETDEL) by the callback (scheduler.access.sessions)."""
        return f"{self.tag}:login:{digest}"

    def session(self, digest: str) -> str:
        """STRING (JSON, expires) of one person's session after single sign-on, under the
        SHA-256 of the cookie's session id, so a copy of Redis holds no usable session."""
        return f"{self.tag}:session:{digest}"
