"""Schedules: the CLI, the due entry, firing exactly once (duplicate and retried claims),
catch-up policies after an outage, overlap, pause/resume. Real redis-server, SQLite and
PostgreSQL; firing is driven by hand the way a worker does it (claim, then fire)."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from scheduler.errors import Code
from scheduler.queue.client import JobResult, Queue
from scheduler.queue.schedules import arm
from scheduler.record.migrate import upgrade
from scheduler.schedules.firing import _create, fire_claimed
from scheduler.schedules.store import request_of
from scheduler.submission.fanout import fan_out
from tests.schedule_support import engine_for, entry_score, fired, missed, ms, occurrences
from tests.submit_support import KEYS, Cli, cli_with_inventory, redis_snapshot, sql_rows
from tests.windows.test_windows_cli import snapshot

FLEET = "[web]\nweb-01 ansible_host=10.0.0.1\nweb-02 ansible_host=10.0.0.2\nweb-03 ansible_host=10.0.0.3\n"
TASK = ["command", "-t", "group:web", "-p", "cmd=true", "--executor", "simulate"]


@pytest.fixture
def db(database_url: str) -> str:
    upgrade(database_url)
    return database_url


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, db: str) -> Cli:
    return cli_with_inventory(tmp_path, redis_url, FLEET, db)


def past_second(seconds_ago: int) -> int:
    """A whole second (ms) ``seconds_ago`` before now: an occurrence of ``--every 1s``."""
    return (int(time.time()) - seconds_ago) * 1000


def test_adding_a_schedule_arms_its_entry_at_the_next_occurrence(
        cli: Cli, redis_client: redis.Redis) -> None:
    # When a cron schedule is added in a zone
    cli.ok("schedules", "add", "roll", "--cron", "*/5 * * * *", "--tz", "Europe/Berlin", *TASK)
    # Then its entry waits in the urgent set at the first occurrence `schedules next` shows
    nxt = json.loads(cli.ok("schedules", "next", "roll", "--count", "2", "-o", "json"))
    first = datetime.fromisoformat(nxt[0]["utc"])
    assert entry_score(redis_client, "roll") == ms(first) and first.minute % 5 == 0
    assert redis_client.hget(KEYS.schedule("roll"), "occurrence") == str(ms(first))
    assert datetime.fromisoformat(nxt[1]["utc"]) - first == timedelta(minutes=5)
    [row] = json.loads(cli.ok("schedules", "list", "-o", "json"))
    assert (row["name"], row["timing"], row["catchup"], row["overlap"]) == ("roll", "*/5 * * * *", "latest", "skip")


def test_a_duplicated_claim_creates_nothing_twice(cli: Cli, redis_client: redis.Redis, db: str) -> None:
    # Given a schedule whose entry is due now
    cli.ok("schedules", "add", "s", "--every", "1s", *TASK)
    occ = past_second(0)
    arm(redis_client, KEYS, "s", occ, replace=True)
    queue = Queue(redis_client, KEYS)
    [claimed] = queue.claim("w1", 5).schedules
    engine = engine_for(db)
    try:
        # When the same claim is fired twice (a retried call, a duplicated message)
        first = fire_claimed(engine, redis_client, KEYS, claimed, occ + 200, worker="w1")
        again = fire_claimed(engine, redis_client, KEYS, claimed, occ + 200, worker="w1")
    finally:
        engine.dispose()
    # Then one task with one job per host exists; the second fire found the entry moved on and
    # did nothing
    assert first.code is Code.OK and again.code is Code.STALE_TOKEN
    assert occurrences(db, "s") == {occ: 1} and len(first.tasks) == 1 and again.tasks == []
    assert len(sql_rows(db, "SELECT id FROM jobs WHERE task_id = :t", t=first.tasks[0])) == 3
    assert redis_client.hget(KEYS.task(str(first.tasks[0])), "total") == "3"
    assert entry_score(redis_client, "s") == occ + 1000


# Long enough that the test's own steps before "the lease ran out" (a task recorded in SQL, a
# job queued and claimed) fit in it on a loaded machine; a 1 s lease did not, under pytest-xdist.
ENTRY_LEASE_MS = 3_000


def recorded_occurrence(cli: Cli, redis_client: redis.Redis, db: str):  # noqa: ANN201
    """A 1 s schedule whose entry worker w1 claimed (lease ``ENTRY_LEASE_MS``) and whose
    occurrence's task it recorded in SQL, nothing queued yet: (queue, the claim, engine, occurrence, task id, plan)."""
    cli.ok("schedules", "add", "s", "--every", "1s", "--overlap", "allow", *TASK)
    occ = past_second(0)
    arm(redis_client, KEYS, "s", occ, replace=True)
    queue = Queue(redis_client, KEYS)
    [claim] = queue.claim("w1", 5, lease_ms=ENTRY_LEASE_MS).schedules
    engine = engine_for(db)
    with engine.connect() as conn:
        row = conn.execute(sa_select_schedule("s")).first()
    task_id, plan = _create(engine, row, datetime.fromtimestamp(occ / 1000, timezone.utc),
                            datetime.now(timezone.utc))
    return queue, claim, engine, occ, task_id, plan


