"""Recording at once what an operator command wrote to the stream, and SQL for the operator
events the recorder's fold (``scheduler/record/fold.py``) leaves alone: ``retry-failed`` and
``reprioritize``.

:func:`record_now` (used by ``scheduler.submission.control`` and ``scheduler.submission.reconcile``) reads the
entries of the given tasks appended after a stream id and applies them in one transaction with
:func:`record_batch` (``apply_events``, then :func:`fold_operator_events`), so the command's
effect is in SQL when it returns, not when a recorder next runs; keyed by stream id, so the
recorders' later pass, which writes every batch through the same :func:`record_batch`, inserts
nothing twice and still applies an operator event whose command died before its SQL step. An event row and its effect on the ``jobs``/``tasks`` rows are
committed together (this module is the one writer of the two folds below). Both folds are
idempotent and independent of the order events arrive in:

1. ``retry-failed`` (the job ids in ``jobs``): those job rows become ``pending`` again
   (attempts 0, no error, not finished) unless a newer event already moved them
   (``last_event_pos``); the task becomes ``active`` again unless it is cancelled; its counters
   are recounted from its job rows.
2. ``reprioritize``: under a row lock on the task, its ``priority`` becomes the ``to`` of the
   task's latest ``reprioritize`` event in the events table (stream order), so overlapping
   reprioritizes end, in SQL, in the class the last script left in Redis, whichever command
   commits last.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

import redis
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.queue.keys import PRIORITY_CLASSES
from scheduler.queue.types import text
from scheduler.record.fold import BatchResult, StreamEvent, apply_events, sql_task_id
from scheduler.record.models import TASK_FINAL_STATES, Event, Job, Task

__all__ = ["OPERATOR_KINDS", "fold_operator_events", "fold_priority", "record_batch", "record_now",
           "stream_tail"]

UPDATE_CHUNK = 500  # job ids per UPDATE ... WHERE id IN (...)
READ_CHUNK = 1_000  # stream entries per XRANGE while recording


def stream_tail(client: redis.Redis, stream: str) -> str:
    """The id of the stream's last entry ("0-0" if empty): take it before the command."""
    last = client.xrevrange(stream, count=1)
    return text(last[0][0]) if last else "0-0"


def record_now(client: redis.Redis, engine: Engine, stream: str, since: str,
               task_ids: Collection[str]) -> list[StreamEvent]:
    """Apply the entries of ``task_ids`` appended to ``stream`` after ``since`` to SQL now,
    in one transaction (``apply_events`` + :func:`fold_operator_events`); returns them."""
    mine: list[StreamEvent] = []
    wanted = set(task_ids)
    start = "(" + since
    while wanted:
        batch = client.xrange(stream, min=start, count=READ_CHUNK)
        for entry_id, fields in batch:
            f = {text(k): text(v) for k, v in fields.items()}
            if f.get("task") in wanted:
                mine.append(StreamEvent(text(entry_id), f))
        if len(batch) < READ_CHUNK:
            break
        start = "(" + text(batch[-1][0])
    if mine:
        with engine.begin() as conn:
            record_batch(conn, mine)
    return mine


OPERATOR_KINDS = frozenset({"retry-failed", "reprioritize"})
"""The event kinds :func:`fold_operator_events` applies (``apply_events`` leaves them alone)."""


def record_batch(conn: sa.Connection, events: list[StreamEvent]) -> BatchResult:
    """Everything stream entries change in SQL, in the open transaction on ``conn``:
    ``apply_events``, then :func:`fold_operator_events` for the operator events among them.
    The one entry point of every writer of the stream into SQL (the recorder, ``record_now``)."""
    result = apply_events(conn, events)
    operator = [e for e in events if e.fields.get("kind") in OPERATOR_KINDS]
    if operator:
        fold_operator_events(conn, operator)
    return result


def fold_operator_events(conn: sa.Connection, events: Iterable[StreamEvent]) -> None:
    """Apply the ``retry-failed`` and ``reprioritize`` events among ``events`` to the job and
    task rows, in the open transaction on ``conn`` (see the module docstring)."""
    retried: dict[int, list[StreamEvent]] = {}
    reprioritized: set[int] = set()
    for ev in sorted(events, key=lambda e: e.pos):
        task_id = sql_task_id(ev.fields.get("task"))
        if task_id is None:
            continue
        kind = ev.fields.get("kind")
        if kind == "retry-failed" and ev.fields.get("jobs"):
            retried.setdefault(task_id, []).append(ev)
        elif kind == "reprioritize":
            reprioritized.add(task_id)
    for task_id, evs in sorted(retried.items()):
        _fold_retry(conn, task_id, evs)
    for task_id in sorted(reprioritized):
        fold_priority(conn, task_id)


def _fold_retry(conn: sa.Connection, task_id: int, evs: list[StreamEvent]) -> None:
    t, j = Task.__table__, Job.__table__
    for ev in evs:
        jobs = ev.fields["jobs"].split()
        for start in range(0, len(jobs), UPDATE_CHUNK):
            conn.execute(sa.update(j).where(
                j.c.id.in_(jobs[start:start + UPDATE_CHUNK]),
                sa.or_(j.c.last_event_pos.is_(None), j.c.last_event_pos < ev.pos))
                .values(state="pending", error=None, finished_at=None, attempts=0,
                        last_event_pos=ev.pos))
    last = evs[-1].pos
    counts = dict(conn.execute(sa.select(j.c.state, sa.func.count()).where(
        j.c.task_id == task_id).group_by(j.c.state)).all())
    conn.execute(sa.update(t).where(t.c.id == task_id).values(
        failed=counts.get("failed", 0), succeeded=counts.get("succeeded", 0),
        cancelled=counts.get("cancelled", 0), lost=counts.get("lost", 0)))
    conn.execute(sa.update(t).where(
        t.c.id == task_id, t.c.state.in_((*TASK_FINAL_STATES, "active")),
        t.c.state != "cancelled",
        sa.or_(t.c.last_event_pos.is_(None), t.c.last_event_pos < last))
        .values(state="active", finished_at=None, last_event_pos=last))


def fold_priority(conn: sa.Connection, task_id: int) -> None:
    """Set the task's ``priority`` to the ``to`` of its latest recorded ``reprioritize``
    event (unchanged if it has none)."""
    t = Task.__table__
    # The row lock first: a concurrent fold of the same task waits, then sees this one's event.
    if conn.execute(sa.select(t.c.id).where(t.c.id == task_id).with_for_update()).first() is None:
        return
    latest: tuple[int, str] | None = None
    rows = conn.execute(sa.select(Event.id, Event.data).where(
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
        conn.execute(sa.update(t).where(t.c.id == task_id).values(priority=latest[1]))
