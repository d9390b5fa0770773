"""Following tasks until they end: ``tasks watch``, ``tasks wait`` and ``submit --wait``.

1. ``progress``: the tasks' numbers now, live from Redis, or from the SQL record for a task
   Redis no longer has (flushed or restored, or a finished task's hash expired);
2. ``follow``: wait until every task has ended, drawing progress bars and failures on a
   console when one is given (``scheduler.views.live``); a task Redis has forgotten must have
   ended in the record, since nothing would ever move it;
3. ``wait``: ``follow`` silently, give the recorders time to bring the last results into SQL,
   and read the failed jobs' last lines;
4. ``record_behind``: the tasks whose record counts fewer ended jobs than the queue (the views
   that read the record only say so);
5. ``Tracker``: one task read again and again on connections it holds (the HTTP API's one
   poller per followed task): progress, new failures, one host's jobs on request, and the job
   counts of the tenants whose customers follow it (one query for all of them);
6. ``TenantScope`` (``tenant_scope``): what a customer following a task is shown of what the
   tracker read: its own hosts' failures and jobs only, their output where the task says so
   (``record.tenancy.output_shown``), its own jobs' counts.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.errors import FleetschedError, NotFoundError
from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    from rich.console import Console
    from sqlalchemy.engine import Engine

    from scheduler.views.snapshot import TaskProgress

__all__ = ["RECORD_WAIT_S", "Followed", "TenantScope", "Tracked", "Tracker", "Waited", "follow",
           "progress", "record_behind", "tenant_jobs", "tenant_progress", "tenant_scope", "wait"]

Note = Callable[[str], None]
RECORD_WAIT_S = 15.0  # how long wait gives the recorders to put the last results in SQL


@dataclass(frozen=True)
class Followed:
    """The tasks' numbers once they ended (in the order asked), and the exit code they make
    (``scheduler.progress.exit_code``)."""

    tasks: list[TaskProgress]
    exit_code: int


@dataclass(frozen=True)
class Waited(Followed):
    """``Followed``, with the failed jobs' last attempts (``task_outputs`` rows) and whether
    the record was still behind the queue when they were read (some may be missing)."""

    failures: list[dict[str, Any]] = field(default_factory=list)
    record_behind: bool = False


def _ignore(_line: str) -> None:
    pass


def progress(stores: Stores, ids: list[str]) -> list[TaskProgress]:
    """The tasks' progress, read once: live from Redis, or from the SQL record for a task Redis
    no longer has (``NotFoundError`` for a task neither knows)."""
    from scheduler.views.snapshot import read_tasks

    client = stores.connect()
    try:
        found = read_tasks(client, stores.shards, ids)
    finally:
        client.close()
    missing = [tid for tid, t in zip(ids, found) if t is None]
    recorded = _from_record(stores, missing) if missing else {}
    return [t if t is not None else recorded[tid] for tid, t in zip(ids, found)]


def tenant_progress(stores: Stores, task_id: str, tenant: str) -> TaskProgress:
    """What a customer of ``tenant`` watching task ``task_id`` is shown (``tasks watch`` through
    a server): the task's state, and the counts of its own jobs only, from the record as
    ``tasks show`` counts them; nothing that counts another customer's jobs (the parked and
    lost-worker counts, why a wave is held). ``NotFoundError`` for a task without a job of
    ``tenant``, as for one that does not exist."""
    from dataclasses import replace

    from scheduler.progress import from_job_states

    tenant_scope(stores, int(task_id), tenant)
    [task] = progress(stores, [task_id])
    with stores.database() as engine:
        counts = tenant_jobs(engine, int(task_id), [tenant])[tenant]
    own = from_job_states(task.state, counts)
    return replace(task, total=own.total, running=own.running, succeeded=own.succeeded,
                   failed=own.failed, lost=own.lost, cancelled=own.cancelled, losses=0,
                   parked=0, wave_why="")


def _from_record(stores: Stores, ids: list[str]) -> dict[str, TaskProgress]:
    """The SQL record's progress (``taskinfo.progress_of`` over the job rows) of tasks Redis has
    no hash for, as the live views' ``TaskProgress``; ``NotFoundError`` for a task the record
    does not know either."""
    from scheduler.record.models import Task
    from scheduler.record.session import open_database, transaction
    from scheduler.submission.taskinfo import progress_of
    from scheduler.views.snapshot import TaskProgress

    out: dict[str, TaskProgress] = {}
    try:
        engine = open_database(stores.settings)
    except FleetschedError as exc:
        raise NotFoundError(f"no task {ids[0]} in the queue, and the SQL record cannot be read "
                            f"({exc})", hint="fleetsched tasks list shows the tasks") from None
    try:
        with transaction(engine, commit=False) as session:
            for tid in ids:
                row = session.get(Task, int(tid)) if tid.isdigit() else None
                if row is None:
                    raise NotFoundError(f"no task {tid} in the queue or in the record",
                                        hint="fleetsched tasks list shows the tasks")
                p = progress_of(session, row, None)
                out[tid] = TaskProgress(
                    task_id=tid, state=p.recorded_state, operator=row.operator or "",
                    action=row.action or "", total=p.total, running=p.running,
                    succeeded=p.succeeded, failed=p.failed, lost=p.lost,
                    cancelled=p.cancelled)
    finally:
        engine.dispose()
    return out


def exit_code(tasks: list[TaskProgress]) -> int:
    """The exit code of ``watch`` and ``wait``: ``scheduler.progress.exit_code``."""
    from scheduler.progress import exit_code as code

    return code(t.progress for t in tasks)


def follow(stores: Stores, ids: list[str], *, interval_s: float, timeout_s: float | None,
           console: Console | None = None, note: Note = _ignore) -> Followed:
    """Wait until every task has ended; with a ``console``, progress bars and failures drawn on
    it as they happen, else silent. ``note`` gets the warning lines."""
    from rich.console import Console

    from scheduler.views.live import FailureFeed, failure_line
    from scheduler.views.live import watch as run_watch
    from scheduler.views.snapshot import read_tasks

    draw = console is not None
    console = console if console is not None else Console(file=io.StringIO(), markup=False)
    client = stores.connect()
    engine = feed = None
    try:
        if draw:
            try:
                from scheduler.record.session import open_database

                engine = open_database(stores.settings)
                feed = FailureFeed(engine, ids)
            except FleetschedError as exc:
                note(f"warning: failures will not be listed ({exc})")
        keys = stores.shards
        recorded: dict[str, TaskProgress] = {}
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            live = [t for t in ids if t not in recorded]
            missing = [t for t, p in zip(live, read_tasks(client, keys, live)) if p is None]
            if missing:
                recorded.update(_ended_in_record(stores, missing, console))
                continue
            try:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                tasks = (run_watch(client, keys, live, console, feed=feed,
                                   interval_s=interval_s, timeout_s=left)[0]
                         if live else [])
            except NotFoundError:  # a finished task's hash expired while watching
                continue
            except TimeoutError:  # its message gives what was left, not the timeout asked
                raise FleetschedError(f"tasks {', '.join(ids)} still running after "
                                      f"{timeout_s:g}s",
                                      hint="wait again, or see fleetsched top") from None
            break
        if feed is not None:
            # The failures come from SQL: once the queue says the tasks ended, give the
            # recorders time to bring the last ones in (a node records from a process of its
            # own, a moment behind), then list what the live view had not shown yet.
            if live and not _recorded(engine, tasks, RECORD_WAIT_S):
                note("warning: the SQL record is behind (is a recorder running?): "
                     "failures may be missing below")
            for f in feed.poll():
                console.print(failure_line(f))
    finally:
        client.close()
        if engine is not None:
            engine.dispose()
    by_id = {t.task_id: t for t in tasks} | recorded
    ended = [by_id[t] for t in ids]
    return Followed(tasks=ended, exit_code=exit_code(ended))


def _ended_in_record(stores: Stores, ids: list[str], console: Console) -> dict[str, Any]:
    """The SQL record's progress of tasks Redis has no hash for, which must have ended there:
    nothing would ever move a task Redis has forgotten."""
    recorded = _from_record(stores, ids)
    for tid, t in recorded.items():
        if not t.progress.ended:
            raise FleetschedError(
                f"task {tid} is not in the queue, and its record says it has not ended "
                f"({t.progress.sentence()})",
                hint="fleetsched reconcile puts the record's unfinished jobs back in the queue")
        console.print(f"task {tid}: not in the queue any more; its numbers are the SQL "
                      "record's", markup=False, highlight=False)
    return recorded


def _recorded(engine: Engine, tasks: list[TaskProgress], timeout_s: float) -> bool:
    """Wait until the SQL record has as many ended jobs as Redis says each task has (the failed
    hosts' lines come from SQL); False when the recorders are still behind after the timeout."""
    from scheduler.record.models import Task
    from scheduler.record.session import transaction
    from scheduler.submission.taskinfo import progress_of

    deadline = time.monotonic() + timeout_s
    while True:
        with transaction(engine, commit=False) as session:
            behind = [t for t in tasks if (row := session.get(Task, int(t.task_id))) is None
                      or progress_of(session, row, None).done < t.done]
        if not behind or time.monotonic() > deadline:
            return not behind
        time.sleep(0.2)


def wait(stores: Stores, ids: list[str], *, timeout_s: float | None) -> Waited:
    """Block until the tasks end; then the failed jobs' last attempts, from the record."""
    from scheduler.reports.attempts import task_outputs

    ended = follow(stores, ids, interval_s=0.2, timeout_s=timeout_s).tasks
    failures: list[dict[str, Any]] = []
    with stores.database() as engine:
        behind = (any(t.progress.unsuccessful for t in ended)
                  and not _recorded(engine, ended, RECORD_WAIT_S))
        for t in ended:
            failures += task_outputs(engine, int(t.task_id), failed=True)
    return Waited(tasks=ended, exit_code=exit_code(ended), failures=failures,
                  record_behind=behind)


def record_behind(stores: Stores, recorded_done: dict[int, int]) -> list[int]:
    """The tasks (of these, with their recorded done count) for which the queue counts more
    ended jobs than the SQL record. One pipelined read; nothing when Redis does not answer at
    once, and the embedded server is never started for it."""
    import redis

    from scheduler.progress import from_task_hash
    from scheduler.redisdb.connect import connect
    from scheduler.redisdb.embedded import Embedded

    if not recorded_done:
        return []
    settings = stores.settings
    ids = sorted(recorded_done)
    shards = stores.shards
    fields = ("total", "succeeded", "failed", "lost_failed", "cancelled")
    try:
        if settings.redis_url is None:
            endpoint = Embedded.of(settings).read_endpoint()
            if endpoint is None:
                return []
            client = endpoint.client(socket_connect_timeout=1.0, socket_timeout=2.0)
        else:
            client = connect(settings, socket_timeout=2.0, check=False)
        try:
            pipe = client.pipeline(transaction=False)
            for tid in ids:
                pipe.hmget(shards.of_task(str(tid)).task(str(tid)), fields)
            replies = pipe.execute()
        finally:
            client.close()
    except (redis.RedisError, FleetschedError, OSError):
        return []
    return [tid for tid, reply in zip(ids, replies)
            if from_task_hash(dict(zip(fields, reply))).done > recorded_done[tid]]


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
            found = _from_record(self.stores, [self.task_id])[self.task_id]
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
            caught_up = _recorded(self.engine, [ended], 0.0)  # one look at the record
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
