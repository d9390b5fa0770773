"""Reconcile after Redis lost its data: every unfinished job is back, no finished one is, and a
started job of a non-idempotent task is left for the operator. SQLite and PostgreSQL, real
redis-server, the real queue core."""

from __future__ import annotations

import redis
import sqlalchemy as sa

from scheduler.errors import Code
from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from scheduler.queue.keys import Keys
from scheduler.record import migrate
from scheduler.record.engine import make_engine
from scheduler.record.models import Event, Job
from scheduler.record.recorder import Recorder
from scheduler.submission.reconcile import reconcile
from tests.recorder_events import create_task_rows
from tests.cli.test_config import run_cli

KEYS = Keys()


def record(client: redis.Redis, engine: sa.Engine) -> None:
    recorder = Recorder(client, engine, KEYS, "test")
    while recorder.run_once(block_ms=None):
        pass


def submit(engine: sa.Engine, queue: Queue, n: int, *, idempotent: bool = True) -> tuple[str, list[str]]:
    """What submit does: SQL rows first, then the task and its jobs in Redis."""
    task_id, jobs = create_task_rows(engine, n)
    if not idempotent:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE tasks SET idempotent = :f WHERE id = :t"),
                         {"f": False, "t": task_id})
    queue.create_task(TaskSpec(str(task_id), idempotent=idempotent, operator="alice"))
    queue.enqueue(str(task_id), [JobSpec(j, h) for j, h in jobs])
    return str(task_id), [j for j, _ in jobs]


