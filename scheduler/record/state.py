"""The record's state machine: the one writer of task and job rows.

Every change to a ``tasks`` or ``jobs`` row is one of the changes below, applied by
:func:`apply` in the caller's open transaction, whoever asks: the recorders and ``record_now``
(a batch of stream entries, which ``scheduler.record.fold`` folds into patches), a submit, a
schedule's firing, an operator's verb. As Nomad's ``fsm.go`` applies every change through one
switch, the lock order and the invariants of these rows live here and nowhere else
(tests/record/test_one_writer.py fails when another module writes them; retention,
``scheduler.record.prune``, deletes old ended rows on its own: see that test's allow-list).

Lock order, on PostgreSQL (SQLite's one write lock lets nothing wait in a cycle there): a
change locks the existing rows it writes before it writes any, **job rows before task rows,
each in id order** (``SELECT ... ORDER BY id FOR UPDATE``, :func:`_lock`). An UPDATE alone
locks in scan order, and two writers locking the same rows in two orders deadlock: the nemesis
found it between the fold and ``Queued`` taking the tables in opposite orders, and
benchmarks/fleet_day.py between two orders of the same job rows. A task's counters are
recounted from its job rows under the task's lock, after the job rows are written, so a
recorder never commits counts counted before another's commit (the counters race the soak
found). A new row (``Submit``) is no one else's until the commit: nothing to order.

The changes (:func:`apply` returns what each says):

1. :class:`Stream`: a batch of stream entries: the event rows, one guarded patch per job and
   task row, the counters and finished state of every task touched, then the operator events'
   ``retry-failed`` and ``reprioritize`` (see ``scheduler.record.fold``); a ``BatchResult``;
2. :class:`Submit`: a new task (``accepted``) and one ``accepted`` job row per host, each with
   its host's ``tenant``; its id;
3. :class:`Waves`: a new task's rollout in waves (the spec, wave 1 and its state);
4. :class:`Queued`: Redis holds every job of the task: ``accepted`` becomes ``active`` (its
   ``accepted`` jobs ``pending``); False if the task had moved on;
5. :class:`CancelUnqueued`: a task never fanned out (``accepted``) is cancelled with its jobs;
   the jobs cancelled, or None (nothing written) if the task had moved on;
6. :class:`KeepAborted`: a cancel that met an abort leaves the task ``aborted``, as Redis does;
7. :class:`Reprioritized`: the task's priority follows its latest ``reprioritize`` event;
8. :class:`Scheduled` / :class:`Unscheduled`: a task is a schedule's occurrence / its schedule
   is removed.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.queue.keys import PRIORITY_CLASSES
from scheduler.record import bulk
from scheduler.record.fold import BatchResult, StreamEvent, fold_batch, operator_events
from scheduler.record.models import JOB_FINAL_STATES, TASK_FINAL_STATES, Event, Host, Job, Task

__all__ = ["CancelUnqueued", "Change", "KeepAborted", "Queued", "Reprioritized", "Scheduled",
           "Stream", "Submit", "Unscheduled", "Waves", "apply"]

R = TypeVar("R")
Patches = dict[Any, tuple[int, dict[str, Any]]]
UPDATE_CHUNK = 500  # job ids per UPDATE ... WHERE id IN (...)
_LIVE_TASK_STATES = ("accepted", "active", "paused")
_COUNTERS = ("running", "succeeded", "failed", "lost", "cancelled")
_T, _J = Task.__table__, Job.__table__


class Change(Generic[R]):
    """A change of the record; ``R`` is what :func:`apply` returns for it."""


@dataclass(frozen=True)
class Stream(Change[BatchResult]):
    events: Sequence[StreamEvent]


class NewJob(Protocol):
    """What ``Submit`` reads of a planned job (``scheduler.submission.submit.PlannedJob``)."""

    @property
    def seq(self) -> int: ...
    @property
    def host(self) -> str: ...
    @property
    def due(self) -> datetime | None: ...  # None: at ``Submit.at``
    @property
    def window(self) -> str | None: ...


@dataclass(frozen=True)
class Submit(Change[int]):
    task: Mapping[str, Any]  # the task's columns but state, created_at and total
    jobs: Sequence[NewJob]  # job "<task id>.<seq>" per planned job
    at: datetime


@dataclass(frozen=True)
class Waves(Change[None]):
    task_id: int
    spec: Mapping[str, Any]  # the wave policy, with count and counts
    state: str  # wave 1's: running, or done when one wave holds every job


@dataclass(frozen=True)
class Queued(Change[bool]):
    task_id: int


@dataclass(frozen=True)
class CancelUnqueued(Change["int | None"]):
    task_id: int
    at: datetime


@dataclass(frozen=True)
class KeepAborted(Change[None]):
    task_id: int


@dataclass(frozen=True)
class Reprioritized(Change[None]):
    task_id: int


@dataclass(frozen=True)
class Scheduled(Change[None]):
    task_id: int
    schedule_id: int
    occurrence: datetime


@dataclass(frozen=True)
class Unscheduled(Change[None]):
    schedule_id: int


def apply(db: Session | sa.Connection, change: Change[R]) -> R:
    """Apply ``change`` to the task and job rows in ``db``'s open transaction."""
    result: Any = None
    match change:
        case Stream(events=events):
            result = _stream(db.connection() if isinstance(db, Session) else db, events)
        case Submit():
            result = _submit(db, change)
        case Waves(task_id=task_id, spec=spec, state=state):
            db.execute(sa.update(_T).where(_T.c.id == task_id).values(
                waves=dict(spec), wave=1, wave_state=state))
        case Queued(task_id=task_id):
            result = _queued(db, task_id)
        case CancelUnqueued(task_id=task_id, at=at):
            result = _cancel_unqueued(db, task_id, at)
        case KeepAborted(task_id=task_id):
            db.execute(sa.update(_T).where(_T.c.id == task_id, _T.c.state == "cancelled")
                       .values(state="aborted"))
        case Reprioritized(task_id=task_id):
            _priority(db, task_id)
        case Scheduled(task_id=task_id, schedule_id=schedule_id, occurrence=occurrence):
            db.execute(sa.update(_T).where(_T.c.id == task_id)
                       .values(schedule_id=schedule_id, occurrence=occurrence))
        case Unscheduled(schedule_id=schedule_id):
            # A firing may link another task meanwhile: only the rows locked are written (the
            # schedule row's ON DELETE SET NULL unlinks a later one).
            linked = db.execute(sa.select(_T.c.id).where(_T.c.schedule_id == schedule_id)
                                .order_by(_T.c.id).with_for_update()).scalars().all()
            if linked:
                db.execute(sa.update(_T).where(_T.c.id.in_(linked)).values(schedule_id=None))
        case _:
            raise TypeError(f"not a change of the record: {change!r}")
    return result


