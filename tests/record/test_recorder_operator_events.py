"""An operator command that died between its Redis script and its SQL step leaves its event in
the stream only: the recorder must still apply it to the job and task rows. Real redis-server,
SQLite and PostgreSQL."""

from __future__ import annotations

import json

import redis
import sqlalchemy as sa

from scheduler.queue.keys import Keys
from scheduler.record.models import Event, Job, Task
from scheduler.record.recorder import Recorder
from tests.recorder_events import create_task_rows, job_lifecycle, xadd_all

KEYS = Keys()


def drain(recorder: Recorder) -> None:
    while recorder.run_once(block_ms=None):
        pass


def test_retry_failed_and_reprioritize_written_only_to_the_stream_reach_sql_through_the_recorder(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a task whose first job failed for good, recorded in SQL
    task_id, jobs = create_task_rows(engine, 2)
    failed_job = jobs[0][0]
    xadd_all(redis_client, job_lifecycle(str(task_id), jobs, fail=frozenset({failed_job})))
    drain(Recorder(redis_client, engine, KEYS, "r1"))
    # and then a retry-failed and a reprioritize whose commands died before their SQL step
    # (the events exactly as retry_failed.lua and reprioritize.lua write them)
    xadd_all(redis_client, [
        {"kind": "retry-failed", "ts": 1_700_000_100_000, "task": task_id, "operator": "bob",
         "count": 1, "jobs": failed_job, "due": 1_700_000_100_000},
        {"kind": "reprioritize", "ts": 1_700_000_100_001, "task": task_id, "operator": "bob",
         "count": 0, "detail": json.dumps({"from": "normal", "to": "urgent"})},
    ])
    # When a recorder copies the stream
    drain(Recorder(redis_client, engine, KEYS, "r2"))
    # Then the failed job is pending again, the task active and urgent, as in Redis
    with engine.connect() as conn:
        job = conn.execute(sa.select(Job).where(Job.id == failed_job)).one()
        task = conn.execute(sa.select(Task).where(Task.id == task_id)).one()
    assert job.state == "pending" and job.error is None
    assert task.state == "active"
    assert task.priority == "urgent"
    assert task.failed == 0


def test_an_operator_event_of_a_task_id_with_non_ascii_digits_does_not_stop_the_stream(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given an operator event whose task id is made of digits Python's isdigit accepts but int
    # does not ("²3"), followed by an ordinary event
    xadd_all(redis_client, [
        {"kind": "reprioritize", "ts": 1_700_000_000_000, "task": "\u00b23", "operator": "eve",
         "count": 0, "detail": json.dumps({"from": "normal", "to": "bulk"})},
        {"kind": "create", "ts": 1_700_000_000_001, "task": "q1", "operator": "alice"},
    ])
    # When the recorder copies the stream, then both events are recorded
    drain(Recorder(redis_client, engine, KEYS, "r1"))
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(Event)).scalar_one() == 2


def test_a_control_event_names_its_principal_whoever_records_it_first(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    from scheduler.principal import Principal
    from scheduler.queue.client import Queue
    from tests.queue_support import make_task

    # Given a task in SQL and in Redis
    task_id, _jobs = create_task_rows(engine, 2)
    queue = Queue(redis_client, KEYS)
    make_task(queue, str(task_id), 2, due_ms=4_102_444_800_000)
    who = Principal(name="deploy-bot", via="token:7", role="operator", source="10.1.2.3")
    # When an API principal pauses and resumes it, and a service cancels it under its own name
    queue.pause(str(task_id), who)
    queue.resume(str(task_id), who)
    queue.cancel_task(str(task_id), "reconcile")
    # and a recorder (not the command's record_now) copies the stream
    drain(Recorder(redis_client, engine, KEYS, "r1"))
    with engine.connect() as conn:
        rows = {r.kind: r for r in conn.execute(sa.select(Event.kind, Event.operator, Event.data)
                                                .where(Event.task_id == str(task_id)))}
    # Then the principal's events name it: its name as operator, how it was authenticated in data
    for kind in ("pause", "resume"):
        assert rows[kind].operator == "deploy-bot"
        assert rows[kind].data["principal"] == {"via": "token:7", "role": "operator",
                                                "tenant": None, "source": "10.1.2.3"}
    # And a bare name claims no principal
    assert rows["cancel"].operator == "reconcile" and "principal" not in rows["cancel"].data
