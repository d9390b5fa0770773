"""The queue's identity (``scheduler.record.epoch``): after Redis lost or replaced its data,
``status``, ``doctor``, the exporter and a worker node say so in one line with the fix, and
``fleetsched reconcile`` makes the queue whole again, epoch included. On a real redis-server
and a SQLite record (PostgreSQL too where the SQL side alone is under test)."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
import redis

from scheduler.config import Settings
from scheduler.monitoring.exporter import registry_for
from scheduler.queue.shards import Shards
from scheduler.record import epoch
from scheduler.record.engine import make_engine
from scheduler.record.migrate import upgrade
from tests.submit_support import KEYS, Cli, cli_with_inventory
from tests.worker_support import WorkerProcess, events, wait_until, worker_args
from workers.config import NodeConfig
from workers.heartbeat import Heartbeat
from workers.slots import Slots

SHARDS = Shards(KEYS.prefix, 1)
LATER = ("-p", "cmd=true", "--executor", "simulate", "--in", "1h")  # nothing due: no worker needed


def status(cli: Cli, command: str = "status") -> tuple[int, dict, str]:
    code, out, err = cli(command, "--output", "json")
    assert "Traceback" not in err
    return code, {c["check"]: c for c in json.loads(out)["checks"]}, err


def sql_epoch(cli: Cli) -> str | None:
    engine = make_engine(cli.database_url)
    try:
        with engine.connect() as conn:
            return epoch.read_sql(conn, KEYS.prefix).epoch
    finally:
        engine.dispose()


def first_start(cli: Cli, client: redis.Redis) -> str:
    """What the first worker node with the record does: give the queue its epoch."""
    engine = make_engine(cli.database_url)
    try:
        given = epoch.ensure(engine, client, KEYS)
    finally:
        engine.dispose()
    assert given is not None
    return given


def epoch_ok(cli: Cli) -> float | None:
    settings = Settings(redis_url=cli.redis_url, database_url=cli.database_url)
    registry, engine = registry_for(settings)
    try:
        return registry.get_sample_value("fleetsched_queue_epoch_ok")
    finally:
        engine.dispose()


@pytest.fixture
def cli(tmp_path: Path, redis_url: str) -> Cli:
    return cli_with_inventory(tmp_path, redis_url, "[web]\nweb-[01:03]\n")


def test_status_doctor_and_the_exporter_say_redis_lost_the_queue_and_reconcile_makes_it_whole(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given a task due in an hour, on a queue the first node gave its epoch
    task = cli.submit("command", "-t", "web-01,web-02", *LATER)
    given = first_start(cli, redis_client)
    code, checks, _ = status(cli)
    assert code == 0 and checks["epoch"]["level"] == "ok", checks
    assert epoch_ok(cli) == 1
    # When Redis comes back empty (no AOF, a replaced server)
    redis_client.flushall()
    # Then status and doctor fail on the epoch, in one line with the fix, and the gauge is 0
    for command in ("status", "doctor"):
        code, checks, err = status(cli, command)
        assert code == 1, (command, checks)
        found = checks["epoch"]
        assert found["level"] == "fail"
        assert found["message"].startswith("Redis has no queue epoch")
        assert "lost or replaced its data" in found["message"] and "\n" not in found["message"]
        assert "fleetsched reconcile" in found["hint"]
    code, checks, err = status(cli)
    assert [name for name, c in checks.items() if c["level"] == "fail"] == ["epoch"]
    assert "unhealthy: epoch" in err
    assert epoch_ok(cli) == 0
    # When the operator reconciles
    cli.ok("reconcile", "--nodes-stopped")
    # Then Redis holds the task and the epoch SQL records again: all is well
    assert redis_client.get(KEYS.epoch) == given == sql_epoch(cli)
    assert redis_client.exists(KEYS.task(str(task)))
    code, checks, _ = status(cli)
    assert code == 0 and checks["epoch"]["level"] == "ok", checks
    assert epoch_ok(cli) == 1


def test_a_redis_that_lost_a_queue_which_never_had_an_epoch_is_found_by_its_tasks(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given tasks submitted before any node gave the queue an epoch (an upgraded install)
    first = cli.submit("command", "-t", "web-01", *LATER)
    second = cli.submit("command", "-t", "web-02", *LATER)
    code, checks, _ = status(cli)
    assert code == 0 and "no queue epoch yet" in checks["epoch"]["message"]
    # When Redis loses everything
    redis_client.flushall()
    # Then status names the tasks SQL calls active that Redis no longer holds
    code, checks, _ = status(cli)
    assert code == 1
    assert checks["epoch"]["message"].startswith(
        f"Redis holds none of the 2 tasks SQL calls active (newest: {second}, {first})")
    assert epoch_ok(cli) == 0
    # And a node's first start gives the queue an epoch, but the check still fails
    first_start(cli, redis_client)
    assert status(cli)[0] == 1


def test_a_redis_holding_another_epoch_or_lacking_its_newest_task_fails_status(
        cli: Cli, redis_client: redis.Redis) -> None:
    older = cli.submit("command", "-t", "web-01", *LATER)
    newer = cli.submit("command", "-t", "web-02", *LATER)
    given = first_start(cli, redis_client)
    # When Redis lost its last write (the newest task's hash)
    redis_client.delete(KEYS.task(str(newer)))
    code, checks, _ = status(cli)
    assert code == 1
    assert checks["epoch"]["message"].startswith(
        f"Redis lacks 1 of the 2 newest tasks SQL calls active ({newer})")
    assert redis_client.exists(KEYS.task(str(older)))
    # When Redis holds another queue's epoch instead
    cli.ok("reconcile", "--nodes-stopped")
    redis_client.set(KEYS.epoch, "0123456789abcdef")
    code, checks, _ = status(cli)
    assert code == 1
    assert checks["epoch"]["message"].startswith(
        f"Redis holds another queue's epoch (0123456789abcdef; SQL records {given})")
    assert "redis_url" in checks["epoch"]["hint"]


def test_two_first_starts_at_once_agree_on_one_epoch_and_a_lost_one_is_never_replaced(
        database_url: str, redis_client: redis.Redis) -> None:
    upgrade(database_url)
    engine = make_engine(database_url)
    try:
        # Given eight nodes giving a new queue its epoch at the same moment
        barrier = threading.Barrier(8)
        got: list[str | None] = []

        def start() -> None:
            barrier.wait()
            got.append(epoch.ensure(engine, redis_client, KEYS))

        threads = [threading.Thread(target=start) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        # Then all agree, with Redis and with SQL
        assert len(got) == 8 and len(set(got)) == 1 and got[0] is not None
        assert redis_client.get(KEYS.epoch) == got[0]
        assert epoch.check(engine, redis_client, SHARDS).ok
        # When Redis loses it, a later start does not hide the loss behind a new epoch
        redis_client.flushall()
        assert epoch.ensure(engine, redis_client, KEYS) == got[0]
        assert redis_client.get(KEYS.epoch) is None
        verdict = epoch.check(engine, redis_client, SHARDS)
        assert not verdict.ok and verdict.message.startswith("Redis has no queue epoch")
        # and restoring it (reconcile's last step) writes SQL's back
        assert epoch.restore(engine, redis_client, KEYS) == got[0]
        assert epoch.check(engine, redis_client, SHARDS).ok
    finally:
        engine.dispose()


def test_a_node_started_on_a_queue_that_lost_its_data_refuses_in_one_line_and_claims_nothing(
        cli: Cli, redis_client: redis.Redis, tmp_path: Path) -> None:
    # Given a queue a node (with its recorder) started on once, then Redis lost its data
    args = [a for a in worker_args("node-e", slots=2, processes=1) if a != "--no-recorder"]
    env = {"FLEETSCHED_DATABASE_URL": cli.database_url}
    w = WorkerProcess(cli.redis_url, tmp_path / "a", args, env=dict(env)).start()
    try:
        w.wait_registered(redis_client, timeout=30)
    finally:
        w.stop()
    assert sql_epoch(cli) is not None and redis_client.get(KEYS.epoch) == sql_epoch(cli)
    redis_client.flushall()
    # and a task submitted since, due now
    cli.submit("command", "-t", "web-03", "-p", "cmd=true", "--executor", "simulate")
    # When a node starts
    w = WorkerProcess(cli.redis_url, tmp_path / "b", args, env=dict(env)).start()
    try:
        rc = w.wait(60)
    finally:
        w.stop()
    # Then it stops with one line saying what Redis lost and the fix, and claimed nothing
    log = w.log.read_text()
    errors = [line for line in log.splitlines() if line.startswith("error:")]
    assert rc == 1, log
    assert len(errors) == 1 and "Redis has no queue epoch" in errors[0], log
    assert "hint:" in log and "fleetsched reconcile" in log
    assert not events(redis_client, ["claim"])
    # When the operator reconciles, a node starts again
    cli.ok("reconcile", "--nodes-stopped")
    w = WorkerProcess(cli.redis_url, tmp_path / "c", args, env=dict(env)).start()
    try:
        w.wait_registered(redis_client, timeout=30)
        assert w.proc is not None and w.proc.poll() is None
    finally:
        w.stop()


def test_a_running_node_logs_one_error_line_when_redis_loses_the_queue_and_one_when_it_is_back(
        redis_client: redis.Redis, caplog: pytest.LogCaptureFixture) -> None:
    # Given a node's heartbeat, started on the queue's epoch
    redis_client.set(KEYS.epoch, "feedfacefeedface")
    config = NodeConfig(Settings(), slots=1, processes=1, worker_id="beat")
    beat = Heartbeat(None, redis_client, KEYS, config, Slots(1))
    beat.expect_epoch("feedfacefeedface")
    caplog.set_level(logging.INFO, logger="workers.heartbeat")

    def said() -> list[logging.LogRecord]:  # the node's lines (a loaded machine adds redis-py's)
        return [r for r in caplog.records if r.name == "workers.heartbeat"]

    beat.watch_epoch()
    assert not said()
    # When Redis comes back empty, and the node beats on
    redis_client.flushall()
    for _ in range(3):
        beat.watch_epoch()
    # Then it said so once, as an error naming the fix
    errors = [r for r in said() if r.levelno == logging.ERROR]
    assert len(errors) == 1 and beat.epoch_lost
    assert "the queue lost its data" in errors[0].getMessage()
    assert "fleetsched reconcile" in errors[0].getMessage()
    # When reconcile writes the epoch back
    redis_client.set(KEYS.epoch, "feedfacefeedface")
    beat.watch_epoch()
    beat.watch_epoch()
    # Then it says once that the queue is back
    assert not beat.epoch_lost
    backs = [r for r in said() if "is back" in r.getMessage()]
    assert len(backs) == 1 and len(said()) == 2