# ------------------------------------------------------------------------------- locks


def _pg(db: Session | sa.Connection) -> bool:
    bind = db.get_bind() if isinstance(db, Session) else db
    return bind.dialect.name != "sqlite"


def _lock(db: Session | sa.Connection, table: sa.Table, where: Any) -> None:
    """PostgreSQL: lock ``table``'s rows that match ``where``, in id order. ``where`` names a
    set no other writer can add a row to meanwhile (every job of a task: only ``Submit``
    inserts them), never a state: a row that entered it between this lock and the write would
    be locked then, out of order (a job a recorder made ``pending`` meanwhile deadlocked a
    cancel with the next batch)."""
    if _pg(db):
        db.execute(sa.select(table.c.id).where(where).order_by(table.c.id).with_for_update())


def _lock_ids(conn: sa.Connection, job_ids: Iterable[str], task_ids: Iterable[int]) -> None:
    """PostgreSQL: lock the rows a batch writes, jobs then tasks, each in id order."""
    if conn.dialect.name == "sqlite":
        return
    for table, ids in (("jobs", sorted(set(job_ids))), ("tasks", sorted(set(task_ids)))):
        if ids:
            conn.exec_driver_sql(f"SELECT 1 FROM {table} WHERE id = ANY(%s) "
                                 "ORDER BY id FOR UPDATE", (ids,))


# ------------------------------------------------------------------------------ stream


def _stream(conn: sa.Connection, events: Sequence[StreamEvent]) -> BatchResult:
    result = BatchResult(events=len(events))
    if not events:
        return result
    writer = bulk.writer(conn)
    folded = fold_batch(events, writer.ts)
    retried, reprioritized = operator_events(events)
    retried_jobs = (i for evs in retried.values() for ev in evs for i in ev.fields["jobs"].split())
    _lock_ids(conn, [*folded.jobs, *retried_jobs],
              [*folded.task_ids, *retried, *reprioritized])
    result.inserted = writer.insert_events(folded.rows)
    result.jobs_updated = _update_rows(writer, _J, folded.jobs)
    _update_rows(writer, _T, folded.tasks)
    result.task_ids = folded.task_ids
    result.tasks_updated = _refresh_tasks(writer, sorted(folded.task_ids), folded.started)
    for task_id, evs in sorted(retried.items()):
        _retry(conn, task_id, evs)
    for task_id in sorted(reprioritized):
        _priority(conn, task_id)
    return result


