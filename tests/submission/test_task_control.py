"""``fleetsched tasks pause|resume|cancel|retry-failed`` under load: real worker processes
(``python -m scheduler worker``), the simulate and local executors, real redis-server and SQLite. Each
change is in SQL with its operator as soon as the command returns (no recorder running)."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from scheduler.queue.client import Queue
from scheduler.record.migrate import upgrade
from tests.submit_support import KEYS, Cli, data, drain, events, inventory, sql_rows
from tests.worker_support import WorkerProcess, wait_until, worker_args


@pytest.fixture
def cli(tmp_path: Path, redis_url: str) -> Cli:
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, "[fleet]\nn-[000:059]\n")
    return cli


@pytest.fixture
def worker(tmp_path: Path, redis_url: str):
    w = WorkerProcess(redis_url, tmp_path, worker_args("ctl-1", slots=6, processes=1, lease="5s"))
    yield w
    w.stop()


def stream(client: redis.Redis, task: int, kinds: tuple[str, ...]) -> list[dict[str, str]]:
    return [f for _id, f in client.xrange(KEYS.events)
            if f.get("task") == str(task) and f["kind"] in kinds]


def acked(client: redis.Redis, task: int) -> int:
    return len(stream(client, task, ("ack",)))


def test_pause_holds_pending_jobs_in_order_and_resume_releases_them(
        cli: Cli, redis_client: redis.Redis, worker: WorkerProcess) -> None:
    # Given 60 jobs of 150 ms each being worked through by a node with 6 slots (1.5 s of work:
    # room for a pause on a loaded machine, whose CLI call alone may take half a second)
    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate",
                      "--executor-option", "duration_ms=150")
    worker.start()
    wait_until(lambda: acked(redis_client, task) >= 12, 30, "a few jobs done", worker.tail, [worker])
    # When alice pauses it
    cli.ok("tasks", "pause", str(task), operator="alice")
    # Then SQL says paused, by alice, at once
    assert sql_rows(cli.database_url, "SELECT state FROM tasks WHERE id = :t", t=task)[0].state == "paused"
    (pause,) = events(cli.database_url, task, ("pause",))
    assert pause.operator == "alice"
    # And the running jobs finish, then nothing more is claimed while it stays paused
    queue = Queue(redis_client, KEYS)
    wait_until(lambda: queue.task_state(str(task))["running"] == "0", 15, "running jobs to end",
               worker.tail, [worker])
    done_at_pause = acked(redis_client, task)
    import time

    time.sleep(1.0)
    assert acked(redis_client, task) == done_at_pause < 60
    claims_after = [f for f in stream(redis_client, task, ("pause", "claim"))]
    kinds = [f["kind"] for f in claims_after]
    assert "claim" not in kinds[kinds.index("pause") + 1:]
    # When bob resumes it
    cli.ok("tasks", "resume", str(task), operator="bob")
    (resume,) = events(cli.database_url, task, ("resume",))
    assert resume.operator == "bob" and data(resume)["count"] > 0
    # Then every job ends, and the jobs were claimed in due order across the pause
    wait_until(lambda: acked(redis_client, task) == 60, 30, "all 60 jobs", worker.tail, [worker])
    claimed = [f["job"] for f in stream(redis_client, task, ("claim",))]
    due_order = sorted((f"{task}.{n}" for n in range(60)))  # equal due times: ZSET member order
    assert claimed == due_order
    drain(redis_client, cli.database_url)
    assert sql_rows(cli.database_url, "SELECT state FROM tasks WHERE id = :t", t=task)[0].state == "succeeded"


def test_cancel_stops_pending_jobs_and_lets_running_ones_finish(
        cli: Cli, redis_client: redis.Redis, worker: WorkerProcess) -> None:
    # Given 60 jobs of 400 ms, at most 4 at a time
    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate",
                      "--executor-option", "duration_ms=400", "--max-concurrency", "4")
    worker.start()
    queue = Queue(redis_client, KEYS)
    wait_until(lambda: acked(redis_client, task) >= 4 and queue.task_state(str(task))["running"] == "4",
               30, "a second wave running", worker.tail, [worker])
    # When carol cancels it
    out = cli("tasks", "cancel", str(task), operator="carol")
    assert out[0] == 0, out
    # Then the running jobs finish with success, and nothing else is claimed
    wait_until(lambda: queue.task_state(str(task))["running"] == "0", 15, "running jobs to end",
               worker.tail, [worker])
    flow = [f["kind"] for f in stream(redis_client, task, ("cancel", "claim", "ack", "fail"))]
    first_cancel = flow.index("cancel")
    assert "claim" not in flow[first_cancel:] and "fail" not in flow
    live = queue.task_state(str(task))
    claimed = len(stream(redis_client, task, ("claim",)))
    assert live["state"] == "cancelled"
    assert int(live["succeeded"]) == claimed and int(live["cancelled"]) == 60 - claimed
    # And SQL has the cancel with carol's name and the cancelled jobs, before any recorder ran
    cancels = events(cli.database_url, task, ("cancel",))
    assert {c.operator for c in cancels} == {"carol"}
    (state,) = sql_rows(cli.database_url, "SELECT state FROM tasks WHERE id = :t", t=task)
    assert state.state == "cancelled"
    drain(redis_client, cli.database_url)
    counts = dict(sql_rows(cli.database_url, "SELECT state, count(*) FROM jobs WHERE task_id = :t "
                                             "GROUP BY state", t=task))
    assert counts == {"succeeded": claimed, "cancelled": 60 - claimed}


def test_retry_failed_queues_the_failed_jobs_again_with_a_new_attempt_budget(
        cli: Cli, redis_client: redis.Redis, worker: WorkerProcess, tmp_path: Path) -> None:
    # Given a task whose jobs fail until a flag file exists on the worker node, 2 attempts each
    flag = tmp_path / "flag"
    task = cli.submit("command", "-t", "n-00*", "-p", f"cmd=test -e {flag}", "--executor",
                      "local", "--retries", "1", "--backoff", "0")
    worker.start()
    queue = Queue(redis_client, KEYS)
    wait_until(lambda: queue.task_state(str(task))["failed"] == "10", 30, "10 failed jobs",
               worker.tail, [worker])
    assert {f["attempt"] for f in stream(redis_client, task, ("fail",))} == {"2"}
    drain(redis_client, cli.database_url)
    assert sql_rows(cli.database_url, "SELECT state FROM tasks WHERE id = :t", t=task)[0].state == "failed"
    # When the cause is fixed and dave retries the failed jobs
    flag.write_text("")
    cli.ok("tasks", "retry-failed", str(task), operator="dave")
    # Then SQL shows the task active again and its jobs pending, with dave's event
    (state,) = sql_rows(cli.database_url, "SELECT state, failed FROM tasks WHERE id = :t", t=task)
    assert (state.state, state.failed) == ("active", 0)
    (retry,) = events(cli.database_url, task, ("retry-failed",))
    assert retry.operator == "dave" and data(retry)["count"] == 10
    # And every job runs once more, from attempt 1, and succeeds
    wait_until(lambda: queue.task_state(str(task))["succeeded"] == "10", 30, "10 successes",
               worker.tail, [worker])
    acks = stream(redis_client, task, ("ack",))
    assert sorted(f["job"] for f in acks) == sorted(f"{task}.{n}" for n in range(10))
    assert {f["attempt"] for f in acks} == {"1"}
    assert redis_client.zcard(KEYS.dead) == 0
    drain(redis_client, cli.database_url)
    (final,) = sql_rows(cli.database_url, "SELECT state, succeeded, failed FROM tasks WHERE id = :t",
                        t=task)
    assert (final.state, final.succeeded, final.failed) == ("succeeded", 10, 0)
    # And retry-failed of the succeeded task is refused as pause of it is (exit 2, one line),
    # with nothing written
    before = redis_client.xlen(KEYS.events)
    for verb, what in (("pause", "pause"), ("retry-failed", "retry")):
        code, out, err = cli("tasks", verb, str(task))
        assert code == 2, (verb, out, err)
        assert err.splitlines()[0].startswith(f"error: task {task} has ended") and \
            f"there is nothing to {what}" in err.splitlines()[0], err
    assert redis_client.xlen(KEYS.events) == before


def test_control_of_an_unknown_or_unqueued_task_is_one_line(
        cli: Cli, redis_client: redis.Redis, tmp_path: Path) -> None:
    code, _, err = cli("tasks", "pause", "999")
    assert code == 4 and err.splitlines()[0] == "error: no task 999"
    # A task recorded while Redis was down can be cancelled in SQL alone; reconcile skips it
    down = Cli(tmp_path, "redis://127.0.0.1:1/0", cli.database_url)
    code, _, err = down("submit", "command", "-t", "n-001", "-p", "cmd=true")
    assert code == 1 and "recorded but not queued" in err
    code, _, err = cli("tasks", "pause", "1")
    assert code == 2 and "task 1 is not queued yet (state accepted)" in err
    cli.ok("tasks", "cancel", "1", operator="erin")
    (row,) = sql_rows(cli.database_url, "SELECT state, cancelled FROM tasks WHERE id = 1")
    assert (row.state, row.cancelled) == ("cancelled", 1)
    assert events(cli.database_url, 1, ("cancel",))[0].operator == "erin"
    cli.ok("reconcile", "--nodes-stopped")
    assert not redis_client.exists(KEYS.task("1"))


def test_reprioritize_moves_pending_jobs_to_the_new_class_recorded_with_the_operator(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given a bulk task of 60 jobs waiting (no worker)
    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate",
                      "--priority", "bulk")
    assert redis_client.zcard(KEYS.due("bulk")) == 60
    # When frank makes it urgent
    code, _, err = cli("tasks", "reprioritize", str(task), "urgent", operator="frank")
    assert code == 0, err
    # Then its jobs wait in the urgent set, the task hash says so, and SQL has it with frank
    assert (redis_client.zcard(KEYS.due("urgent")), redis_client.zcard(KEYS.due("bulk"))) == (60, 0)
    assert Queue(redis_client, KEYS).task_state(str(task))["prio"] == "urgent"
    (row,) = sql_rows(cli.database_url, "SELECT priority FROM tasks WHERE id = :t", t=task)
    assert row.priority == "urgent"
    assert [e.operator for e in events(cli.database_url, task, ("reprioritize",))][:1] == ["frank"]
    # And a class that does not exist is one line
    code, _, err = cli("tasks", "reprioritize", str(task), "asap")
    assert code == 2 and err.splitlines()[0] == "error: priority 'asap' is not one of urgent, normal, bulk"


def test_a_cancel_that_ends_a_task_gives_its_live_output_stream_a_minute(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given a task queued for later, none of its jobs running, and a live-output stream of it
    # (an earlier attempt's lines, say) that would otherwise live its hour
    from scheduler.queue.livestream import ENDED_TTL_S

    cli.ok("submit", "command", "-t", "n-00[1-3]", "-p", "cmd=true", "--in", "1h")
    key = KEYS.output("1")
    redis_client.xadd(key, {"h": "n-001", "j": "1.0", "a": "1", "d": '[["out","hi"]]'})
    redis_client.expire(key, 3600)
    # When an operator cancels it: no job ends on a node, so no finisher would shorten it
    cli.ok("tasks", "cancel", "1")
    # Then the cancel did: followers read the last lines, then the stream goes
    assert 0 < redis_client.ttl(key) <= ENDED_TTL_S