def test_after_flushall_every_unfinished_job_is_back_and_no_finished_one(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a task of five jobs: one succeeded, one running, three pending, all recorded
    queue = Queue(redis_client, KEYS)
    task, jobs = submit(engine, queue, 5)
    claimed = {c.job_id: c for c in queue.claim("w1", 2).jobs}
    done, running = sorted(claimed)
    queue.ack("w1", [(done, claimed[done].token, JobResult(0, 5, "ok"))])
    record(redis_client, engine)
    # When Redis loses everything and reconcile runs
    redis_client.flushall()
    report = reconcile(engine, queue, nodes_wait_ms=0, operator="ops")
    # Then the task hash is back and every unfinished job is queued again; the finished one not
    assert report.tasks_recreated == 1
    assert sorted(report.requeued) == sorted(set(jobs) - {done})
    assert queue.task_state(task)["state"] == "active"
    for job in set(jobs) - {done}:
        assert queue.job_state(job)["state"] == "pending"
    assert queue.job_state(done) == {}
    # and the requeued jobs can be claimed and run
    assert sorted(c.job_id for c in queue.claim("w2", 10).jobs) == sorted(set(jobs) - {done})
    # and SQL holds a reconcile event with the counts
    with engine.connect() as conn:
        ev = conn.execute(sa.select(Event).where(Event.kind == "reconcile")).one()
    assert ev.operator == "ops" and ev.data["jobs_requeued"] == 4
    assert running in ev.data["requeued"]
    # and the run Redis lost is in the record as lost, run again (what explains its second run)
    with engine.connect() as conn:
        lost = conn.execute(sa.select(Event).where(Event.kind == "lost")).all()
    assert [(e.job_id, e.data["outcome"]) for e in lost] == [(running, "retry")]


def test_a_second_reconcile_changes_nothing(engine: sa.Engine, redis_client: redis.Redis) -> None:
    queue = Queue(redis_client, KEYS)
    submit(engine, queue, 3)
    record(redis_client, engine)
    redis_client.flushall()
    assert reconcile(engine, queue, nodes_wait_ms=0).jobs_requeued == 3
    again = reconcile(engine, queue, nodes_wait_ms=0)
    assert (again.tasks_recreated, again.jobs_requeued, again.jobs_present) == (0, 0, 3)


def test_a_job_finished_in_redis_but_not_yet_recorded_is_not_run_again(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a job acknowledged in Redis whose ack event the recorder has not copied yet
    queue = Queue(redis_client, KEYS)
    task, jobs = submit(engine, queue, 2)
    record(redis_client, engine)
    job = queue.claim("w1", 1).jobs[0]
    queue.ack("w1", [(job.job_id, job.token, JobResult(0, 5, "ok"))])
    with engine.connect() as conn:
        assert conn.execute(sa.select(Job.state).where(Job.id == job.job_id)).scalar_one() \
            == "pending"
    # When reconcile runs (Redis intact), Then the finished job is not enqueued again
    report = reconcile(engine, queue, nodes_wait_ms=0)
    assert report.jobs_requeued == 0 and report.jobs_finished_meanwhile == 1
    assert queue.job_state(job.job_id) == {}


def test_a_started_non_idempotent_job_no_node_runs_ends_as_lost_and_is_not_run_again(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    queue = Queue(redis_client, KEYS)
    task, jobs = submit(engine, queue, 2, idempotent=False)
    started = queue.claim("w1", 1).jobs[0].job_id
    record(redis_client, engine)
    redis_client.flushall()
    report = reconcile(engine, queue, nodes_wait_ms=0)
    assert report.not_rerun == [started]
    assert report.requeued == [j for j in jobs if j != started]
    # It ends failed as lost (its task can end), under a token a late result cannot match
    state = queue.job_state(started)
    assert state["state"] == "failed" and "no live node" in state["error"]
    assert int(state["token"]) > 1
    assert queue.claim("w2", 5).jobs[0].job_id != started
    with engine.connect() as conn:
        assert conn.scalar(sa.select(Job.state).where(Job.id == started)) == "lost"


def test_a_dry_run_reports_and_changes_nothing(engine: sa.Engine, redis_client: redis.Redis) -> None:
    queue = Queue(redis_client, KEYS)
    submit(engine, queue, 2)
    record(redis_client, engine)
    redis_client.flushall()
    report = reconcile(engine, queue, nodes_wait_ms=0, dry_run=True)
    assert (report.tasks_recreated, report.jobs_requeued) == (1, 2)
    assert redis_client.dbsize() == 0


def test_fleetsched_reconcile_prints_the_counts(tmp_path, redis_url: str) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    migrate.upgrade(url)
    engine = make_engine(url)
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    try:
        submit(engine, Queue(client, KEYS), 3)
        record(client, engine)
        client.flushall()
    finally:
        engine.dispose()
    env = {"XDG_STATE_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    code, out, err = run_cli(["--database-url", url, "--redis-url", redis_url, "reconcile", "--nodes-stopped",
                              "-o", "json"], env)
    assert code == 0, err
    assert '"jobs_requeued": 3' in out and "re-enqueued 3 jobs" in err
    assert client.exists(KEYS.task("1")) == 1
    client.close()


def test_a_job_whose_events_another_recorder_holds_uncommitted_is_skipped_and_said(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a non-idempotent task's two jobs claimed and acked in Redis (hashes gone, ack events
    # in the stream), the events read by another recorder that has not committed them yet
    # (mid-batch, retrying its database, or killed a moment ago: pending, idle for seconds)
    queue = Queue(redis_client, KEYS)
    task, jobs = submit(engine, queue, 3, idempotent=False)
    record(redis_client, engine)
    claimed = queue.claim("w1", 2).jobs
    queue.ack("w1", [(c.job_id, c.token, JobResult(0)) for c in claimed])
    redis_client.xreadgroup("recorder", "busy-recorder", {KEYS.events: ">"}, count=10_000)
    # When reconcile runs
    report = reconcile(engine, queue, nodes_wait_ms=0, operator="ops")
    # Then neither finished job is queued again, and the report says why it skipped them
    done = sorted(c.job_id for c in claimed)
    assert report.in_stream == done and report.jobs_in_stream == 2
    assert not set(done) & set(report.requeued)
    assert all(queue.job_state(j) == {} for j in done)
    with engine.connect() as conn:
        ev = conn.execute(sa.select(Event).where(Event.kind == "reconcile")).one()
    assert ev.data["in_stream"] == done and ev.data["jobs_requeued"] == 0


def test_a_rebuilt_job_goes_on_from_its_recorded_attempts_and_fencing_token(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a job claimed (token 1, attempt 1) by a worker that then stalled, recorded in SQL
    queue = Queue(redis_client, KEYS)
    task, [job] = submit(engine, queue, 1)
    [stale] = queue.claim("w1", 1).jobs
    record(redis_client, engine)
    # When Redis loses everything and reconcile rebuilds the job
    redis_client.flushall()
    assert reconcile(engine, queue, nodes_wait_ms=0).requeued == [job]
    # Then its next claim goes on from there: a later attempt and a token above the old one
    [fresh] = queue.claim("w2", 1).jobs
    assert fresh.attempt == 2 and fresh.token > stale.token
    # and the stale worker's ack is refused while the new owner's is accepted
    assert queue.ack("w1", [(job, stale.token, JobResult(0))]) == [Code.STALE_TOKEN]
    assert queue.ack("w2", [(job, fresh.token, JobResult(0))]) == [Code.OK]


def test_the_jobs_of_a_cancelled_task_whose_ends_redis_lost_end_cancelled(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a cancelled task whose one running job never reported before Redis lost its data
    queue = Queue(redis_client, KEYS)
    task, jobs = submit(engine, queue, 3, idempotent=False)
    running = queue.claim("w1", 1).jobs[0].job_id
    queue.cancel_task(task, "ops")
    record(redis_client, engine)
    redis_client.flushall()
    # When reconcile runs
    report = reconcile(engine, queue, nodes_wait_ms=0)
    # Then the task is not recreated, nothing is queued again, and the job ends cancelled in
    # SQL, so the task reaches an end
    assert (report.tasks_recreated, report.jobs_requeued, report.cancelled) == (0, 0, [running])
    assert not redis_client.exists(KEYS.task(task))
    with engine.connect() as conn:
        states = dict(conn.execute(sa.select(Job.id, Job.state).where(Job.task_id == int(task))).all())
    assert states == {j: "cancelled" for j in jobs}
    # And a second reconcile finds nothing more to do
    again = reconcile(engine, queue, nodes_wait_ms=0)
    assert (again.jobs_checked, again.cancelled) == (0, [])


def test_a_task_redis_holds_cancelled_while_sql_does_not_know_yet_does_not_stop_the_repair(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given two tasks whose jobs Redis lost; the first was cancelled in Redis, and its cancel
    # event has not reached SQL (SQL still calls it active)
    queue = Queue(redis_client, KEYS)
    first, _ = submit(engine, queue, 2)
    second, second_jobs = submit(engine, queue, 2)
    record(redis_client, engine)
    redis_client.flushall()
    queue.create_task(TaskSpec(first))
    redis_client.hset(KEYS.task(first), "state", "cancelled")
    # When reconcile runs, it skips the first and repairs the second
    report = reconcile(engine, queue, nodes_wait_ms=0)
    assert report.tasks_ended_in_redis == [int(first)]
    assert all(queue.job_state(j)["state"] == "pending" for j in second_jobs)
