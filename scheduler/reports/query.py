"""The data of a report: one query over ``jobs`` joined with ``tasks``, and its summary.

Times are UTC: aware datetimes on PostgreSQL, naive UTC datetimes on SQLite (attaching the
zone to every value cost as much as the query; the renderers print both alike).

A job's report time is when it finished, else when it started, else when its task was created;
``--since`` / ``--until`` filter on it. ``--group`` means the hosts of the group (child groups
included) as the inventory has them now. Rows come back as plain tuples (SQLAlchemy Core, no
ORM objects), which keeps 100,000 jobs well under a second on SQLite.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.errors import ValidationError
from scheduler.progress import from_job_states
from scheduler.record.models import JOB_STATES, Job, Task
from scheduler.record.types import utcnow

JOB_COLUMNS = ["job", "task", "action", "operator", "host", "state", "attempts", "time",
               "started", "finished", "duration_ms", "exit_code", "worker", "error"]
OUTCOMES = ("succeeded", "failed", "lost", "cancelled")  # the final job states
TOTALS = ("succeeded", "failed", "lost", "cancelled", "running", "pending")
MAX_IN_LIST = 10_000  # a bigger host list is filtered in Python rather than in SQL
PARTIAL_NOTE = ("counts are of the jobs this report selects (the filters leave out some jobs "
                "of a task); the state is the whole task's, over all its task_jobs")


@dataclass(frozen=True)
class ReportFilter:
    """What to report on; every field optional. Times are aware UTC datetimes."""

    since: datetime | None = None
    until: datetime | None = None
    task: int | None = None
    host: str | None = None
    group: str | None = None
    action: str | None = None
    state: str | None = None
    operator: str | None = None

    def __post_init__(self) -> None:
        if self.state is not None and self.state not in JOB_STATES:
            raise ValidationError(f"--state {self.state!r} is not a job state",
                                  hint=f"one of {', '.join(JOB_STATES)}")
        if self.since and self.until and self.since >= self.until:
            raise ValidationError("--since must be earlier than --until")

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class Report:
    """Job rows (dicts keyed by ``JOB_COLUMNS``), per-task summaries, and totals."""

    filters: ReportFilter
    generated_at: datetime
    jobs: list[dict[str, Any]]
    tasks: list[dict[str, Any]] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=dict)
    failed_attempts: set[str] = field(default_factory=set)  # jobs with a failed, retried attempt
    # The tasks that have not ended by the record, with their recorded done count (for the
    # note that the queue is ahead of the record: ``report`` reads the record only).
    unfinished: dict[int, int] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        """The filters leave out some jobs of a task in the report."""
        return any(s["jobs"] < s["task_jobs"] for s in self.tasks)

    @property
    def note(self) -> str | None:
        """What the reader must know when the filters cut tasks (``PARTIAL_NOTE``), else None."""
        return PARTIAL_NOTE if self.partial else None

    @property
    def failures(self) -> list[dict[str, Any]]:
        """The jobs that failed or were lost, and those that failed an attempt whatever became
        of them after (retried and succeeded, or cancelled by the task's abort)."""
        return [j for j in self.jobs
                if j["state"] in ("failed", "lost") or j["job"] in self.failed_attempts]


def _group_hosts(engine: Engine, group: str) -> set[str]:
    from sqlalchemy.orm import Session

    from scheduler.inventory import group_members

    with Session(engine) as session:
        return group_members(session, group)


def build_report(engine: Engine, filters: ReportFilter) -> Report:
    """Run the report query (see the module docstring)."""
    j, t = Job.__table__, Task.__table__
    when = sa.func.coalesce(j.c.finished_at, j.c.started_at, t.c.created_at)
    # Filters compare through UTCDateTime (aware values bound as SQLite's naive UTC text).
    when = sa.type_coerce(when, j.c.finished_at.type)
    sqlite = engine.dialect.name == "sqlite"

    def fetched(col: Any) -> Any:
        # On SQLite, attaching UTC to 300,000 values one by one was half the report's time:
        # read naive UTC datetimes and attach the zone once per value only where printed.
        return sa.type_coerce(col, sa.DateTime()) if sqlite else col

    stmt = (sa.select(j.c.id, j.c.task_id, t.c.action, t.c.operator, j.c.host, j.c.state,
                      j.c.attempts, fetched(when), fetched(j.c.started_at),
                      fetched(j.c.finished_at), j.c.duration_ms, j.c.exit_code, j.c.worker,
                      j.c.error)
            .select_from(j.join(t, t.c.id == j.c.task_id)))
    hosts: set[str] | None = None
    if filters.group is not None:
        hosts = _group_hosts(engine, filters.group)
        if len(hosts) <= MAX_IN_LIST:
            stmt = stmt.where(j.c.host.in_(sorted(hosts)))
            hosts = None
    conditions = [
        (filters.since, lambda v: when >= v), (filters.until, lambda v: when < v),
        (filters.task, lambda v: j.c.task_id == v), (filters.host, lambda v: j.c.host == v),
        (filters.action, lambda v: t.c.action == v), (filters.state, lambda v: j.c.state == v),
        (filters.operator, lambda v: t.c.operator == v),
    ]
    for value, make in conditions:
        if value is not None:
            stmt = stmt.where(make(value))
    if filters.since is not None or filters.until is not None:
        stmt = stmt.where(_finished_between(filters.since, filters.until))
    stmt = stmt.order_by(when, j.c.task_id, j.c.seq)
    jobs: list[dict[str, Any]] = []
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
    for row in rows:
        if hosts is not None and row[4] not in hosts:
            continue
        jobs.append(dict(zip(JOB_COLUMNS, row[:14])))
    report = Report(filters=filters, generated_at=utcnow(), jobs=jobs)
    report.tasks = _task_summaries(engine, jobs, report.unfinished)
    report.totals = totals_of(jobs)
    report.failed_attempts = _retried_jobs(engine, sorted({j["task"] for j in jobs}))
    return report


def _finished_between(since: datetime | None, until: datetime | None) -> sa.ColumnElement[bool]:
    """Implied by the report time being in [since, until) (a finished job's report time is its
    finish), and unlike the COALESCE it is answered by ``ix_jobs_finished_at``: jobs finished
    in the span, or not finished."""
    finished = Job.__table__.c.finished_at
    span = []
    if since is not None:
        span.append(finished >= since)
    if until is not None:
        span.append(finished < until)
    return sa.or_(finished.is_(None), sa.and_(*span))


def _retried_jobs(engine: Engine, task_ids: list[int]) -> set[str]:
    """The jobs of these tasks with a ``retry`` event: an attempt that failed."""
    from scheduler.record.models import Event

    out: set[str] = set()
    with engine.connect() as conn:
        for start in range(0, len(task_ids), MAX_IN_LIST):
            chunk = [str(t) for t in task_ids[start:start + MAX_IN_LIST]]
            out.update(conn.execute(sa.select(Event.job_id).where(
                Event.task_id.in_(chunk), Event.kind == "retry")).scalars())
    return out


def totals_of(jobs: list[dict[str, Any]]) -> dict[str, int]:
    """The report's totals over its jobs, counted as every view counts (``scheduler.progress``:
    each job once, ``failed`` by its host, ``lost`` with its worker); ``{"jobs": 0}`` for
    none."""
    if not jobs:
        return {"jobs": 0}
    counts = from_job_states("active", Counter(j["state"] for j in jobs)).counts()
    return {"jobs": counts["total"], **{k: counts[k] for k in TOTALS}}


def totals_text(totals: dict[str, int]) -> str:
    """``45 succeeded, 2 failed, 1 lost with their worker, 2 not finished``."""
    parts = []
    for key in ("succeeded", "failed", "lost", "cancelled"):
        if totals.get(key):
            parts.append(f"{totals[key]} " + ("lost with their worker" if key == "lost" else key))
    unfinished = totals.get("running", 0) + totals.get("pending", 0)
    if unfinished:
        parts.append(f"{unfinished} not finished")
    return ", ".join(parts) or "none"


def _task_summaries(engine: Engine, jobs: list[dict[str, Any]],
                    unfinished: dict[int, int]) -> list[dict[str, Any]]:
    """Per task: what it asked for (``taskinfo.request``), the counts of its jobs in the report
    (``scheduler.progress``: each job once, ``failed`` by its host, ``lost`` with its worker),
    and the state of the **whole** task: where the filters
    leave out some of its jobs (``jobs`` < ``task_jobs``), the state comes from the task row's
    counters (``taskinfo.row_progress``), so a failed task never reads ``succeeded`` because
    its failed job was filtered out. ``unfinished`` gets the recorded done count of each task
    whose jobs have not all ended."""
    from sqlalchemy.orm import Session

    from scheduler.record.models import Schedule
    from scheduler.submission.taskinfo import params_text, policy_text, request, row_progress

    states: dict[int, Counter[str]] = {}
    span: dict[int, list[Any]] = {}
    for job in jobs:
        states.setdefault(job["task"], Counter())[job["state"]] += 1
        if job["time"] is not None:
            first_last = span.setdefault(job["task"], [job["time"], job["time"]])
            first_last[0] = min(first_last[0], job["time"])
            first_last[1] = max(first_last[1], job["time"])
    out = []
    with Session(engine) as session:
        ids = sorted(states)
        rows = {}
        for start in range(0, len(ids), MAX_IN_LIST):
            rows.update((t.id, t) for t in session.scalars(
                sa.select(Task).where(Task.id.in_(ids[start:start + MAX_IN_LIST]))))
        schedules = {s.id: s.name for s in session.scalars(sa.select(Schedule).where(
            Schedule.id.in_({t.schedule_id for t in rows.values() if t.schedule_id})))}
        for tid in ids:
            t = rows[tid]
            progress = from_job_states(t.state, states[tid])
            whole = progress if progress.total >= t.total else row_progress(t)
            if not whole.finished:
                unfinished[tid] = whole.done
            req = request(t, schedules.get(t.schedule_id))
            first, last = span.get(tid, (None, None))
            out.append({"task": tid, "name": t.name or "", "action": t.action,
                        "operator": t.operator, "jobs": progress.total, **{
                            k: v for k, v in progress.counts().items()
                            if k not in ("total", "done")}, "state": whole.state,
                        "task_jobs": max(t.total, progress.total),
                        "target": t.target, "params": params_text(req["params"]),
                        "policy": policy_text(req["policy"]), "origin": req["origin"],
                        "windows": req["windows"], "first": first, "last": last})
    return out


__all__ = ["JOB_COLUMNS", "OUTCOMES", "PARTIAL_NOTE", "Report", "ReportFilter", "build_report", "totals_of",
           "totals_text"]
