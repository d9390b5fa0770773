"""The node's slots: which jobs run where, since when, until when. The master's one shared table.

Every thread of the master goes through this table: the claim loop adds jobs and waits for free
slots, the finisher removes finished jobs, the heartbeat lists leases to renew, the watchdog
finds jobs past their timeout. One lock (with a condition) guards the table and the job sets of
the child handles, so a job is always in exactly one place.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workers.pool import ChildHandle


@dataclass
class Running:
    """One job this node holds a lease on."""

    job_id: str
    token: int
    task_id: str
    due_ms: int
    idempotent: bool
    timeout_s: float
    child: ChildHandle | None = None
    started: float = field(default_factory=time.monotonic)
    # Past this (monotonic) the watchdog stops the job: its timeout plus a margin for the
    # action to report the timeout itself.
    deadline: float = 0.0
    lease_lost: bool = False
    attempt: int = 0  # the claim's attempt number (reported in the presence)
    # Set once its order is written to the child (under the child's send lock): a job not
    # delivered when its child dies never started, whatever the order of the two messages.
    delivered: bool = False


class Slots:
    """Jobs in flight on this node, bounded by ``size``."""

    def __init__(self, size: int, lock: threading.RLock | None = None) -> None:
        self.size = size
        self.lock = lock if lock is not None else threading.RLock()
        self.changed = threading.Condition(self.lock)
        self._running: dict[str, Running] = {}
        # Runs this node claimed again while they still ran here (its lease ran out while the
        # master was stopped): (job id, old token) -> the old run, until its outcome arrives.
        self._superseded: dict[tuple[str, int], Running] = {}
        self.peak = 0

    def __len__(self) -> int:
        return len(self._running)

    @property
    def free(self) -> int:
        return self.size - len(self._running)

    def wait_free(self, timeout: float) -> int:
        """Free slots, waiting up to ``timeout`` seconds for one if there are none."""
        with self.changed:
            if len(self._running) >= self.size:
                self.changed.wait(timeout)
            return max(0, self.size - len(self._running))

    def wait_empty(self, until: float) -> bool:
        """Wait until no job runs or the monotonic time ``until``; True if empty."""
        with self.changed:
            while self._running:
                left = until - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.2))
            return True

    def add(self, jobs: Iterable[Running]) -> None:
        with self.changed:
            for r in jobs:
                old = self._running.get(r.job_id)
                if old is not None and old.token != r.token:
                    self._superseded[(old.job_id, old.token)] = old
                self._running[r.job_id] = r
                if r.child is not None:
                    r.child.jobs.add(r.job_id)
            self.peak = max(self.peak, len(self._running))

    def assign(self, job_id: str, child: ChildHandle) -> None:
        with self.lock:
            r = self._running.get(job_id)
            if r is not None:
                r.child = child
                child.jobs.add(job_id)

    def finish(self, job_id: str, token: int | None = None) -> Running | None:
        """Remove a job (if it is still ours under ``token``) and wake the claim loop."""
        with self.changed:
            r = self._running.get(job_id)
            if r is None or (token is not None and r.token != token):
                return None
            del self._running[job_id]
            if r.child is not None:
                r.child.jobs.discard(job_id)
            self.changed.notify_all()
            return r

    def finish_superseded(self, job_id: str, token: int) -> Running | None:
        """Remove a superseded run (see ``add``) whose outcome arrived: its child's place is
        free again. None if ``token`` names no such run."""
        with self.changed:
            r = self._superseded.pop((job_id, token), None)
            if r is None:
                return None
            current = self._running.get(job_id)
            if r.child is not None and (current is None or current.child is not r.child):
                r.child.jobs.discard(job_id)
            self.changed.notify_all()
            return r

    def forget_superseded(self, child: ChildHandle) -> None:
        """``child`` is gone: the superseded runs it held will never report."""
        with self.lock:
            for key in [k for k, r in self._superseded.items() if r.child is child]:
                del self._superseded[key]

    def has(self, job_id: str) -> bool:
        with self.lock:
            return job_id in self._running

    def holds(self, job_id: str, token: int) -> bool:
        """The job still runs here under ``token`` (not finished, not claimed again)."""
        with self.lock:
            r = self._running.get(job_id)
            return r is not None and r.token == token

    def of_child(self, child: ChildHandle) -> list[Running]:
        """The runs on ``child``: a job it ran that this node has since claimed again and
        placed elsewhere is not among them (ending it would end the new run)."""
        with self.lock:
            runs = (self._running.get(j) for j in child.jobs)
            return [r for r in runs if r is not None and r.child is child]

    def tokens(self) -> dict[str, list[int]]:
        """Every job running here with [token, attempt]: what the node reports in its
        presence, so reconcile never runs a job again that runs here. A run whose lease was
        lost (another node claimed the job since) is not reported: it is not this node's to
        renew, and reconcile must not give the job back to it."""
        with self.lock:
            return {r.job_id: [r.token, r.attempt] for r in self._running.values()
                    if not r.lease_lost}

    def since(self, now_ms: int) -> dict[str, int]:
        """When each job reported by :meth:`tokens` started here, in ms on the clock ``now_ms``
        is read from (the Redis clock in the presence): how long a host has run, for
        ``tasks watch``."""
        now = time.monotonic()
        with self.lock:
            return {r.job_id: now_ms - int((now - r.started) * 1000)
                    for r in self._running.values() if not r.lease_lost}

    def leases(self) -> list[tuple[str, int]]:
        with self.lock:
            return [(r.job_id, r.token) for r in self._running.values() if not r.lease_lost]

    def mark_lease_lost(self, job_id: str) -> None:
        with self.lock:
            r = self._running.get(job_id)
            if r is not None:
                r.lease_lost = True

    def overdue(self, now: float) -> list[Running]:
        with self.lock:
            return [r for r in self._running.values() if r.deadline and r.deadline <= now]

    def all(self) -> list[Running]:
        with self.lock:
            return list(self._running.values())

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"busy": len(self._running), "slots": self.size, "peak": self.peak}
