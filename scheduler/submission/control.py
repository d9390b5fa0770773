"""Operator control of a submitted task: pause, resume, cancel, retry-failed, reprioritize.

What it owns, for every verb:

1. checking the task exists (SQL first: the system of record; ``NotFoundError``, exit code 4);
2. the queue transition in Redis (``Queue.pause``/``resume``/``cancel_task``/
   ``retry_failed``, ``Queue.reprioritize`` where the fair-share part provides it): the
   script appends the event with the operator's name in the same atomic step (and, when
   ``operator`` is the acting ``Principal``, its ``principal``: how it was authenticated);
3. recording at once in SQL what the transition did: ``scheduler.record.now.record_now``
   applies the new stream entries of this task as the recorders do (one ``Stream`` change of
   ``scheduler.record.state``, the one writer of task and job rows, keyed by stream id, so when
   a recorder meets them later it inserts nothing twice), so ``tasks show`` is right the moment
   the command returns, with the operator on the event.

A verb the task's state refuses is a ``ValidationError`` (exit code 2, nothing changed): a
task that has ended and left Redis, a state the queue script refuses (``TaskNotActiveError``:
resume of a cancelled task), and cancel of an aborted task, since the abort already
cancelled its pending jobs, and Redis keeps ``aborted`` (``retry-failed`` is the way back), so
SQL must not say ``cancelled``.

A task still ``accepted`` in SQL and absent from Redis (its fan-out never happened) can only be
cancelled; that is recorded in SQL alone (``CancelUnqueued`` and a ``cancel`` event) so
reconcile leaves it alone.
Pause keeps the pending jobs' order (they wait in ``{P}:held:<task>`` at their due time), resume
puts them back, cancel stops pending jobs and lets running ones finish.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.errors import FleetschedError, NotFoundError, ValidationError
from scheduler.principal import Principal
from scheduler.queue.client import Queue
from scheduler.queue.keys import PRIORITY_CLASSES
from scheduler.queue.livestream import end_task_stream
from scheduler.record.audit import record_event
from scheduler.record.models import Task
from scheduler.record.now import record_now, stream_tail
from scheduler.record.state import CancelUnqueued, KeepAborted, Reprioritized, apply
from scheduler.record.types import utcnow

__all__ = ["ControlResult", "cancel", "pause", "reprioritize", "resume", "retry_failed"]


@dataclass(frozen=True)
class ControlResult:
    task_id: int
    verb: str
    count: int  # jobs held back, released, cancelled, re-enqueued or moved
    state: str  # the task's state in Redis afterwards (or SQL, for a task never queued)


def _sql_task(engine: Engine, task_id: int) -> Any:
    with engine.connect() as conn:
        row = conn.execute(sa.select(Task.id, Task.state, Task.priority)
                           .where(Task.id == task_id)).first()
    if row is None:
        raise NotFoundError(f"no task {task_id}", hint="see `fleetsched tasks list`")
    return row


def _run(engine: Engine, queue: Queue, task_id: int, verb: str,
         call: Callable[[], int]) -> ControlResult:
    row = _sql_task(engine, task_id)
    live = queue.task_state(str(task_id))
    if not live:
        if row.state == "accepted":
            raise ValidationError(f"task {task_id} is not queued yet (state accepted)",
                                  hint="run `fleetsched reconcile` to finish its fan-out, or "
                                       "cancel it")
        raise ValidationError(f"task {task_id} is {row.state}: nothing to {verb}",
                              hint="a finished task's jobs are done; submit it again to rerun it")
    since = stream_tail(queue.client, queue.keys.events)
    count = call()
    record_now(queue.client, engine, queue.keys.events, since, [str(task_id)])
    return ControlResult(task_id, verb, count, queue.task_state(str(task_id)).get("state", "?"))


def pause(engine: Engine, queue: Queue, task_id: int,
          operator: Principal | str) -> ControlResult:
    """Hold the task's pending jobs (in order) until resume; running jobs finish."""
    def call() -> int:
        queue.pause(str(task_id), operator)
        return 0
    return _run(engine, queue, task_id, "pause", call)


