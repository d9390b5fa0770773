"""Firing a claimed schedule entry: each occurrence's task exactly once, then the entry moves on.

``fire_claimed(engine, client, keys, claimed, now_ms, worker=...)``, called by the worker that
claimed ``sched:<name>`` (``Claim.schedules``), in this order:

1. read the schedule row (gone or paused: the entry is dropped; ``resume`` records what a pause
   held back);
2. ``scheduler.calendar.catchup.catch_up`` over the occurrences from the entry's one up to the Redis
   clock: the ones to run, the ones ``missed`` (late, per the catch-up policy), the next one;
   occurrences that already have a task in SQL (a previous claim that died after creating it)
   count as run whatever the policy says now;
3. per occurrence to run: with ``overlap=skip``, a previous task of the schedule still running
   (Redis counters) makes it ``missed``; else its task is created through the submission path
   (``plan_task`` + ``record_task`` + ``schedule_id``/``occurrence`` in one transaction: the
   unique (schedule, occurrence) makes a duplicate claim create nothing) and fanned out with
   ``scheduler.submission.fanout.fan_out`` (a schedule of a template: the template's version
   of now, ``schedules.store.schedule_request``); a task recorded by an earlier claim is
   completed (its missing jobs enqueued, never those already queued, which may have run and
   finished meanwhile);
   an occurrence whose task cannot be planned (its target now empty ...) is ``missed`` with
   the reason;
4. ``scheduler.queue.schedules.fire``: token-checked, the ``fire`` and ``missed`` events and the
   move to the next occurrence in one atomic step. A stale token writes nothing: the worker
   that holds the entry now records the outcome (the tasks are in SQL already).

``keys``: one shard's ``Keys``, or the queue's ``Shards``: the entry lives in shard 0, each
occurrence's task in the shard of its id (``scheduler.queue.route``).

Redis or SQL failing midway raises: the entry's lease runs out and a worker fires it again.
A firer that stalls past its lease (a GC pause, SIGSTOP, slow SQL) and resumes finds the entry
claimed by another worker and stops; if it resumes inside a fan-out, enqueue skips every job the
task queued once (its index is below the task's span), so jobs that ran meanwhile never run again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import redis
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.calendar.catchup import catch_up
from scheduler.errors import Code, FleetschedError
from scheduler.queue.route import Where, coord, task_keys
from scheduler.queue.schedules import fire
from scheduler.queue.types import ClaimedSchedule
from scheduler.record.engine import session_factory
from scheduler.record.models import TASK_FINAL_STATES, Job, Schedule, Task
from scheduler.record.types import due_ms, from_ms, to_ms
from scheduler.schedules.store import MISSED_LIMIT, as_cron, grace, schedule_request, timing_of

if TYPE_CHECKING:
    from scheduler.submission.submit import Plan

log = logging.getLogger(__name__)

__all__ = ["FireResult", "fire_claimed"]


@dataclass
class FireResult:
    """What one firing did (for logs and tests)."""

    name: str
    code: Code = Code.OK
    tasks: list[int] = field(default_factory=list)  # created or completed, by occurrence
    missed: int = 0
    next_at: datetime | None = None


def _existing(engine: Engine, schedule_id: int, start: datetime,
              end: datetime) -> dict[datetime, int]:
    t = Task.__table__
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.c.occurrence, t.c.id).where(
            t.c.schedule_id == schedule_id, t.c.occurrence >= start, t.c.occurrence <= end))
        return {occ: tid for occ, tid in rows}


def _still_running(engine: Engine, client: redis.Redis, keys: Where, schedule_id: int,
                   at: datetime) -> int | None:
    """The previous task of the schedule if it has not finished (by the Redis counters)."""
    t = Task.__table__
    with engine.connect() as conn:
        prev = conn.execute(sa.select(t.c.id, t.c.state).where(
            t.c.schedule_id == schedule_id, t.c.occurrence < at)
            .order_by(t.c.occurrence.desc()).limit(1)).first()
    if prev is None or prev.state in TASK_FINAL_STATES:
        return None
    h = client.hgetall(task_keys(keys, prev.id).task(str(prev.id)))
    if not h:
        return None

    def n(k: str) -> int:
        return int(h.get(k) or 0)
    if h.get("state") in ("cancelled", "aborted") and n("running") == 0:
        return None
    return None if n("succeeded") + n("failed") + n("cancelled") >= n("total") else int(prev.id)


def _create(engine: Engine, row: Any, at: datetime, now: datetime) -> tuple[int, Any]:
    """(task id, plan) of the occurrence: a new task, or (id, None) if one exists already."""
    from scheduler.record.state import Scheduled, apply
    from scheduler.submission.submit import plan_task, record_task
    from scheduler.templates.store import check_plan

    t = Task.__table__
    sessions = session_factory(engine)
    with sessions() as session:
        try:
            with session.begin():
                found = session.execute(sa.select(t.c.id).where(
                    t.c.schedule_id == row.id, t.c.occurrence == at)).scalar()
                if found is not None:
                    return int(found), None
                request = schedule_request(session, row)
                plan = plan_task(session, request,
                                 operator=row.created_by or f"schedule:{row.name}", now=now)
                check_plan(session, request, plan)
                task_id = record_task(session, plan, now=now)
                apply(session, Scheduled(task_id, row.id, at))
                s = Schedule.__table__
                session.execute(sa.update(s).where(
                    s.c.id == row.id, sa.or_(s.c.last_occurrence.is_(None),
                                             s.c.last_occurrence < at))
                    .values(last_occurrence=at))
            return task_id, plan
        except sa.exc.IntegrityError:
            pass  # another claim recorded this occurrence first: complete that one
    with engine.connect() as conn:
        return int(conn.execute(sa.select(t.c.id).where(
            t.c.schedule_id == row.id, t.c.occurrence == at)).scalar_one()), None


def _complete(engine: Engine, client: redis.Redis, keys: Where, task_id: int) -> None:
    """Finish the fan-out of a task an earlier claim recorded: enqueue only the jobs Redis
    never took (enqueue is atomic per chunk, in job order: the first ``total`` are queued)."""
    from scheduler.queue.client import JobSpec
    from scheduler.record.session import transaction
    from scheduler.submission.fanout import fan_out, host_conns, mark_queued, recorded_spec
    from scheduler.submission.reconcile import task_spec

    with engine.connect() as conn:
        task = conn.execute(sa.select(Task).where(Task.id == task_id)).first()
        jobs = conn.execute(sa.select(Job.id, Job.host, Job.due_at, Job.window)
                            .where(Job.task_id == task_id).order_by(Job.seq)).all()
        spec = task_spec(task, recorded_spec(conn, task_id))
        hosts = host_conns(conn, [j.host for j in jobs])
    keys = task_keys(keys, task_id)
    queued = int(client.hget(keys.task(str(task_id)), "total") or 0)
    rest = [JobSpec(j.id, j.host, due_ms=due_ms(j.due_at) if j.due_at else 0,
                    window=j.window or None) for j in jobs[queued:]]
    if rest or not client.exists(keys.task(str(task_id))):
        fan_out(client, keys, spec, hosts, rest)
    with transaction(engine) as session:
        mark_queued(session, task_id)


def _queue(engine: Engine, client: redis.Redis, keys: Where, task_id: int,
           plan: Plan | None) -> None:
    from scheduler.record.session import transaction
    from scheduler.submission.fanout import fan_out, mark_queued

    if plan is None:
        _complete(engine, client, keys, task_id)
        return
    fan_out(client, task_keys(keys, task_id), plan.task_spec(task_id), plan.hosts, plan.job_specs(task_id))
    with transaction(engine) as session:
        mark_queued(session, task_id)


def _missed(name: str, at: datetime, why: str) -> dict[str, Any]:
    return {"kind": "missed", "schedule": name, "occurrence": to_ms(at), "error": why}


def fire_claimed(engine: Engine, client: redis.Redis, keys: Where, claimed: ClaimedSchedule,
                 now_ms: int, *, worker: str) -> FireResult:
    """Fire one claimed entry (see the module docstring); raises on Redis or SQL failure."""
    name, occurrence = claimed.name, from_ms(claimed.occurrence_ms)
    result = FireResult(name)
    held = client.hmget(coord(keys).schedule(name), "token", "owner", "state")
    if held != [str(claimed.token), worker, "firing"]:
        # Claimed again since (this firer stalled past its lease): the holder fires it. Every
        # write below is safe anyway (the unique occurrence in SQL, enqueue skipping jobs once
        # queued, fire.lua's token check); this only saves work done for nothing.
        log.warning("schedule %s: the entry is no longer this claim's; its holder fires it", name)
        result.code = Code.STALE_TOKEN
        return result
    with engine.connect() as conn:
        row = conn.execute(sa.select(Schedule.__table__).where(Schedule.name == name)).first()

    def move(next_at: datetime | None, events: list[dict[str, Any]]) -> FireResult:
        result.next_at = next_at
        result.code = fire(client, keys, name, worker=worker, token=claimed.token,
                           occurrence_ms=claimed.occurrence_ms,
                           next_ms=None if next_at is None else to_ms(next_at), events=events)
        return result

    if row is None or row.paused:
        return move(None, [])
    now = from_ms(now_ms)
    t = timing_of(row.cron, row.tz)
    window = timedelta(seconds=row.catchup_window_s) if row.catchup_window_s else None
    cu = catch_up(as_cron(t), occurrence - timedelta(microseconds=1), max(now, occurrence),
                  row.catchup, window=window, grace=grace(t), limit=MISSED_LIMIT)
    have = _existing(engine, row.id, occurrence, max(now, occurrence))
    events: list[dict[str, Any]] = []
    why_late = f"late ({row.catchup} catch-up policy)"
    for at in sorted(set(cu.run) | set(cu.missed) | set(have)):
        if at not in have and at not in cu.run:
            events.append(_missed(name, at, why_late))
            continue
        if at not in have and row.overlap == "skip":
            busy = _still_running(engine, client, keys, row.id, at)
            if busy is not None:
                events.append(_missed(name, at, f"overlap: task {busy} of the previous "
                                                "occurrence is still running"))
                continue
        try:
            task_id, plan = (have[at], None) if at in have else _create(engine, row, at, now)
        except FleetschedError as exc:
            events.append(_missed(name, at, f"not submitted: {str(exc).splitlines()[0]}"))
            continue
        _queue(engine, client, keys, task_id, plan)
        result.tasks.append(task_id)
        events.append({"kind": "fire", "schedule": name, "occurrence": to_ms(at),
                       "task": task_id})
    if cu.unlisted:
        events.append({"kind": "missed", "schedule": name, "error": why_late,
                       "detail": f'{{"unlisted_from": {to_ms(cu.unlisted[0])}, '
                                 f'"unlisted_to": {to_ms(cu.unlisted[1])}}}'})
    result.missed = sum(1 for e in events if e["kind"] == "missed")
    move(cu.next_fire, events)
    if result.code is Code.STALE_TOKEN:
        log.warning("schedule %s: the entry was claimed again while firing; its holder "
                    "records this occurrence", name)
    return result
