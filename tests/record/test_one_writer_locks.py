"""The one writer's lock order holds under concurrency, on a real PostgreSQL (SQLite's one
write lock serializes writers; nothing to see there).

A change locks the rows it will write before it writes any, jobs before tasks, each in id
order (``scheduler.record.state``). A cancel of a task that never reached Redis locked the jobs
then ``accepted`` or ``pending``, and its UPDATE then also took a job that a recorder had made
``pending`` meanwhile: out of order, it deadlocked with the next recorder batch (found by an
adversarial review of the one-writer change). Here the cancel pauses between its lock and its
write while two recorder batches touch the same jobs; every writer must finish.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

import pytest
import sqlalchemy as sa

from scheduler.record import state
from scheduler.record.fold import StreamEvent
from scheduler.record.models import Job, Task

pytestmark = pytest.mark.postgres

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


@pytest.fixture
def pg(fresh_postgres_url: str) -> Iterator[sa.Engine]:
    from scheduler.record.engine import make_engine
    from scheduler.record.migrate import upgrade

    upgrade(fresh_postgres_url)
    engine = make_engine(fresh_postgres_url)
    yield engine
    engine.dispose()


def event(stream_id: str, kind: str, task: int, job: str) -> StreamEvent:
    return StreamEvent(stream_id, {"kind": kind, "task": str(task), "job": job,
                                   "ts": stream_id.split("-")[0]})


def test_a_cancel_before_the_fan_out_and_two_recorder_batches_never_deadlock(
        pg: sa.Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    # Given a task still accepted in SQL: job .0 running (its claim recorded), job .1 accepted
    with pg.begin() as conn:
        task = conn.execute(sa.insert(Task).values(
            action="command", operator="alice", params={}, target="all", created_at=T0,
            total=2, state="accepted").returning(Task.id)).scalar_one()
        conn.execute(sa.insert(Job), [
            {"id": f"{task}.0", "task_id": task, "seq": 0, "host": "h0", "state": "running"},
            {"id": f"{task}.1", "task_id": task, "seq": 1, "host": "h1", "state": "accepted"}])
    # ... and a cancel that pauses between taking its locks and writing
    locked, go_on = threading.Event(), threading.Event()
    real_lock = state._lock

    def pausing_lock(db: Any, table: sa.Table, where: Any) -> None:
        real_lock(db, table, where)
        if threading.current_thread().name == "cancel":
            locked.set()
            go_on.wait(10)

    monkeypatch.setattr(state, "_lock", pausing_lock)
    errors: dict[str, BaseException] = {}

    def writer(name: str, change: state.Change) -> threading.Thread:
        def run() -> None:
            try:
                with pg.begin() as conn:
                    state.apply(conn, change)
            except BaseException as exc:  # noqa: BLE001 - judged below
                errors[name] = exc

        thread = threading.Thread(name=name, target=run, daemon=True)
        thread.start()
        return thread

    cancel = writer("cancel", state.CancelUnqueued(task, T0))
    assert locked.wait(10)
    # When one recorder batch retries job .0 (running -> pending) ...
    retry = writer("retry", state.Stream([event("1700000000001-0", "retry", task, f"{task}.0")]))
    retry.join(1.0)
    # ... and the next claims both jobs, while the cancel is still paused
    claims = writer("claims", state.Stream([
        event("1700000000002-0", "claim", task, f"{task}.0"),
        event("1700000000002-1", "claim", task, f"{task}.1")]))
    claims.join(1.0)
    go_on.set()
    threads: list[Callable[[], None]] = [cancel.join, retry.join, claims.join]
    for join in threads:
        join(30)
    # Then every writer finished, none a deadlock's victim
    assert not any(t.is_alive() for t in (cancel, retry, claims))
    assert not errors, {name: str(exc).splitlines()[0] for name, exc in errors.items()}
    # And the record is one of the orders' outcomes: the cancel ended what was waiting
    with pg.connect() as conn:
        task_state = conn.execute(sa.select(Task.state).where(Task.id == task)).scalar_one()
    assert task_state == "cancelled"