def test_a_retried_claim_after_a_crash_mid_fan_out_completes_the_same_task(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    # Given a worker that recorded the occurrence's task and queued one job, then died
    queue, dead, engine, occ, task_id, plan = recorded_occurrence(cli, redis_client, db)
    try:
        fan_out(redis_client, KEYS, plan.task_spec(task_id), plan.hosts, plan.job_specs(task_id)[:1])
        # ... and that job ran and finished before anyone noticed
        [job] = queue.claim("runner", 1).jobs
        assert queue.ack("runner", [(job.job_id, job.token, JobResult(exit_code=0))]) == [Code.OK]
        # When another worker claims the entry after the lease ran out and fires it
        time.sleep(ENTRY_LEASE_MS / 1000 + 0.05)
        [retry] = queue.claim("w2", 5).schedules
        assert retry.token == dead.token + 1
        result = fire_claimed(engine, redis_client, KEYS, retry, occ + 300, worker="w2")
    finally:
        engine.dispose()
    # Then the same task is completed: the two missing jobs queued, the finished one not again
    assert result.tasks == [task_id] and occurrences(db, "s") == {occ: 1}
    assert redis_client.hget(KEYS.task(str(task_id)), "total") == "3"
    assert not redis_client.exists(KEYS.job(job.job_id))
    assert redis_client.zscore(KEYS.due("normal"), job.job_id) is None
    assert {j.job_id for j in queue.claim("runner", 10).jobs} == {f"{task_id}.1", f"{task_id}.2"}
    [state] = sql_rows(db, "SELECT state FROM tasks WHERE id = :t", t=task_id)
    assert state[0] != "accepted"


def test_a_stalled_firer_that_resumes_after_another_fired_the_occurrence_queues_nothing_again(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    # Given a firer that recorded the occurrence's task, then stalled past its lease (SIGSTOP,
    # a GC pause, slow SQL) before its fan-out
    queue, stalled, engine, occ, task_id, plan = recorded_occurrence(cli, redis_client, db)
    try:
        # and meanwhile another worker took the entry over, completed the fan-out, and every
        # job ran and finished
        time.sleep(ENTRY_LEASE_MS / 1000 + 0.05)
        [taken] = queue.claim("w2", 5).schedules
        assert fire_claimed(engine, redis_client, KEYS, taken, occ + 300, worker="w2").code is Code.OK
        jobs = queue.claim("runner", 10).jobs
        assert queue.ack("runner", [(j.job_id, j.token, JobResult(0)) for j in jobs]) == [Code.OK] * 3
        # When the stalled firer resumes its fan-out where it stopped, then tries to move on
        fan_out(redis_client, KEYS, plan.task_spec(task_id), plan.hosts, plan.job_specs(task_id))
        late = fire_claimed(engine, redis_client, KEYS, stalled, occ + 2_000, worker="w1")
    finally:
        engine.dispose()
    # Then no job was queued again: the occurrence ran once on every host
    assert redis_client.hget(KEYS.task(str(task_id)), "total") == "3"
    assert redis_client.hget(KEYS.task(str(task_id)), "succeeded") == "3"
    assert queue.claim("runner", 10).jobs == []
    assert late.code is Code.STALE_TOKEN and occurrences(db, "s") == {occ: 1}


def sa_select_schedule(name: str):  # type: ignore[no-untyped-def]
    import sqlalchemy as sa

    from scheduler.record.models import Schedule
    return sa.select(Schedule.__table__).where(Schedule.name == name)


# An outage: the entry stood at occurrence O and nothing claimed it for 10.3 s (or 10.7 s),
# so O .. O+10 s are due. Grace for --every 1s is half the period: only an occurrence at most
# 0.5 s old is on time. Documented results (docs/guides/windows-and-schedules.md, "Catch-up"):
CATCH_UP = [
    # policy, window, outage ms, runs, missed
    ("skip", "1h", 10_300, 1, 10),      # the on-time one (O+10) only
    ("skip", "1h", 10_700, 0, 11),      # none on time: nothing runs
    ("latest", "1h", 10_300, 1, 10),    # the on-time one
    ("latest", "1h", 10_700, 1, 10),    # none on time: the newest late one (O+10)
    ("all", "1h", 10_300, 11, 0),       # every one inside the window
    ("all", "5s", 10_300, 5, 6),        # those at most 5 s old: O+6 .. O+10
]


@pytest.mark.parametrize(("policy", "window", "outage", "runs", "lost"), CATCH_UP,
                         ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in CATCH_UP])
def test_catch_up_after_an_outage_runs_and_reports_exactly_the_documented_occurrences(
        cli: Cli, redis_client: redis.Redis, db: str, policy: str, window: str, outage: int,
        runs: int, lost: int) -> None:
    # Given a schedule whose entry was left at occurrence O while no worker ran
    cli.ok("schedules", "add", "s", "--every", "1s", "--catch-up", policy,
           "--catch-up-window", window, "--overlap", "allow", *TASK)
    o = past_second(30)
    arm(redis_client, KEYS, "s", o, replace=True)
    # When a worker comes back and fires it
    [result] = fired(redis_client, db, now_ms=o + outage)
    # Then exactly the documented occurrences ran, every other one is a missed event
    ran, gone = occurrences(db, "s"), missed(db, "s")
    assert (len(ran), len(gone)) == (runs, lost)
    assert max(ran.values(), default=1) == 1 and not set(ran) & set(gone)
    assert set(ran) | set(gone) == {o + 1000 * k for k in range(outage // 1000 + 1)}
    assert all("late (" + policy in why for why in gone.values())
    assert entry_score(redis_client, "s") == o + (outage // 1000 + 1) * 1000
    assert result.next_at is not None


def test_overlap_skip_records_an_occurrence_whose_previous_task_still_runs_as_missed(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    # Given a schedule that fired once and whose task has not run yet
    cli.ok("schedules", "add", "s", "--every", "1s", *TASK)
    o = past_second(20)
    arm(redis_client, KEYS, "s", o, replace=True)
    [first] = fired(redis_client, db, now_ms=o + 100)
    # When the next occurrence comes while that task is unfinished
    taken: list = []
    [second] = fired(redis_client, db, now_ms=o + 1100, jobs=taken)
    # Then it is recorded as missed, naming the running task
    assert first.tasks and not second.tasks
    assert missed(db, "s") == {o + 1000: f"overlap: task {first.tasks[0]} of the previous "
                                          "occurrence is still running"}
    # And once that task's jobs are done, the next occurrence runs
    queue = Queue(redis_client, KEYS)
    assert len(taken) == 3  # the first task's jobs, claimed along with the entry
    queue.ack("w1", [(j.job_id, j.token, JobResult(exit_code=0)) for j in taken])
    [third] = fired(redis_client, db, now_ms=o + 2100)
    assert third.tasks and set(occurrences(db, "s")) == {o, o + 2000}


def test_pause_takes_the_entry_out_and_resume_records_the_occurrences_in_between_as_missed(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    cli.ok("schedules", "add", "s", "--every", "1s", *TASK)
    cli.ok("schedules", "pause", "s")
    assert entry_score(redis_client, "s") is None
    [row] = json.loads(cli.ok("schedules", "list", "-o", "json"))
    assert row["paused"] is True
    time.sleep(2.2)
    cli.ok("schedules", "resume", "s")
    gone = missed(db, "s")
    assert len(gone) >= 2 and all(w == "the schedule was paused" for w in gone.values())
    score = entry_score(redis_client, "s")
    assert score is not None and score > max(gone)
    assert sorted(gone) == list(range(min(gone), max(gone) + 1, 1000))  # contiguous, none lost
    kinds = [r.kind for r in sql_rows(db, "SELECT kind FROM events WHERE kind LIKE 'schedule-%'")]
    assert sorted(kinds) == ["schedule-add", "schedule-pause", "schedule-resume"]


def test_a_removed_schedule_leaves_redis_and_its_tasks_keep_their_record(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    cli.ok("schedules", "add", "s", "--every", "1s", *TASK)
    o = past_second(5)
    arm(redis_client, KEYS, "s", o, replace=True)
    [result] = fired(redis_client, db, now_ms=o + 100)
    cli.ok("schedules", "remove", "s")
    assert entry_score(redis_client, "s") is None and not redis_client.exists(KEYS.schedule("s"))
    [task] = sql_rows(db, "SELECT id, schedule_id FROM tasks")
    assert task.id == result.tasks[0] and task.schedule_id is None


BAD = [
    (["--cron", "0 0 30 2 *"], "error: invalid cron expression '0 0 30 2 *'"),
    (["--cron", "* * * *"], "error: invalid cron expression '* * * *': expected 5 fields"),
    (["--cron", "0 3 * * *", "--tz", "Nowhere/City"], "error: unknown time zone 'Nowhere/City'"),
    (["--every", "0s"], "error: --every '0s' must be longer than zero"),
    (["--every", "1.5s"], "error: --every '1.5s' must be whole seconds"),
    (["--cron", "0 3 * * *", "--every", "1m"], "error: give --cron EXPR or --every DURATION"),
    (["--cron", "0 3 * * *", "--catch-up", "some"], "error: --catch-up 'some' is not one of skip, latest, all"),
    (["--cron", "0 3 * * *", "--overlap", "never"], "error: --overlap 'never' is not one of skip, allow"),
]


@pytest.mark.parametrize(("args", "line"), BAD, ids=[b[1][7:40] for b in BAD])
def test_bad_schedule_input_is_one_clear_line_and_writes_nothing(
        cli: Cli, redis_client: redis.Redis, db: str, args: list[str], line: str) -> None:
    before_sql, before_redis = snapshot(db), redis_snapshot(redis_client)
    code, out, err = cli("schedules", "add", "s", *args, *TASK)
    assert code == 2 and out == "", err
    assert err.splitlines()[0].startswith(line), err
    assert "Traceback" not in err
    assert snapshot(db) == before_sql and redis_snapshot(redis_client) == before_redis


def test_a_schedule_whose_task_cannot_be_planned_is_refused_at_add(cli: Cli, db: str) -> None:
    before = snapshot(db)
    code, _, err = cli("schedules", "add", "s", "--every", "1m", "command", "-t", "group:nope", "-p", "cmd=true")
    assert code != 0 and err.startswith("error: ") and snapshot(db) == before


def test_request_of_rebuilds_the_submitted_options(cli: Cli, db: str) -> None:
    cli.ok("schedules", "add", "s", "--every", "1m", "--max-concurrency", "50%", "--retries", "0",
           "--priority", "urgent", "--timeout", "30s", *TASK)
    engine = engine_for(db)
    try:
        with engine.connect() as conn:
            row = conn.execute(sa_select_schedule("s")).first()
    finally:
        engine.dispose()
    r = request_of(row)
    assert (str(r.max_concurrency), r.retries, r.priority, r.timeout_s, r.executor) == \
        ("50%", 0, "urgent", 30.0, "simulate")
