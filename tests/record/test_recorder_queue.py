"""The recorder against the real queue core: what the Lua scripts emit lands in SQL as the
job and task states the queue reached (SQLite and PostgreSQL, real redis-server)."""

from __future__ import annotations

import pytest
import redis
import sqlalchemy as sa

from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from scheduler.queue.keys import Keys
from scheduler.record import migrate
from scheduler.record.engine import make_engine
from scheduler.record.models import Event, Job, Task
from scheduler.record.recorder import Recorder
from tests.recorder_events import create_task_rows

KEYS = Keys()


@pytest.fixture
def engine(database_url: str):
    migrate.upgrade(database_url)
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


def test_the_record_follows_the_queue_through_retry_failure_cancel_and_success(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a task of five jobs accepted in SQL and queued in Redis, the last one due in an hour
    task_id, jobs = create_task_rows(engine, 5)
    tid = str(task_id)
    queue = Queue(redis_client, KEYS)
    queue.create_task(TaskSpec(tid, max_attempts=2, backoff_ms=0, operator="alice"))
    seconds, _ = redis_client.time()
    later = (int(seconds) + 3600) * 1000
    queue.enqueue(tid, [JobSpec(j, h, due_ms=later if i == 4 else 0)
                        for i, (j, h) in enumerate(jobs)])
    # When four are claimed: two succeed, one fails twice (retried once), and the operator
    # cancels the task while the fourth is still running, which then succeeds
    claimed = queue.claim("w1", 4).jobs
    assert len(claimed) == 4
    ok1, ok2, flaky, late = claimed
    queue.ack("w1", [(ok1.job_id, ok1.token, JobResult(0, 10, "fine")),
                     (ok2.job_id, ok2.token, JobResult(0, 12, "fine"))])
    assert queue.fail("w1", flaky.job_id, flaky.token, JobResult(3, 5, "oops"),
                      error="exit status 3") == "retry"
    again = [c for c in queue.claim("w1", 4).jobs if c.job_id == flaky.job_id][0]
    assert queue.fail("w1", again.job_id, again.token, JobResult(4, 5, "oops again"),
                      error="exit status 4") == "failed"
    queue.cancel_task(tid, "bob")
    queue.ack("w1", [(late.job_id, late.token, JobResult(0, 20, "done"))])
    recorder = Recorder(redis_client, engine, KEYS, "r1")
    while recorder.run_once(block_ms=None):
        pass
    # Then SQL holds the outcome of every job and the task's counters
    with engine.connect() as conn:
        states = dict(conn.execute(sa.select(Job.id, Job.state)).all())
        failed = conn.execute(sa.select(Job).where(Job.id == flaky.job_id)).one()
        task = conn.execute(sa.select(Task).where(Task.id == task_id)).one()
        kinds = set(conn.scalars(sa.select(Event.kind)))
        stream_len = redis_client.xlen(KEYS.events)
    expected = {j: "cancelled" for j, _ in jobs}
    expected.update({ok1.job_id: "succeeded", ok2.job_id: "succeeded",
                     late.job_id: "succeeded", flaky.job_id: "failed"})
    assert states == expected
    assert (failed.attempts, failed.exit_code, failed.error) == (2, 4, "exit status 4")
    assert "oops again" in failed.output_tail
    assert (task.succeeded, task.failed, task.cancelled, task.running) == (3, 1, 1, 0)
    assert task.state == "cancelled" and task.finished_at is not None
    assert {"create", "enqueue", "claim", "ack", "retry", "fail", "cancel"} <= kinds
    assert recorder.lag() == 0
    assert stream_len <= recorder.stats.events
