"""kill -9 of a node in the middle of a rollout's first wave: alone, with one job or four in
flight, and followed by a Redis that lost everything and a reconcile.

The dead node's jobs are found lost when their leases run out. They are not idempotent, so they
end ``lost`` (never run again blindly). A lost worker is no failed host (docs/reliability.md,
"Host failure or worker loss"): the wave's failure limit (25% of a wave of 4) and the task's
(25% of 8 hosts) do not count it, so the rollout goes on on the surviving node. After a Redis
loss (the operator paused the task first), reconcile recreates the task paused before it queues
its held jobs again, so the node takes none until the operator resumes. Every run ends with the
history checker's verdict on the SQL record.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from scheduler.progress import from_task_hash
from scheduler.queue.client import Queue
from tests.faults.history import check
from tests.submit_support import KEYS, cli_with_inventory, drain, events, sql_rows
from tests.worker_support import dump, started_workers, wait_until

HOSTS = 8  # waves of 4 and 4; --max-failures 25% is 1 host per wave and 2 for the task


@pytest.fixture
def start_worker(redis_url: str, tmp_path: Path):
    with started_workers(redis_url, tmp_path / "nodes") as start:
        yield start


def job_states(url: str, task: int) -> list[str]:
    return sorted(r.state for r in sql_rows(url, "SELECT state FROM jobs WHERE task_id = :t",
                                            t=str(task)))


@pytest.mark.parametrize("scenario", ["one-in-flight+redis-lost", "four-in-flight"])
def test_a_node_killed_mid_wave_loses_its_jobs_and_the_rollout_goes_on_running_nothing_twice(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis, start_worker,
        scenario: str) -> None:
    redis_client.flushall()
    cli = cli_with_inventory(tmp_path, redis_url, f"[web]\nweb-[01:{HOSTS:02d}]\n")
    env = {"FLEETSCHED_DATABASE_URL": cli.database_url}
    q = Queue(redis_client, KEYS)
    in_flight = 4 if scenario == "four-in-flight" else 1
    # Given a rollout of non-idempotent 0.8 s jobs in two waves of 4, `in_flight` at a time
    task = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--executor", "simulate",
                      "--executor-option", "duration_ms=800", "--not-idempotent",
                      "--waves", "4,100%", "--max-failures", "25%", "--retries", "0",
                      "--max-concurrency", str(in_flight))
    a = start_worker("node-a", slots=4, processes=1, lease="1s", env=env)
    wait_until(lambda: q.task_state(str(task)).get("running") == str(in_flight), 15,
               "wave 1 running on node-a", a.tail, [a])
    # When node-a is killed with its jobs in flight, while node-b runs
    a.kill9()
    b = start_worker("node-b", slots=4, processes=1, lease="1s", env=env)
    wait_until(lambda: q.task_state(str(task)).get("lost_failed") == str(in_flight), 20,
               "the lost jobs found", lambda: b.tail() + dump(redis_client), [b])
    # Then the losses ended their jobs as lost, but neither stopped the wave nor aborted
    t = q.task_state(str(task))
    assert t["state"] == "active" and t["wave_state"] == "running", t
    assert t.get("wave_failures", "0") == "0" and t.get("failed_hosts", "0") == "0", t
    if scenario.endswith("redis-lost"):
        # When the operator pauses the task, Redis loses everything and the operator reconciles
        cli.ok("tasks", "pause", str(task))
        wait_until(lambda: q.task_state(str(task)).get("running") == "0", 15,
                   "running jobs to finish", b.tail, [b])
        drain(redis_client, cli.database_url)
        redis_client.flushall()
        cli.env.update(FLEETSCHED_LEASE_MS="2000", FLEETSCHED_HEARTBEAT_MS="600")  # node-b's
        code, _, err = cli("reconcile")
        assert code == 0, err
        # Then the task is back paused: node-b takes nothing until the operator resumes
        assert q.task_state(str(task))["state"] == "paused"
        wait_until(lambda: redis_client.hexists(KEYS.workers, "node-b"), 10, "node-b back",
                   b.tail, [b])
        cli.ok("tasks", "resume", str(task))
    # Then the rest of both waves run on node-b, each job once (its end drained into SQL
    # before `tasks wait`: these nodes run no recorder, and the wait would give the record 15 s)
    wait_until(lambda: from_task_hash(q.task_state(str(task))).ended, 60, "the task to end",
               b.tail, [b])
    drain(redis_client, cli.database_url)
    code, out, err = cli("tasks", "wait", str(task), "--timeout", "60s")
    assert code == 3, out + err + b.tail()
    assert "record is behind" not in out + err, out + err
    assert job_states(cli.database_url, task) == ["lost"] * in_flight + \
        ["succeeded"] * (HOSTS - in_flight)
    claims = events(cli.database_url, task, ("claim",))
    assert len(claims) == HOSTS and len({c.job_id for c in claims}) == HOSTS
    lost = events(cli.database_url, task, ("lost",))
    assert len(lost) == in_flight and all("node-a" in str(e.data) for e in lost)
    # And the history checker finds every job ended once, nothing early, twice or unexplained
    check(cli.database_url, redis_client)
