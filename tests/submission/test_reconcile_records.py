"""Reconcile records what it enqueues before it returns: the job rows it queued again are
``pending`` in SQL, and a task that never reached Redis is ``active``, without any recorder
running (the events are applied with the recorder's own idempotent apply, so a recorder that
meets them later inserts nothing twice). SQLite and PostgreSQL, real redis-server."""

from __future__ import annotations

import redis
import sqlalchemy as sa

from scheduler.queue.client import JobSpec, Queue, TaskSpec
from scheduler.queue.keys import Keys
from scheduler.record.models import Event, Job, Task
from scheduler.record.recorder import Recorder
from scheduler.submission.reconcile import reconcile
from tests.recorder_events import create_task_rows

KEYS = Keys()


def record(client: redis.Redis, engine: sa.Engine) -> int:
    recorder = Recorder(client, engine, KEYS, "test")
    total = 0
    while n := recorder.run_once(block_ms=None):
        total += n
    return total


def job_states(engine: sa.Engine, task_id: int) -> dict[str, str]:
    with engine.connect() as conn:
        return dict(conn.execute(sa.select(Job.id, Job.state).where(Job.task_id == task_id)).all())


def event_count(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(Event)).scalar_one()


def test_a_task_that_never_reached_redis_is_active_with_pending_jobs_when_reconcile_returns(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a task recorded in SQL (accepted, 3 accepted jobs) whose fan-out never happened
    task_id, jobs = create_task_rows(engine, 3)
    queue = Queue(redis_client, KEYS)
    # When reconcile runs, and no recorder
    report = reconcile(engine, queue, nodes_wait_ms=0, operator="ops")
    assert report.tasks_recreated == 1 and sorted(report.requeued) == [j for j, _ in jobs]
    # Then SQL already says what Redis says: the task active, its jobs pending
    with engine.connect() as conn:
        assert conn.execute(sa.select(Task.state).where(Task.id == task_id)).scalar_one() == "active"
    assert job_states(engine, task_id) == {j: "pending" for j, _ in jobs}
    assert {queue.job_state(j)["state"] for j, _ in jobs} == {"pending"}
    # And the enqueue is in the record; a recorder meeting the same events adds nothing
    with engine.connect() as conn:
        kinds = set(conn.scalars(sa.select(Event.kind).where(Event.task_id == str(task_id))))
    assert {"create", "enqueue"} <= kinds
    before = event_count(engine)
    record(redis_client, engine)
    assert event_count(engine) == before
    assert job_states(engine, task_id) == {j: "pending" for j, _ in jobs}


def test_a_job_running_when_redis_lost_everything_is_pending_in_sql_once_requeued(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a task of two jobs, one running, everything recorded
    task_id, jobs = create_task_rows(engine, 2)
    queue = Queue(redis_client, KEYS)
    queue.create_task(TaskSpec(str(task_id), operator="alice"))
    queue.enqueue(str(task_id), [JobSpec(j, h) for j, h in jobs])
    running = queue.claim("w1", 1).jobs[0].job_id
    record(redis_client, engine)
    assert job_states(engine, task_id)[running] == "running"
    # When Redis loses everything and reconcile puts the jobs back
    redis_client.flushall()
    report = reconcile(engine, queue, nodes_wait_ms=0, operator="ops")
    assert sorted(report.requeued) == sorted(j for j, _ in jobs)
    # Then the running job's row is pending again at once, as in Redis
    assert job_states(engine, task_id) == {j: "pending" for j, _ in jobs}
    assert queue.job_state(running)["state"] == "pending"
