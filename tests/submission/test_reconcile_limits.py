"""Reconcile after Redis lost everything, for what rollouts and limits keep in Redis: a group
limit (``{P}:glimit``, which claim enforces) and a rollout paused by its wave's failure limit
(``tasks continue`` must still resume it). Through the CLI, on a real redis-server and SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from scheduler.queue.client import JobResult, Queue
from tests.submit_support import KEYS, Cli, cli_with_inventory, drain


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> Cli:
    redis_client.flushall()
    return cli_with_inventory(tmp_path, redis_url, "[web]\nweb-[01:04]\n")


def test_a_group_limit_holds_again_after_redis_lost_everything(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given a group limit of 1 on web and a task on its 4 hosts, recorded in SQL
    cli.ok("groups", "limit", "web", "--max-busy", "1")
    cli.submit("command", "-t", "group:web", "-p", "cmd=true")
    drain(redis_client, cli.database_url)
    # When Redis loses everything and the operator reconciles
    redis_client.flushall()
    code, _, err = cli("reconcile", "--nodes-stopped")
    assert code == 0, err
    assert "restored 1 group limit(s) from SQL" in err
    # Then the limit holds again: one claim takes one job
    assert redis_client.hgetall(KEYS.glimit) == {"web": "1"}
    assert len(Queue(redis_client, KEYS).claim("w", 10).jobs) == 1
    # And a second reconcile has nothing to restore
    code, _, err = cli("reconcile", "--nodes-stopped")
    assert code == 0 and "group limit" not in err, err


def test_continue_resumes_a_stopped_rollout_recreated_by_reconcile(
        cli: Cli, redis_client: redis.Redis) -> None:
    q = Queue(redis_client, KEYS)
    # Given a rollout stopped (and paused) by its first wave's failure, recorded in SQL
    task = str(cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--waves", "3,100%",
                          "--max-failures", "30%", "--max-concurrency", "1"))
    [job] = q.claim("w", 10).jobs
    q.fail_job("w", job.job_id, job.token, JobResult(1), error="boom", retryable=False)
    assert q.task_state(task)["wave_state"] == "stopped"
    drain(redis_client, cli.database_url)
    # When Redis loses everything, the operator reconciles and continues the rollout
    redis_client.flushall()
    assert cli("reconcile", "--nodes-stopped")[0] == 0
    t = q.task_state(task)
    assert (t["state"], t["wave_state"], t.get("wave_held")) == ("paused", "stopped", "1")
    assert q.claim("w", 10).jobs == []  # paused before its jobs were queued again
    cli.ok("tasks", "continue", task)
    # Then the wave's held jobs run again
    assert q.task_state(task)["state"] == "active"
    assert len(q.claim("w", 10).jobs) == 1  # --max-concurrency 1


def test_a_rollout_rebuilt_by_reconcile_keeps_the_failures_its_wave_had_counted(
        cli: Cli, redis_client: redis.Redis) -> None:
    q = Queue(redis_client, KEYS)
    # Given a rollout of web's 4 hosts in waves of 3 and 1, whose limit of 60% is 2 failed hosts
    # in the first wave (3 in the task), and one host of the first wave failed for good,
    # recorded in SQL
    task = str(cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--waves", "3,100%",
                          "--max-failures", "60%", "--retries", "0", "--max-concurrency", "1"))
    [job] = q.claim("w", 10).jobs
    q.fail_job("w", job.job_id, job.token, JobResult(1), error="boom", retryable=False)
    assert q.task_state(task)["wave_state"] == "running"
    drain(redis_client, cli.database_url)
    # When Redis loses everything and the operator reconciles
    redis_client.flushall()
    assert cli("reconcile", "--nodes-stopped")[0] == 0
    # Then the rebuilt wave still counts that failure (and the task its failed job)
    t = q.task_state(task)
    assert (t["wave_failures"], t["failed"], t["total"]) == ("1", "1", "4")
    # And the next failure reaches the wave's limit and stops the rollout, as it would have
    [job] = q.claim("w", 10).jobs
    q.fail_job("w", job.job_id, job.token, JobResult(1), error="boom", retryable=False)
    t = q.task_state(task)
    assert (t["wave_state"], t["state"]) == ("stopped", "paused"), t


def test_a_percentage_group_limit_follows_the_group_when_the_inventory_grows(
        cli: Cli, tmp_path: Path, redis_client: redis.Redis) -> None:
    # Given web limited to 50% of its 4 hosts (2 jobs), known to Redis through a task
    cli.ok("groups", "limit", "web", "--max-busy", "50%")
    cli.submit("command", "-t", "group:web", "-p", "cmd=true")
    assert redis_client.hgetall(KEYS.glimit) == {"web": "2"}
    # When an import grows web to 8 hosts and moves web-04 out of it
    (tmp_path / "grown.ini").write_text("[web]\nweb-[01:03]\nweb-[05:09]\n[other]\nweb-04\n")
    code, _, err = cli("hosts", "import", str(tmp_path / "grown.ini"), "--prune")
    assert code == 0, err
    # Then the limit is 50% of 8 hosts, and web-04 no longer counts in web
    assert "group limits: 1 updated in Redis" in err, err
    assert redis_client.hgetall(KEYS.glimit) == {"web": "4"}
    assert redis_client.hget(KEYS.host("web-04"), "limits") == ""
    assert redis_client.hget(KEYS.host("web-01"), "limits") == "web"


def test_removing_a_limited_group_or_a_host_updates_the_limits_redis_enforces(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given web limited to 50% of its 4 hosts, known to Redis through a task
    cli.ok("groups", "limit", "web", "--max-busy", "50%")
    cli.submit("command", "-t", "group:web", "-p", "cmd=true")
    assert redis_client.hgetall(KEYS.glimit) == {"web": "2"}
    # When a host is removed by hand, the limit follows the group's size (50% of 3: 2)...
    cli.ok("hosts", "remove", "web-04")
    assert redis_client.hgetall(KEYS.glimit) == {"web": "2"}
    cli.ok("hosts", "remove", "web-03")
    assert redis_client.hgetall(KEYS.glimit) == {"web": "1"}
    # ...and when the group is removed, Redis no longer enforces its limit
    code, _, err = cli("groups", "remove", "web")
    assert code == 0 and "group limits: 1 updated in Redis" in err, err
    assert redis_client.hgetall(KEYS.glimit) == {}
    assert redis_client.hget(KEYS.host("web-01"), "limits") == ""