def _update_rows(writer: bulk.Writer, table: sa.Table, patches: Patches) -> int:
    """Guarded updates, one ``executemany`` per column set; returns rows moved: a row moves
    only if its ``last_event_pos`` is older than the patch's position, so replays and late
    batches never move a row backwards."""
    updated = 0
    for cols, params in _by_columns(patches).items():
        sql = _update_sql(table.name, cols, writer.mark)
        updated += max(writer.conn.exec_driver_sql(
            sql, [(*values, pos, key, pos) for key, pos, values in params]).rowcount, 0)
    return updated


def _refresh_tasks(writer: bulk.Writer, task_ids: Sequence[int], started: dict[int, Any]) -> int:
    """Recompute counters and the finished state of ``task_ids`` from their job rows."""
    if not task_ids:
        return 0
    conn, ids = writer.conn, _int_list(task_ids)
    lock = " FOR UPDATE" if writer.pg else ""
    states = dict(conn.exec_driver_sql(
        f"SELECT id, state FROM tasks WHERE id IN ({ids}) ORDER BY id{lock}").all())
    if not states:
        return 0
    counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    last_finish: dict[int, Any] = {}
    for tid, state, n, fin in conn.exec_driver_sql(
            "SELECT task_id, state, count(*), max(finished_at) FROM jobs "
            f"WHERE task_id IN ({_int_list(states)}) GROUP BY task_id, state"):
        counts[tid][state] = n
        if fin is not None and (last_finish.get(tid) is None or fin > last_finish[tid]):
            last_finish[tid] = fin
    params = [_task_values(tid, state, counts[tid], last_finish.get(tid), started.get(tid))
              for tid, state in states.items() if tid in counts]  # else: no job rows
    if params:
        m = writer.mark
        conn.exec_driver_sql(
            f"UPDATE tasks SET total = {m}, running = {m}, succeeded = {m}, failed = {m}, "
            f"lost = {m}, cancelled = {m}, state = {m}, "
            f"finished_at = coalesce(finished_at, {m}), "
            f"started_at = coalesce(started_at, {m}) WHERE id = {m}", params)
    return len(params)


def _task_values(tid: int, state: str, c: dict[str, int], last_finish: Any,
                 started: Any) -> tuple[Any, ...]:
    """One task's UPDATE parameters: its counters, its state (finished once every job is),
    the finish time (only when finished) and the first start seen in this batch."""
    total = sum(c.values())
    finished = None
    if sum(c[s] for s in JOB_FINAL_STATES) == total:
        if state in _LIVE_TASK_STATES:
            state = "succeeded" if c["failed"] + c["lost"] == 0 else "failed"
        finished = last_finish
    return (total, *(c[k] for k in _COUNTERS), state, finished, started, tid)


def _int_list(ids: Iterable[int]) -> str:
    """Integer ids inlined into SQL (they are Python ints: nothing to quote or inject)."""
    return ", ".join(str(int(i)) for i in ids)


def _by_columns(patches: Patches) -> dict[tuple[str, ...], list[tuple[Any, int, tuple]]]:
    """Patches grouped by their columns (in the patch's own order: no sorting per row), each
    as ``(key, pos, values)``, keys in sorted order."""
    groups: dict[tuple[str, ...], list[tuple[Any, int, tuple]]] = defaultdict(list)
    for key in sorted(patches):
        pos, patch = patches[key]
        groups[tuple(patch)].append((key, pos, tuple(patch.values())))
    return groups


@functools.lru_cache(maxsize=512)
def _update_sql(table: str, cols: tuple[str, ...], m: str) -> str:
    sets = ", ".join(f'"{c}" = {m}' for c in cols)
    return (f"UPDATE {table} SET {sets}, last_event_pos = {m} WHERE id = {m} "
            f"AND (last_event_pos IS NULL OR last_event_pos < {m})")


