"""Operator verbs leave SQL and Redis agreeing: ``tasks cancel`` of an aborted task is refused
(Redis keeps ``aborted``, so SQL must not say ``cancelled``), and ``tasks.priority`` follows the
task's latest ``reprioritize`` event even when two reprioritizes overlap. Real redis-server and
SQLite; no worker (jobs are claimed and failed through the real ``Queue``)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import redis

from scheduler.queue.client import JobResult, Queue
from scheduler.record.engine import make_engine
from scheduler.record.migrate import upgrade
from scheduler.submission import control
from tests.submit_support import KEYS, Cli, drain, events, inventory, sql_rows


@pytest.fixture
def cli(tmp_path: Path, redis_url: str) -> Cli:
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, "[fleet]\nn-[00:05]\n")
    return cli


def sql_task(cli: Cli, task: int):
    (row,) = sql_rows(cli.database_url, "SELECT state, priority FROM tasks WHERE id = :t", t=task)
    return row


def test_cancel_of_an_aborted_task_is_refused_and_sql_keeps_aborted_like_redis(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given a task that a failure aborted (max 1 failure), its other jobs not swept yet
    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate",
                      "--max-failures", "1")
    queue = Queue(redis_client, KEYS)
    [job] = queue.claim("w1", 1).jobs
    outcome = queue.fail_job("w1", job.job_id, job.token, JobResult(1), error="exit 1",
                             retryable=False)
    assert outcome.aborted and queue.task_state(str(task))["state"] == "aborted"
    # When an operator cancels it
    code, out, err = cli("tasks", "cancel", str(task), operator="gina")
    # Then it is refused in one line, exit code 2
    assert code == 2 and out == ""
    assert err.splitlines()[0] == f"error: task {task} is already aborted"
    assert err.splitlines()[1].startswith("hint: ")
    # And Redis and SQL both say aborted, with no cancel of gina's recorded
    drain(redis_client, cli.database_url)
    assert queue.task_state(str(task))["state"] == "aborted"
    assert sql_task(cli, task).state == "aborted"
    assert [e.operator for e in events(cli.database_url, task, ("cancel",))
            if e.operator == "gina"] == []


def test_cancel_of_an_active_task_still_cancels_it_in_both(
        cli: Cli, redis_client: redis.Redis) -> None:
    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate")
    cli.ok("tasks", "cancel", str(task), operator="gina")
    assert Queue(redis_client, KEYS).task_state(str(task))["state"] == "cancelled"
    assert sql_task(cli, task).state == "cancelled"


class PausingQueue(Queue):
    """A real Queue whose reprioritize, once its scripts ran, waits until told to go on: the
    command that reprioritized first in Redis then records in SQL last."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.scripted = threading.Event()
        self.go = threading.Event()

    def reprioritize(self, task_id: str, priority: str, operator: str) -> int:
        moved = super().reprioritize(task_id, priority, operator)
        self.scripted.set()
        assert self.go.wait(30)
        return moved


def test_overlapping_reprioritizes_end_in_the_same_class_in_sql_as_in_redis(
        cli: Cli, redis_client: redis.Redis, redis_url: str) -> None:
    # Given a normal task of 6 waiting jobs
    task = cli.submit("command", "-t", "all", "-p", "cmd=true", "--executor", "simulate")
    engine = make_engine(cli.database_url)
    slow = PausingQueue(redis.Redis.from_url(redis_url, decode_responses=True), KEYS)
    failures: list[BaseException] = []

    def first() -> None:
        try:
            control.reprioritize(engine, slow, task, "urgent", "hana")
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            failures.append(exc)

    # When hana's "urgent" runs its scripts, then ivan's "bulk" runs and records in full,
    # and only then hana's command records in SQL
    thread = threading.Thread(target=first)
    thread.start()
    assert slow.scripted.wait(30)
    control.reprioritize(engine, Queue(redis_client, KEYS), task, "bulk", "ivan")
    slow.go.set()
    thread.join(30)
    assert not failures
    # Then Redis ended in bulk (ivan's script ran last) and so does SQL
    assert Queue(redis_client, KEYS).task_state(str(task))["prio"] == "bulk"
    assert redis_client.zcard(KEYS.due("bulk")) == 6
    assert sql_task(cli, task).priority == "bulk"
    assert [e.operator for e in events(cli.database_url, task, ("reprioritize",))] == \
        ["hana", "ivan"]
    slow.client.close()
    engine.dispose()
