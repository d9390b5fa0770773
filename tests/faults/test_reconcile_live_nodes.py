"""Redis lost its data while worker nodes run: reconcile asks the live nodes before it rebuilds.

A node's heartbeat lists the jobs it runs (with their tokens) in its presence. After Redis
restarted empty, reconcile waits for those reports (or a lease), puts back every job a live
node runs under that node's token, so the node's ack ends it (it never runs twice, even when
SQL never heard of its claim), and ends as lost every started non-idempotent job that no live
node runs, so its task ends. Real worker nodes on a real Redis; the history checker judges the
SQL record. docs/reliability.md, "Reconcile and live nodes".
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import redis

from scheduler.queue.client import Queue
from tests.faults.history import check
from tests.submit_support import KEYS, cli_with_inventory, drain, events, sql_rows
from tests.worker_support import dump, started_workers, wait_until


@pytest.fixture
def start_worker(redis_url: str, tmp_path: Path):
    with started_workers(redis_url, tmp_path / "nodes") as start:
        yield start


def job_states(url: str, task: int) -> dict[str, str]:
    return {r.id: r.state for r in sql_rows(url, "SELECT id, state FROM jobs WHERE task_id = :t",
                                            t=str(task))}


@pytest.mark.parametrize("recorded", ["claim recorded", "claim never recorded"])
def test_a_job_a_live_node_runs_is_put_back_under_its_token_and_never_runs_twice(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis, start_worker,
        recorded: str) -> None:
    cli = cli_with_inventory(tmp_path, redis_url, "[web]\nweb-01\nweb-02\n")
    env = {"FLEETSCHED_DATABASE_URL": cli.database_url}
    q = Queue(redis_client, KEYS)
    # Given a non-idempotent task whose two jobs run on a live node until the test releases
    # them, after reconcile (jobs of a fixed length, 12 s then 25 s, ended before reconcile
    # asked on loaded CI runs, and were then settled by their late results)
    release = tmp_path / "release"
    task = cli.submit("command", "-t", "group:web", "-p",
                      f"cmd=sh -c 'while [ ! -e {release} ]; do sleep 0.1; done'",
                      "--executor", "local", "--not-idempotent")
    node = start_worker("node-a", slots=2, processes=1, lease="2s", env=env)
    wait_until(lambda: q.task_state(str(task)).get("running") == "2", 15, "both running",
               node.tail, [node])
    if recorded == "claim recorded":
        drain(redis_client, cli.database_url)  # SQL says running
    # (else SQL still says pending: the recorder was behind by the claims)
    # When Redis loses everything and the operator reconciles while the node runs
    redis_client.flushall()
    # a lease of 8 s: reconcile waits for the nodes' reports (a heartbeat, 1 s) or the lease
    cli.env.update(FLEETSCHED_LEASE_MS="8000", FLEETSCHED_HEARTBEAT_MS="1000")
    started = time.monotonic()
    code, out, err = cli("reconcile", "-o", "json")
    assert code == 0, out + err
    # Then both jobs were found on the node (before the wait ran out) and put back running
    # under its tokens, nothing queued again
    assert '"jobs_adopted": 2' in out and '"jobs_requeued": 0' in out, out + err
    assert time.monotonic() - started < 8, "reconcile waited the lease, not the nodes' reports"
    assert {redis_client.hget(KEYS.job(f"{task}.{k}"), "state") for k in (0, 1)} == {"running"}
    # And once they end, the node's acks end them: each ran once, the task succeeded
    release.touch()
    code, out, err = cli("tasks", "wait", str(task), "--timeout", "60s")
    assert code == 0, out + err + node.tail() + dump(redis_client)
    drain(redis_client, cli.database_url)
    assert job_states(cli.database_url, task) == {f"{task}.0": "succeeded", f"{task}.1": "succeeded"}
    assert len(events(cli.database_url, task, ("adopt",))) == 2
    assert not events(cli.database_url, task, ("stale",))
    check(cli.database_url, redis_client)


def test_a_started_non_idempotent_job_no_live_node_runs_ends_as_lost_and_its_task_ends(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis, start_worker) -> None:
    cli = cli_with_inventory(tmp_path, redis_url, "[web]\nweb-01\nweb-02\nweb-03\n")
    env = {"FLEETSCHED_DATABASE_URL": cli.database_url}
    q = Queue(redis_client, KEYS)
    # Given a non-idempotent task, two of its three jobs running on a node (one at a time)
    task = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--executor", "simulate",
                      "--executor-option", "duration_ms=3000", "--not-idempotent",
                      "--max-concurrency", "2")
    node = start_worker("node-a", slots=2, processes=1, lease="2s", env=env)
    wait_until(lambda: q.task_state(str(task)).get("running") == "2", 15, "two running",
               node.tail, [node])
    drain(redis_client, cli.database_url)
    # When the node dies with them and Redis loses everything
    node.kill9()
    redis_client.flushall()
    cli.env.update(FLEETSCHED_LEASE_MS="1000", FLEETSCHED_HEARTBEAT_MS="500")
    code, out, err = cli("reconcile", "-o", "json")
    assert code == 0, out + err
    # Then the two started jobs end as lost (never run again), the third is queued again
    assert '"jobs_not_rerun": 2' in out and '"jobs_requeued": 1' in out, out + err
    drain(redis_client, cli.database_url)
    states = job_states(cli.database_url, task)
    assert sorted(states.values()) == ["lost", "lost", "pending"], states
    # And once a node runs the third, the task ends (its counters add up)
    # (these nodes run no recorder: the test drains the stream into SQL before `tasks wait`,
    # which would otherwise give the record 15 s to list the failed hosts, and warn)
    other = start_worker("node-b", slots=2, processes=1, lease="2s", env=env)
    wait_until(lambda: q.task_state(str(task)).get("succeeded") == "1", 30, "the third to end",
               other.tail, [other])
    drain(redis_client, cli.database_url)
    code, out, err = cli("tasks", "wait", str(task), "--timeout", "30s")
    assert code == 3, out + err + other.tail()
    assert "record is behind" not in out + err, out + err
    assert sorted(job_states(cli.database_url, task).values()) == ["lost", "lost", "succeeded"]
    check(cli.database_url, redis_client)


def test_a_run_that_ended_after_the_loss_is_decided_by_its_late_result(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis, start_worker) -> None:
    cli = cli_with_inventory(tmp_path, redis_url, "[web]\nweb-01\n")
    env = {"FLEETSCHED_DATABASE_URL": cli.database_url}
    q = Queue(redis_client, KEYS)
    # Given a non-idempotent 2 s job running on a node, recorded as running
    task = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--executor", "simulate",
                      "--executor-option", "duration_ms=2000", "--not-idempotent")
    node = start_worker("node-a", slots=1, processes=1, lease="2s", env=env)
    wait_until(lambda: q.task_state(str(task)).get("running") == "1", 15, "running",
               node.tail, [node])
    drain(redis_client, cli.database_url)
    # When Redis loses everything, and the run ends before anyone reconciles: its ack is
    # refused (Redis knows no such job) and recorded, with its exit code
    redis_client.flushall()
    wait_until(lambda: [e for e in redis_client.xrange(KEYS.events)
                        if e[1].get("kind") == "stale"], 15, "the refused ack", node.tail, [node])
    drain(redis_client, cli.database_url)
    cli.env.update(FLEETSCHED_LEASE_MS="1000", FLEETSCHED_HEARTBEAT_MS="500")
    code, out, err = cli("reconcile", "-o", "json")
    assert code == 0, out + err
    # Then the late result decides it: succeeded, never lost, never run again
    assert '"jobs_decided": 1' in out and '"jobs_not_rerun": 0' in out, out + err
    drain(redis_client, cli.database_url)
    assert job_states(cli.database_url, task) == {f"{task}.0": "succeeded"}
    assert len(events(cli.database_url, task, ("claim",))) == 1
    code, out, err = cli("tasks", "wait", str(task), "--timeout", "10s")
    assert code == 0, out + err
    check(cli.database_url, redis_client)


def test_reconcile_copies_the_service_windows_back_into_a_redis_that_lost_them(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> None:
    # Given a window in SQL and in Redis, then a Redis that lost its data
    cli = cli_with_inventory(tmp_path, redis_url, "[web]\nweb-01\n")
    cli.ok("windows", "add", "tuesdays", "--rrule", "FREQ=WEEKLY;BYDAY=TU;BYHOUR=2",
           "--duration", "2h", "--tz", "UTC")
    assert redis_client.exists(KEYS.window("tuesdays"))
    redis_client.flushall()
    # When reconcile runs
    out = cli.ok("reconcile", "--nodes-stopped", "-o", "json")
    # Then the window is back where the claim path reads it (no job of a task in windows
    # waits for a `windows sync` with "window ... is not in Redis")
    assert '"windows_restored": 1' in out, out
    assert redis_client.hget(KEYS.window("tuesdays"), "rrule")
