"""The HTTP API's one poller per followed task, and what a customer following one is shown.

1. ``Tracker``: one task read again and again on connections it holds: progress, new
   failures, one host's jobs on request, and the job counts of the tenants whose customers
   follow it (one query for all of them);
2. ``TenantScope`` (``tenant_scope``): what a customer following a task is shown of what the
   tracker read: its own hosts' failures and jobs only, their output where the task says so
   (``record.tenancy.output_shown``), its own jobs' counts (``tenant_jobs``);
3. ``tenant_progress``: a task's numbers as a customer watching it is shown them.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.errors import NotFoundError
from scheduler.verbs.follow import RECORD_WAIT_S, from_record, progress, record_caught_up
from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from scheduler.views.snapshot import TaskProgress

__all__ = ["TenantScope", "Tracked", "Tracker", "tenant_jobs", "tenant_progress",
           "tenant_scope"]


@dataclass(frozen=True)
class Tracked:
    """One read of a followed task: its ``progress`` now; the ``failures`` recorded since the
    last read (``FailureFeed`` rows); with a host asked for, that host's job rows
    (``task_outputs``: state and last attempt's lines), read again only when the task's done
    count moved (None: not read this time); ``tenant_jobs``: the job counts by state of each
    tenant asked for (from the record)."""

    progress: TaskProgress
    failures: list[dict[str, Any]]
    host_jobs: list[dict[str, Any]] | None
    tenant_jobs: dict[str, dict[str, int]] = field(default_factory=dict)


class Tracker:
    """One task followed by one reader, for as long as it follows (the HTTP API's poller).

    1. Opens one Redis client and one engine on the record, held until ``close``;
    2. ``read``: the task's progress (one pipelined read of Redis, or the record for a task
       Redis no longer has), the failures recorded since (one SQL query, until
       ``failures_cap`` were returned) and, with ``host``, that host's jobs;
    3. ``settle``: once the task ended, gives the recorders time to bring the last results into
       SQL (as ``wait`` does) and reads the last failures and the host's jobs again, and
       whether the record was still behind;
    4. counts its round trips to Redis and SQL in ``queries`` (what following costs).
    """

    def __init__(self, stores: Stores, task_id: int, *, host: str | None = None,
                 failures_cap: int = 100) -> None:
        from scheduler.record.session import open_database
        from scheduler.views.live import FailureFeed

        self.stores, self.task_id, self.host = stores, str(task_id), host
        self.failures_cap, self.failures_read = failures_cap, 0
        self.engine = open_database(stores.settings)
        try:
            self.client = stores.connect()
        except BaseException:
            self.engine.dispose()
            raise
        self.feed = FailureFeed(self.engine, [self.task_id])
        self._done_seen = -1
        self.queries = 0

    def read(self, tenants: Collection[str] = ()) -> Tracked:
        """The task now (``NotFoundError`` when neither Redis nor the record knows it), with the
        job counts of ``tenants``."""
        from scheduler.views.snapshot import read_tasks

        self.queries += 1
        found = read_tasks(self.client, self.stores.shards, [self.task_id])[0]
        if found is None:
            self.queries += 1
            found = from_record(self.stores, [self.task_id])[self.task_id]
        failures = self._failures()
        host_jobs = None
        if self.host is not None and found.done != self._done_seen:
            from scheduler.reports.attempts import task_outputs

            self.queries += 1
            host_jobs = task_outputs(self.engine, int(self.task_id), host=self.host)
            self._done_seen = found.done
        return Tracked(progress=found, failures=failures, host_jobs=host_jobs,
                       tenant_jobs=self.tenant_jobs(tenants))

    def tenant_jobs(self, tenants: Collection[str]) -> dict[str, dict[str, int]]:
        """The task's job counts by state of each of ``tenants`` (none asked: no query)."""
        if not tenants:
            return {}
        self.queries += 1
        return tenant_jobs(self.engine, int(self.task_id), tenants)

    def _failures(self) -> list[dict[str, Any]]:
        """The failures recorded since the last read, up to the cap (once it is reached, the
        record is not asked again)."""
        if self.failures_read >= self.failures_cap:
            return []
        self.queries += 1
        rows = self.feed.poll()[:self.failures_cap - self.failures_read]
        self.failures_read += len(rows)
        return rows

    def settle(self, ended: TaskProgress) -> tuple[Tracked, bool]:
        """After the end: the failures the recorders bring in within ``RECORD_WAIT_S`` (and the
        host's jobs as the record has them then), and whether the record is still behind."""
        deadline = time.monotonic() + RECORD_WAIT_S
        while True:
            self.queries += 1
            caught_up = record_caught_up(self.engine, [ended], 0.0)  # one look at the record
            if caught_up or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        host_jobs = None
        if self.host is not None:
            from scheduler.reports.attempts import task_outputs

            self.queries += 1
            host_jobs = task_outputs(self.engine, int(self.task_id), host=self.host)
        return Tracked(progress=ended, failures=self._failures(), host_jobs=host_jobs), \
            not caught_up

    def close(self) -> None:
        self.client.close()
        self.engine.dispose()


@dataclass(frozen=True)
class TenantScope:
    """What a customer of ``tenant`` following a task is shown: the failures and jobs of its
    ``hosts`` in the task, their output only where ``output`` (the tenancy rule) allows."""

    tenant: str
    hosts: frozenset[str]
    output: bool

    def failure(self, f: dict[str, Any]) -> dict[str, Any] | None:
        """A failure event as this customer gets it (None: another tenant's host)."""
        if f["host"] not in self.hosts:
            return None
        if self.output:
            return {**f, "output_withheld": False}
        return {**f, "error": None, "last_lines": [], "output_withheld": True}

    def host_jobs(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``task_outputs`` rows as this customer gets them."""
        if self.output:
            return [{**r, "output_withheld": False} for r in rows if r["host"] in self.hosts]
        return [{**r, "lines": [], "output_withheld": True} for r in rows
                if r["host"] in self.hosts]


def tenant_scope(stores: Stores, task_id: int, tenant: str,
                 host: str | None = None) -> TenantScope:
    """``tenant``'s scope in task ``task_id``; ``NotFoundError`` for a task without a job of it
    (as one that does not exist), or for ``host`` when it is not one of its hosts there."""
    import sqlalchemy as sa

    from scheduler.record.models import Job
    from scheduler.record.tenancy import output_shown

    with stores.reading() as session:
        hosts = frozenset(session.execute(sa.select(Job.host).where(
            Job.task_id == task_id, Job.tenant == tenant)).scalars())
        if not hosts:
            raise NotFoundError(f"no task {task_id}", hint="see `fleetsched tasks list`")
        if host is not None and host not in hosts:
            raise NotFoundError(f"no job of host {host!r} in task {task_id}",
                                hint=f"see `fleetsched tasks show {task_id}`")
        return TenantScope(tenant, hosts, output_shown(session, task_id, tenant))


def tenant_jobs(engine: Engine, task_id: int, tenants: Collection[str]
                ) -> dict[str, dict[str, int]]:
    """Task ``task_id``'s job counts by state of each of ``tenants``, in one query (the record's
    numbers: a customer is counted over its own jobs, as ``tasks show`` counts them)."""
    import sqlalchemy as sa

    from scheduler.record.models import Job

    out: dict[str, dict[str, int]] = {t: {} for t in tenants}
    with engine.connect() as conn:
        for tenant, state, n in conn.execute(
                sa.select(Job.tenant, Job.state, sa.func.count())
                .where(Job.task_id == task_id, Job.tenant.in_(list(tenants)))
                .group_by(Job.tenant, Job.state)):
            out[tenant][state] = n
    return out


def tenant_progress(stores: Stores, task_id: str, tenant: str) -> TaskProgress:
    """What a customer of ``tenant`` watching task ``task_id`` is shown (``tasks watch`` through
    a server): the task's state, and the counts of its own jobs only, from the record as
    ``tasks show`` counts them, and of the hosts running now its own only, without the
    team's worker that runs them; nothing that counts another customer's jobs (the parked
    and lost-worker counts, why a wave is held). ``NotFoundError`` for a task without a job of
    ``tenant``, as for one that does not exist."""
    from dataclasses import replace

    from scheduler.progress import from_job_states

    scope = tenant_scope(stores, int(task_id), tenant)
    [task] = progress(stores, [task_id], hosts=scope.hosts)
    with stores.database() as engine:
        counts = tenant_jobs(engine, int(task_id), [tenant])[tenant]
    own = from_job_states(task.state, counts)
    running = [{**r, "worker": ""} for r in task.running_hosts if r["host"] in scope.hosts]
    return replace(task, total=own.total, running=own.running, succeeded=own.succeeded,
                   failed=own.failed, lost=own.lost, cancelled=own.cancelled, losses=0,
                   parked=0, wave_why="", running_hosts=running)