def resume(engine: Engine, queue: Queue, task_id: int,
           operator: Principal | str) -> ControlResult:
    """Release a paused task's held jobs at their due times, in their order."""
    return _run(engine, queue, task_id, "resume", lambda: queue.resume(str(task_id), operator))


def cancel(engine: Engine, queue: Queue, task_id: int,
           operator: Principal | str) -> ControlResult:
    """Cancel pending, parked and held jobs; running jobs finish. A task that never reached
    Redis (still ``accepted``) is cancelled in SQL alone."""
    row = _sql_task(engine, task_id)
    live = queue.task_state(str(task_id))
    if row.state == "accepted" and not live:
        return _cancel_unqueued(engine, task_id, operator)
    if live.get("state") == "aborted":
        raise _already_aborted(task_id)
    result = _run(engine, queue, task_id, "cancel",
                  lambda: queue.cancel_task(str(task_id), operator))
    if result.state == "aborted":
        # A failure aborted it between the check and the script: Redis keeps "aborted" (the
        # script cancels jobs only), so SQL does too, whatever the cancel events said.
        with engine.begin() as conn:
            apply(conn, KeepAborted(task_id))
        raise _already_aborted(task_id)
    end_task_stream(queue, str(task_id))  # a task it ended (none running): no node's finisher will
    return result


def _already_aborted(task_id: int) -> ValidationError:
    return ValidationError(f"task {task_id} is already aborted",
                           hint="its pending jobs were cancelled when it aborted; "
                                f"`fleetsched tasks retry-failed {task_id}` runs the failed "
                                "ones again")


def _cancel_unqueued(engine: Engine, task_id: int,
                     operator: Principal | str) -> ControlResult:
    now = utcnow()
    with engine.begin() as conn:
        count = apply(conn, CancelUnqueued(task_id, now))
        if count is None:  # rolls the job rows back too
            raise ValidationError(f"task {task_id} changed meanwhile; look again",
                                  hint=f"fleetsched tasks show {task_id}")
        record_event(conn, "cancel", operator=operator, task_id=task_id, at=now,
                     data={"count": count, "not_queued": True})
    return ControlResult(task_id, "cancel", count, "cancelled")


def retry_failed(engine: Engine, queue: Queue, task_id: int,
                 operator: Principal | str) -> ControlResult:
    """Queue the task's failed jobs again, each with a new attempt budget (see
    ``scheduler/queue/lua/retry_failed.lua``); an aborted task becomes active again."""
    moved: list[tuple[str, list[str]]] = []

    def call() -> int:
        moved.extend(queue.retry_failed(str(task_id), operator))
        return sum(len(jobs) for _, jobs in moved)

    return _run(engine, queue, task_id, "retry-failed", call)


def reprioritize(engine: Engine, queue: Queue, task_id: int, priority: str,
                 operator: Principal | str) -> ControlResult:
    """Move the task's pending jobs to another priority class (``Queue.reprioritize``)."""
    if priority not in PRIORITY_CLASSES:
        raise ValidationError(f"priority {priority!r} is not one of {', '.join(PRIORITY_CLASSES)}")
    move = getattr(queue, "reprioritize", None)
    if move is None:
        raise FleetschedError("reprioritize is not available in this build yet",
                              hint="cancel the task and submit it again with --priority")
    # SQL tasks.priority follows the task's latest reprioritize event, folded in the
    # transaction that records it (record_now): one writer, and overlapping calls end where
    # Redis ends. Folded again when this call wrote no event (same class), which heals a row an
    # interrupted earlier call left behind once the recorder has its event.
    result = _run(engine, queue, task_id, "reprioritize",
                  lambda: int(move(str(task_id), priority, operator) or 0))
    with engine.begin() as conn:
        apply(conn, Reprioritized(task_id))
    return result