def _retry(conn: sa.Connection, task_id: int, evs: list[StreamEvent]) -> None:
    """``retry-failed``: the listed job rows pending again, the task recounted and active."""
    for ev in evs:
        jobs = ev.fields["jobs"].split()
        for start in range(0, len(jobs), UPDATE_CHUNK):
            conn.execute(sa.update(_J).where(
                _J.c.id.in_(jobs[start:start + UPDATE_CHUNK]),
                sa.or_(_J.c.last_event_pos.is_(None), _J.c.last_event_pos < ev.pos))
                .values(state="pending", error=None, finished_at=None, attempts=0,
                        last_event_pos=ev.pos))
    last = evs[-1].pos
    # Recounted under the task's lock (held since _stream's _lock_ids): a concurrent recorder
    # recounting the same task commits first, and this count sees it.
    counts = dict(conn.execute(sa.select(_J.c.state, sa.func.count()).where(
        _J.c.task_id == task_id).group_by(_J.c.state)).all())
    conn.execute(sa.update(_T).where(_T.c.id == task_id).values(
        failed=counts.get("failed", 0), succeeded=counts.get("succeeded", 0),
        cancelled=counts.get("cancelled", 0), lost=counts.get("lost", 0)))
    conn.execute(sa.update(_T).where(
        _T.c.id == task_id, _T.c.state.in_((*TASK_FINAL_STATES, "active")),
        _T.c.state != "cancelled",
        sa.or_(_T.c.last_event_pos.is_(None), _T.c.last_event_pos < last))
        .values(state="active", finished_at=None, last_event_pos=last))


def _priority(db: Session | sa.Connection, task_id: int) -> None:
    """The task's ``priority`` becomes the ``to`` of its latest recorded ``reprioritize``
    event (unchanged if it has none)."""
    # The row lock first: a concurrent fold of the same task waits, then sees this one's event.
    if db.execute(sa.select(_T.c.id).where(_T.c.id == task_id).with_for_update()).first() is None:
        return
    latest: tuple[int, str] | None = None
    rows = db.execute(sa.select(Event.id, Event.data).where(
        Event.task_id == str(task_id), Event.kind == "reprioritize"))
    for event_id, data in rows:
        detail = (data or {}).get("detail") if isinstance(data, dict) else None
        to = detail.get("to") if isinstance(detail, dict) else None
        try:
            pos = StreamEvent(event_id, {}).pos
        except ValueError:  # not a stream id: not a queue event
            continue
        if to in PRIORITY_CLASSES and (latest is None or pos > latest[0]):
            latest = (pos, to)
    if latest is not None:
        db.execute(sa.update(_T).where(_T.c.id == task_id).values(priority=latest[1]))


# ------------------------------------------------------------------- operators' changes


def _submit(db: Session | sa.Connection, change: Submit) -> int:
    at = change.at
    task_id = db.execute(sa.insert(_T).values(
        **change.task, state="accepted", created_at=at, total=len(change.jobs),
    ).returning(_T.c.id)).scalar_one()
    rows = [{"id": f"{task_id}.{j.seq}", "task_id": task_id, "seq": j.seq, "host": j.host,
             "state": "accepted", "attempts": 0, "due_at": j.due or at, "window": j.window}
            for j in change.jobs]
    db.execute(sa.insert(_J), rows)
    # Each job names its host's customer as it is now (a later move of the host does not move
    # its jobs): one UPDATE of the jobs whose host has a tenant, none when no host has one.
    h = Host.__table__
    db.execute(sa.update(_J).where(
        _J.c.task_id == task_id,
        _J.c.host.in_(sa.select(h.c.name).where(h.c.tenant.is_not(None)))).values(
        tenant=sa.select(h.c.tenant).where(h.c.name == _J.c.host).scalar_subquery()))
    return int(task_id)


def _queued(db: Session | sa.Connection, task_id: int) -> bool:
    accepted = sa.and_(_J.c.task_id == task_id, _J.c.state == "accepted")
    _lock(db, _J, _J.c.task_id == task_id)
    db.execute(sa.update(_J).where(accepted).values(state="pending"))
    return bool(db.execute(sa.update(_T).where(_T.c.id == task_id, _T.c.state == "accepted")
                           .values(state="active")).rowcount)


def _cancel_unqueued(db: Session | sa.Connection, task_id: int, at: datetime) -> int | None:
    waiting = sa.and_(_J.c.task_id == task_id, _J.c.state.in_(("accepted", "pending")))
    _lock(db, _J, _J.c.task_id == task_id)
    count = db.execute(sa.update(_J).where(waiting)
                       .values(state="cancelled", finished_at=at)).rowcount
    done = db.execute(sa.update(_T).where(_T.c.id == task_id, _T.c.state == "accepted")
                      .values(state="cancelled", finished_at=at, cancelled=count)).rowcount
    return count if done else None
