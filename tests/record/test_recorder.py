"""The recorder copies the event stream into SQL: events once each, job and task rows updated,
replays harmless, the stream trimmed only below what every consumer has acknowledged. Every test
runs on SQLite and on a real PostgreSQL, against a real redis-server."""

from __future__ import annotations

import json
import threading
import time

import redis
import sqlalchemy as sa

from scheduler.errors import Code
from scheduler.queue.keys import Keys
from scheduler.record.fold import StreamEvent
from scheduler.record.state import Stream, apply
from scheduler.record.models import Event, Job, Task
from scheduler.record.recorder import GROUP, Recorder
from tests.recorder_events import create_task_rows, job_lifecycle, xadd_all

KEYS = Keys()


def drain(recorder: Recorder, limit: int = 10_000) -> int:
    total = 0
    for _ in range(limit):
        n = recorder.run_once(block_ms=None)
        if n == 0:
            return total
        total += n
    raise AssertionError("the recorder never ran out of events")


def count_events(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(Event)).scalar_one()


def test_a_task_lifecycle_is_recorded_into_events_jobs_and_task_counters(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a task of three jobs accepted in SQL, whose second job fails
    task_id, jobs = create_task_rows(engine, 3)
    events = list(job_lifecycle(str(task_id), jobs, fail=frozenset({jobs[1][0]})))
    ids = xadd_all(redis_client, events)
    # When the recorder drains the stream
    assert drain(Recorder(redis_client, engine, KEYS, "r1")) == len(events)
    # Then every event is a row keyed by its stream id
    with engine.connect() as conn:
        assert sorted(conn.scalars(sa.select(Event.id))) == sorted(ids)
        rows = {j.id: j for j in conn.execute(sa.select(Job)).all()}
        task = conn.execute(sa.select(Task).where(Task.id == task_id)).one()
        claim = conn.execute(sa.select(Event).where(Event.kind == "claim").limit(1)).one()
    # and the jobs carry their outcome
    ok, bad = rows[jobs[0][0]], rows[jobs[1][0]]
    assert (ok.state, ok.attempts, ok.worker, ok.exit_code, ok.token) == ("succeeded", 1, "w1", 0, 1)
    assert ok.started_at is not None and ok.finished_at > ok.started_at
    assert ok.started_at.tzinfo is not None
    assert (bad.state, bad.exit_code, bad.error) == ("failed", 2, "exit status 2")
    assert "boom" in bad.output_tail
    # and the task its counters and final state
    assert (task.total, task.succeeded, task.failed, task.running) == (3, 2, 1, 0)
    assert task.state == "failed" and task.finished_at is not None and task.started_at is not None
    assert claim.job_id and claim.host and claim.worker == "w1" and claim.data["attempt"] == 1


def test_a_task_whose_jobs_all_succeed_ends_succeeded(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    task_id, jobs = create_task_rows(engine, 2)
    xadd_all(redis_client, job_lifecycle(str(task_id), jobs))
    drain(Recorder(redis_client, engine, KEYS, "r1"))
    with engine.connect() as conn:
        state, ok = conn.execute(sa.select(Task.state, Task.succeeded)
                                 .where(Task.id == task_id)).one()
    assert (state, ok) == ("succeeded", 2)


def test_events_of_jobs_without_rows_are_recorded_without_crashing(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given events of a queue used without SQL fan-out (no task or job rows, non-numeric ids)
    events = list(job_lifecycle("bench-7", [("bench-7.0", "x"), ("bench-7.1", "y")]))
    events += list(job_lifecycle("999", [("999.0", "z")]))
    xadd_all(redis_client, events)
    # When recorded, Then they are all in the events table and no row appeared from nowhere
    assert drain(Recorder(redis_client, engine, KEYS, "r1")) == len(events)
    assert count_events(engine) == len(events)
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(Job)).scalar_one() == 0


def test_a_batch_redelivered_after_a_crash_before_xack_inserts_nothing_twice(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a recorder that wrote a batch into SQL and died before acknowledging it
    task_id, jobs = create_task_rows(engine, 5)
    events = list(job_lifecycle(str(task_id), jobs))
    xadd_all(redis_client, events)
    dead = Recorder(redis_client, engine, KEYS, "dead")
    dead.ensure_group()
    dead._write(dead._read(len(events), None))
    assert redis_client.xpending(KEYS.events, GROUP)["pending"] == len(events)
    before = _snapshot(engine)
    # When another recorder claims the dead consumer's entries and records them again
    alive = Recorder(redis_client, engine, KEYS, "alive", claim_idle_ms=0)
    assert drain(alive) == len(events)
    # Then nothing was inserted twice, no row moved, and nothing is pending any more
    assert alive.stats.inserted == 0
    assert count_events(engine) == len(events)
    assert _snapshot(engine) == before
    assert redis_client.xpending(KEYS.events, GROUP)["pending"] == 0


def _snapshot(engine: sa.Engine) -> list[tuple]:
    with engine.connect() as conn:
        jobs = conn.execute(sa.select(Job.id, Job.state, Job.attempts, Job.finished_at)
                            .order_by(Job.id)).all()
        tasks = conn.execute(sa.select(Task.id, Task.state, Task.succeeded, Task.finished_at)
                             .order_by(Task.id)).all()
    return [tuple(r) for r in jobs + tasks]


def test_a_late_older_batch_never_moves_a_job_backwards(engine: sa.Engine) -> None:
    # Given a job already recorded as succeeded by a newer event
    task_id, jobs = create_task_rows(engine, 1)
    job = jobs[0][0]
    claim = StreamEvent("1700000000100-0", {"kind": "claim", "ts": "1700000000100",
                                            "task": str(task_id), "job": job, "attempt": "1",
                                            "token": "1", "worker": "w1"})
    ack = StreamEvent("1700000000200-0", {"kind": "ack", "ts": "1700000000200",
                                          "task": str(task_id), "job": job, "exit_code": "0"})
    with engine.begin() as conn:
        apply(conn, Stream([ack]))
    # When the older claim arrives afterwards (another consumer's slower batch)
    with engine.begin() as conn:
        apply(conn, Stream([claim]))
    # Then the job stays succeeded; both events are in the record
    with engine.connect() as conn:
        assert conn.execute(sa.select(Job.state).where(Job.id == job)).scalar_one() == "succeeded"
    assert count_events(engine) == 2


def test_the_stream_is_trimmed_only_below_what_is_unacknowledged(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given 1000 events: 600 recorded, 100 delivered to a consumer that has not acked them,
    # and 300 not yet read by anyone
    events = list(job_lifecycle("t", [(f"t.{i}", f"h{i}") for i in range(499)]))
    ids = xadd_all(redis_client, events)
    assert len(ids) == 1000
    done = Recorder(redis_client, engine, KEYS, "done", batch=600)
    assert done.run_once(600) == 600
    slow = Recorder(redis_client, engine, KEYS, "slow")
    assert len(slow._read(100, None)) == 100
    # When the stream is trimmed
    done.trim()
    # Then the recorded part is (mostly, trimming is by whole nodes) gone, and every entry that
    # is pending or unread is still there
    left = {i for i, _ in redis_client.xrange(KEYS.events)}
    assert len(left) < 1000
    assert set(ids[600:]) <= left
    assert done.safe_trim_id() == ids[600]


def test_several_recorders_at_once_record_every_event_exactly_once(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given ten tasks' events in the stream
    produced: list[str] = []
    expected: dict[int, int] = {}
    for _ in range(10):
        task_id, jobs = create_task_rows(engine, 40)
        produced += xadd_all(redis_client, job_lifecycle(str(task_id), jobs))
        expected[task_id] = 40
    # When three recorders drain it concurrently
    recorders = [Recorder(redis_client, engine, KEYS, f"r{i}", batch=50) for i in range(3)]
    threads = [threading.Thread(target=drain, args=(r,)) for r in recorders]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    # Then each event was recorded by exactly one of them, and the counters are right
    assert sum(r.stats.events for r in recorders) == len(produced)
    assert sum(r.stats.inserted for r in recorders) == len(produced)
    assert count_events(engine) == len(produced)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(Task.id, Task.succeeded, Task.state)).all()
    assert {r.id: (r.succeeded, r.state) for r in rows} == {
        t: (n, "succeeded") for t, n in expected.items()}


def test_run_records_until_stopped(engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a recorder running in the background
    recorder = Recorder(redis_client, engine, KEYS, "bg", block_ms=50)
    stop = threading.Event()
    thread = threading.Thread(target=recorder.run, args=(stop,))
    thread.start()
    try:
        # When events arrive
        ids = xadd_all(redis_client, job_lifecycle("live", [("live.0", "h")]))
        deadline = time.monotonic() + 20
        while count_events(engine) < len(ids) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        thread.join(10)
    # Then they are recorded, and the loop ends when asked
    assert count_events(engine) == len(ids)
    assert not thread.is_alive()
    assert recorder.lag() == 0


def test_output_with_nul_bytes_and_oversized_fields_is_recorded(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    task_id, jobs = create_task_rows(engine, 1)
    xadd_all(redis_client, [
        {"kind": "claim", "ts": 1, "task": str(task_id), "job": jobs[0][0], "worker": "w" * 400},
        {"kind": "ack", "ts": 2, "task": str(task_id), "job": jobs[0][0],
         "output": "bin\x00ary " + "x" * 100_000, "exit_code": 0},
    ])
    assert drain(Recorder(redis_client, engine, KEYS, "r1")) == 2
    with engine.connect() as conn:
        job = conn.execute(sa.select(Job)).one()
    # (written to the stream by hand, not through the queue: the SQL row still holds JSON)
    [record] = json.loads(job.output_tail)
    assert job.state == "succeeded" and record["stdout_head"].startswith("bin")
    assert record["stdout_head"][4:].startswith("ary xxx")
    assert record["stdout_bytes"] == 100_010  # the NUL byte stored as U+FFFD (3 bytes)
    assert job.worker == "w" * 255


def _lost(task_id: int, job: str, pos: int, error: str, outcome: str | None) -> StreamEvent:
    fields = {"kind": "lost", "ts": str(1_700_000_000_000 + pos), "task": str(task_id),
              "job": job, "attempt": "1", "token": "1", "worker": "w1", "error": error}
    if outcome is not None:
        fields["outcome"] = outcome
    return StreamEvent(f"{1_700_000_000_000 + pos}-0", fields)


def test_a_lost_event_s_outcome_field_decides_the_job_state_and_its_wording_is_never_read(
        engine: sa.Engine) -> None:
    # Given six running jobs that their workers lost
    task_id, jobs = create_task_rows(engine, 6)
    ids = [j for j, _ in jobs]
    plain = "worker w1 stopped renewing its lease"
    events = [StreamEvent(f"{1_700_000_000_000 + i}-1", {
        "kind": "claim", "ts": str(1_700_000_000_000 + i), "task": str(task_id), "job": j,
        "attempt": "1", "token": "1", "worker": "w1"}) for i, j in enumerate(ids)]
    # When lost events arrive: four with an explicit outcome and wording that says nothing (or
    # says otherwise), one with wording only, one with an outcome no script writes
    events += [
        _lost(task_id, ids[0], 100, plain, "retry"),
        _lost(task_id, ids[1], 101, plain, "held"),
        _lost(task_id, ids[2], 102, plain + "; run again because the action is idempotent",
              "cancelled"),
        _lost(task_id, ids[3], 103, plain, "failed"),
        _lost(task_id, ids[4], 104, plain + "; not run again because the action is not "
              "idempotent", None),
        _lost(task_id, ids[5], 105, plain + "; runs again when the task resumes", "someday"),
    ]
    with engine.begin() as conn:
        apply(conn, Stream(events))
    # Then the outcome field decides; without a known one the job is lost, whatever the words
    with engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(sa.select(Job.id, Job.state, Job.finished_at))}
        task = conn.execute(sa.select(Task).where(Task.id == task_id)).one()
    assert [rows[j].state for j in ids] == ["pending", "held", "cancelled", "lost", "lost",
                                            "lost"]
    # and the jobs that ended have a finish time, those that did not have none
    assert [rows[j].finished_at is not None for j in ids] == [False, False, True, True, True,
                                                              True]
    assert (task.lost, task.cancelled, task.running, task.state) == (3, 1, 0, "accepted")


def test_every_event_of_a_job_in_one_batch_collapses_into_one_row_update(
        engine: sa.Engine) -> None:
    # Given a task of 50 jobs whose whole lifecycle (enqueue, claim, ack) is in one batch
    task_id, jobs = create_task_rows(engine, 50)
    raw = list(job_lifecycle(str(task_id), jobs))
    events = [StreamEvent(f"{1_700_000_000_000 + i}-0", {k: str(v) for k, v in ev.items()})
              for i, ev in enumerate(raw)]
    # When it is applied
    with engine.begin() as conn:
        result = apply(conn, Stream(events))
    # Then every event is a row, but each job row was updated once, to its newest state
    assert (result.events, result.inserted) == (len(raw), len(raw))
    assert result.jobs_updated == 50 and result.tasks_updated == 1
    with engine.connect() as conn:
        states = set(conn.scalars(sa.select(Job.state)))
        task = conn.execute(sa.select(Task).where(Task.id == task_id)).one()
    assert states == {"succeeded"}
    assert (task.succeeded, task.state) == (50, "succeeded")
    # and the same batch again inserts nothing and moves no row
    with engine.begin() as conn:
        again = apply(conn, Stream(events))
    assert (again.inserted, again.jobs_updated) == (0, 0)


def test_a_stale_result_is_recorded_with_its_output_and_changes_no_job_row(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec

    # Given a job claimed, lost by its worker, claimed again and acked by the new owner
    task_id, jobs = create_task_rows(engine, 1)
    [(job_id, host)] = jobs
    queue = Queue(redis_client, KEYS)
    queue.create_task(TaskSpec(str(task_id)))
    queue.enqueue(str(task_id), [JobSpec(job_id, host)])
    [old] = queue.claim("w-old", 1, lease_ms=1).jobs
    time.sleep(0.01)
    [new] = queue.claim("w-new", 1).jobs
    assert queue.ack("w-new", [(job_id, new.token, JobResult(0, 5, "new"))]) == [Code.OK]
    # When the old worker's late ack arrives and the stream is recorded
    assert queue.ack("w-old", [(job_id, old.token, JobResult(0, 7, '{"ran": "twice"}'))]) == [
        Code.UNKNOWN_JOB]
    recorder = Recorder(redis_client, engine, KEYS, "test")
    while recorder.run_once(block_ms=None):
        pass
    # Then SQL holds the refused ack with its result, and the job row is the new owner's
    with engine.connect() as conn:
        ev = conn.execute(sa.select(Event).where(Event.kind == "stale")).one()
        row = conn.execute(sa.select(Job).where(Job.id == job_id)).one()
    assert (ev.job_id, ev.worker) == (job_id, "w-old")
    assert ev.data["verb"] == "ack" and ev.data["reason"] == "unknown_job"
    assert ev.data["token"] == old.token and ev.data["output"] == {"ran": "twice"}
    assert (row.state, row.worker, row.token) == ("succeeded", "w-new", new.token)


def test_a_gone_node_s_empty_consumer_is_forgotten_and_one_holding_entries_never(
        redis_client, tmp_path) -> None:
    import sqlalchemy as sa

    from scheduler.queue.keys import Keys
    from scheduler.record import recorder as rec
    from scheduler.record.migrate import upgrade

    keys = Keys()
    redis_client.flushall()
    url = f"sqlite:///{tmp_path / 'r.db'}"
    upgrade(url)
    engine = sa.create_engine(url)
    # Given two consumers of nodes that are gone (no presence): one empty, one holding an entry
    redis_client.xgroup_create(keys.events, rec.GROUP, id="0", mkstream=True)
    redis_client.xadd(keys.events, {"kind": "noop", "ts": "1"})
    redis_client.xreadgroup(rec.GROUP, "worker:holder", {keys.events: ">"}, count=1)
    redis_client.xgroup_createconsumer(keys.events, rec.GROUP, "worker:empty")
    import time
    time.sleep(rec.DEAD_NODE_IDLE_MS / 1000 + 0.1)  # the entry idle long enough to be taken
    old_idle = rec.FORGET_CONSUMER_IDLE_MS
    rec.FORGET_CONSUMER_IDLE_MS = 0  # as if both had been silent for ten minutes
    try:
        recorder = rec.Recorder(redis_client, engine, keys, "worker:live")
        recorder._claim_from_dead_nodes(10)
    finally:
        rec.FORGET_CONSUMER_IDLE_MS = old_idle
        engine.dispose()
    # Then the empty one is gone, and the entry of the other was taken over, not dropped
    names = {c["name"]: int(c["pending"]) for c in redis_client.xinfo_consumers(keys.events,
                                                                                rec.GROUP)}
    assert "worker:empty" not in names
    assert names.get("worker:live") == 1


def blocked_read_meeting(recorder: Recorder, events: list) -> list[int]:
    """What one blocking ``run_once`` of ``recorder`` (group made, nothing pending) returns when
    the first of ``events`` arrives after 0.2 s and the rest 0.1 s after it."""
    recorder.ensure_group()
    recorder._own_pending = False
    recorder._next_claim = time.monotonic() + 3600
    got: list[int] = []
    reader = threading.Thread(target=lambda: got.append(recorder.run_once(block_ms=5_000)))
    reader.start()
    try:
        time.sleep(0.2)
        xadd_all(recorder.client, events[:1], recorder.keys)
        time.sleep(0.1)
        xadd_all(recorder.client, events[1:], recorder.keys)
    finally:
        reader.join(10)
    return got




def test_a_blocking_read_woken_by_one_event_lingers_and_writes_what_follows_in_the_same_batch(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a recorder blocked on a quiet stream, when one event wakes it and the rest of the
    # job's events follow within the linger
    events = list(job_lifecycle("ling", [("ling.0", "h")]))
    recorder = Recorder(redis_client, engine, KEYS, "lg", block_ms=5_000, linger_ms=300)
    got = blocked_read_meeting(recorder, events)
    # Then one batch holds them all, and none is written before the linger is over
    assert got == [len(events)] and recorder.stats.batches == 1
    assert count_events(engine) == len(events)
    # and a recorder without a linger writes the first event alone
    got = blocked_read_meeting(Recorder(redis_client, engine, Keys("{plain}"), "pl",
                                        block_ms=5_000, linger_ms=0), events)
    assert got == [1]
