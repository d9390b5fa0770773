"""Retention: delete old finished jobs, old events and old finished tasks, in small batches.

Each batch is its own short transaction (``DELETE ... WHERE id IN (SELECT ... LIMIT n)``), so
the recorder and the CLI get the database between two batches: on SQLite a batch holds the
write lock for milliseconds, on PostgreSQL it locks only the rows it deletes. Events and jobs
are taken oldest first along their time index (``ix_events_ts``, ``ix_jobs_finished_at``),
each batch starting where the last one ended, so no batch walks again over the index entries
of the rows deleted before it (PostgreSQL keeps them until VACUUM): a day of events costs the
same at the start of a prune as at its end. (A row older than where the prune has got to that
arrives while it runs, from a recorder catching up, goes at the next prune.)

What is old (``finished_at`` / ``ts`` before the cut-off):
1. jobs in a final state (succeeded, failed, lost, cancelled) — never a pending or running one;
2. events;
3. tasks in a final state with no job rows left (their summary counters go with them);
4. notifications sent or given up (``created_at``); pending ones are kept.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.record.models import (
    JOB_FINAL_STATES,
    TASK_FINAL_STATES,
    Event,
    Job,
    Notification,
    Task,
)
from scheduler.record.types import UTCDateTime, utcnow

DEFAULT_BATCH = 2_000


@dataclass(frozen=True)
class PruneResult:
    cutoff: datetime
    jobs: int
    events: int
    tasks: int
    dry_run: bool
    notifications: int = 0
    batches: int = 0  # transactions that deleted
    longest_batch_s: float = 0.0  # the longest of them: how long a batch held its locks


def _old_jobs(cutoff: datetime) -> sa.ColumnElement[bool]:
    return sa.and_(Job.state.in_(JOB_FINAL_STATES),
                   Job.finished_at < sa.literal(cutoff, UTCDateTime()))


def _old_events(cutoff: datetime) -> sa.ColumnElement[bool]:
    return Event.ts < sa.literal(cutoff, UTCDateTime())


def _old_tasks(cutoff: datetime) -> sa.ColumnElement[bool]:
    no_jobs = ~sa.exists().where(Job.task_id == Task.id)
    return sa.and_(Task.state.in_(TASK_FINAL_STATES),
                   sa.func.coalesce(Task.finished_at, Task.created_at)
                   < sa.literal(cutoff, UTCDateTime()),
                   no_jobs)


def _old_notifications(cutoff: datetime) -> sa.ColumnElement[bool]:
    return sa.and_(Notification.state.in_(("sent", "failed")),
                   Notification.created_at < sa.literal(cutoff, UTCDateTime()))


def _count(engine: Engine, model: type, where: sa.ColumnElement[bool]) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(model).where(where)).scalar_one()


@dataclass
class _Batches:
    """What the deleting transactions of one prune added up to."""

    count: int = 0
    longest_s: float = 0.0

    def delete(self, engine: Engine, model: type, where: sa.ColumnElement[bool], batch: int,
               order: sa.Column[Any] | None = None) -> int:
        """Delete the rows ``where`` selects, ``batch`` per transaction; with ``order`` (an
        indexed column), oldest first, each batch's scan starting at the last one's end."""
        key = model.__table__.c.id
        total, low = 0, None
        while True:
            select = sa.select(key).where(where).limit(batch)
            if order is not None:
                select = select.order_by(order)
                if low is not None:
                    select = select.where(order >= low)
            stmt = sa.delete(model).where(key.in_(select.scalar_subquery()))
            start = time.perf_counter()
            with engine.begin() as conn:
                if order is None:
                    n = max(conn.execute(stmt).rowcount, 0)
                else:
                    ends = conn.execute(stmt.returning(order)).scalars().all()
                    n, low = len(ends), max(ends, default=low)
            if n:
                self.count += 1
                self.longest_s = max(self.longest_s, time.perf_counter() - start)
            total += n
            if n < batch:
                return total


def prune(engine: Engine, older_than: timedelta, *, dry_run: bool = False,
          batch: int = DEFAULT_BATCH, now: datetime | None = None) -> PruneResult:
    """Delete (or with ``dry_run`` count) what finished before ``now - older_than``."""
    if older_than <= timedelta(0):
        raise ValueError("older_than must be positive")
    cutoff = (now or utcnow()) - older_than
    if dry_run:
        jobs = _count(engine, Job, _old_jobs(cutoff))
        events = _count(engine, Event, _old_events(cutoff))
        # Tasks that would have no jobs left once the old ones are gone.
        remaining = sa.exists().where(Job.task_id == Task.id, sa.not_(_old_jobs(cutoff)))
        tasks = _count(engine, Task, sa.and_(
            Task.state.in_(TASK_FINAL_STATES),
            sa.func.coalesce(Task.finished_at, Task.created_at) < sa.literal(cutoff, UTCDateTime()),
            ~remaining))
        notices = _count(engine, Notification, _old_notifications(cutoff))
        return PruneResult(cutoff, jobs, events, tasks, True, notices)
    done = _Batches()
    jobs = done.delete(engine, Job, _old_jobs(cutoff), batch, Job.finished_at)
    events = done.delete(engine, Event, _old_events(cutoff), batch, Event.ts)
    tasks = done.delete(engine, Task, _old_tasks(cutoff), batch)
    notices = done.delete(engine, Notification, _old_notifications(cutoff), batch)
    return PruneResult(cutoff, jobs, events, tasks, False, notices, done.count, done.longest_s)


__all__ = ["PruneResult", "prune", "DEFAULT_BATCH"]
