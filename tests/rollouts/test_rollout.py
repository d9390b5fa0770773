"""Rollout policy with real worker processes (simulate executor), measured from the audit
record in SQL: the concurrency limit, the abort after the failure threshold with its honest
overshoot, and what idempotency decides about a lost job."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis

from scheduler.queue.client import Queue
from scheduler.record.migrate import upgrade
from tests.submit_support import KEYS, Cli, drain, events, inventory, max_overlap, sql_rows
from tests.worker_support import WorkerProcess, wait_until, worker_args


@pytest.fixture
def cli(tmp_path: Path, redis_url: str) -> Cli:
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, "[fleet]\nn-[000:059]\n")
    return cli


@pytest.fixture
def workers(tmp_path: Path, redis_url: str):
    started: list[WorkerProcess] = []

    def start(n: int, *, slots: int = 6, lease: str = "5s") -> list[WorkerProcess]:
        for i in range(n):
            w = WorkerProcess(redis_url, tmp_path, worker_args(f"ro-{len(started)}", slots=slots,
                                                               processes=1, lease=lease)).start()
            started.append(w)
        return started[-n:]

    yield start
    for w in started:
        w.stop()


def live(client: redis.Redis, task: int) -> dict[str, str]:
    return Queue(client, KEYS).task_state(str(task))


def finished(client: redis.Redis, task: int) -> bool:
    t = live(client, task)
    return int(t["succeeded"]) + int(t["failed"]) + int(t["cancelled"]) == int(t["total"])


@pytest.mark.parametrize("limit, expected", [("5", 5), ("10%", 6)])
def test_never_more_than_max_concurrency_jobs_of_a_task_run_at_once(
        cli: Cli, redis_client: redis.Redis, workers, limit: str, expected: int) -> None:
    # Given 60 jobs of ~50 ms and two nodes with 12 slots between them
    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate",
                      "--executor-option", "duration_ms=50", "--executor-option", "jitter_ms=30",
                      "--max-concurrency", limit)
    nodes = workers(2)
    # When they work it through
    wait_until(lambda: finished(redis_client, task), 60, "the task to end",
               lambda: nodes[0].tail(), nodes)
    drain(redis_client, cli.database_url)
    # Then the audit record in SQL shows every job run, and the limit held and was reached
    assert len(events(cli.database_url, task, ("ack",))) == 60
    assert max_overlap(cli.database_url, task) == expected
    assert events(cli.database_url, task, ("park",))  # jobs over the limit waited in line


def test_the_failure_threshold_aborts_cancels_pending_jobs_and_reports_the_overshoot(
        cli: Cli, redis_client: redis.Redis, workers) -> None:
    # Given a task whose every job fails, 8 at a time, abort after 3 failures, no retries
    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate",
                      "--executor-option", "duration_ms=300", "--executor-option",
                      "failure_rate=1", "--retries", "0", "--max-concurrency", "8",
                      "--max-failures", "3")
    nodes = workers(1, slots=8)
    # When it runs: the first wave of 8 all fail
    wait_until(lambda: finished(redis_client, task), 30, "the task to end",
               lambda: nodes[0].tail(), nodes)
    drain(redis_client, cli.database_url)
    t = live(redis_client, task)
    # Then it aborted at 3 failures; the rest of the first wave failed after the threshold
    # (overshoot), every job not started was cancelled, and none was claimed after the abort
    assert t["state"] == "aborted"
    assert int(t["failed"]) == 3 + int(t["overshoot"]) and int(t["overshoot"]) >= 1
    claims = len(events(cli.database_url, task, ("claim",)))
    assert claims == int(t["failed"]) and int(t["cancelled"]) == 60 - claims
    order = [e.kind for e in events(cli.database_url, task, ("abort", "claim"))]
    assert "claim" not in order[order.index("abort"):]
    # And `tasks show` says so honestly
    shown = json.loads(cli.ok("tasks", "show", str(task), "-o", "json"))
    assert shown["state"] == "aborted" and shown["live"]["overshoot"] == t["overshoot"]
    assert (f"aborted at 3 failures, and {t['overshoot']} more failure(s) came in after the "
            "threshold from jobs already running") in shown["summary"]
    assert shown["jobs"] == {"cancelled": 60 - claims, "failed": claims}


def test_idempotency_decides_whether_a_lost_job_runs_again(
        cli: Cli, redis_client: redis.Redis, workers) -> None:
    # Given two tasks of one long job each: command (not idempotent) and the same overridden
    plain = cli.submit("command", "-t", "n-000", "-p", "cmd=true", "--executor", "simulate",
                       "--executor-option", "duration_ms=4000")
    overridden = cli.submit("command", "-t", "n-001", "-p", "cmd=true", "--executor", "simulate",
                            "--executor-option", "duration_ms=4000", "--idempotent")
    assert (live(redis_client, plain)["idempotent"], live(redis_client, overridden)["idempotent"]) == ("0", "1")
    # When the node running both is killed and another takes over after the lease
    (first,) = workers(1, lease="1s")
    wait_until(lambda: live(redis_client, plain)["running"] == "1" == live(redis_client, overridden)["running"],
               15, "both jobs running", first.tail, [first])
    first.kill9()
    time.sleep(1.2)
    (second,) = workers(1, lease="3s")
    wait_until(lambda: finished(redis_client, plain) and finished(redis_client, overridden), 30,
               "both tasks to end", second.tail, [second])
    drain(redis_client, cli.database_url)
    # Then the non-idempotent job failed as lost, never run twice; the idempotent one ran again
    assert (live(redis_client, plain)["failed"], live(redis_client, overridden)["succeeded"]) == ("1", "1")
    (lost,) = sql_rows(cli.database_url, "SELECT error FROM jobs WHERE task_id = :t", t=plain)
    assert "not run again because the action is not idempotent" in lost.error
    assert len(events(cli.database_url, plain, ("claim",))) == 1
    assert len(events(cli.database_url, overridden, ("claim",))) == 2
