"""kill -9 of a node in the middle of a rollout's first wave: alone, followed by a Redis that lost
everything and a reconcile while another node runs, and with more losses than the task allows.

The dead node's jobs are found lost when their leases run out. They are not idempotent, so they
fail for good. The first loss reaches the wave's failure limit (25% of a wave of 4): the rollout
stops and the task pauses in the same Lua step (``fs_wave_failed`` in ``_lib.lua``), so the
surviving node takes nothing more of the task. After a Redis loss, reconcile recreates the task
paused *before* it queues the held jobs again, so the node, woken by the requeue, still takes
none. ``tasks continue`` then finishes the rollout. When a second loss reaches the task's own
limit (25% of 8 hosts), the task aborts instead and nothing more runs. Every run ends with the
history checker's verdict on the SQL record.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

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


@pytest.mark.parametrize("scenario", ["stop+redis-lost", "abort"])
def test_a_node_killed_mid_wave_stops_or_aborts_the_rollout_and_nothing_runs_twice(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis, start_worker,
        scenario: str) -> None:
    redis_client.flushall()
    cli = cli_with_inventory(tmp_path, redis_url, f"[web]\nweb-[01:{HOSTS:02d}]\n")
    env = {"FLEETSCHED_DATABASE_URL": cli.database_url}
    q = Queue(redis_client, KEYS)
    in_flight = 4 if scenario == "abort" else 1
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
    wait_until(lambda: len(redis_client.xrange(KEYS.events)) and q.task_state(str(task)).get(
        "running") == "0", 20, "the lost jobs found", lambda: b.tail() + dump(redis_client), [b])
    t = q.task_state(str(task))
    if scenario == "abort":
        # Then the first loss stops the wave, the second reaches the task's limit: it aborts,
        # and the two losses found after the abort count as cancelled, like the other wave
        assert t["state"] == "aborted", t
        code, out, err = cli("tasks", "wait", str(task), "--timeout", "30s")
        drain(redis_client, cli.database_url)
        assert code == 3, out + err
        assert job_states(cli.database_url, task) == ["cancelled"] * 6 + ["lost"] * 2
        assert len(events(cli.database_url, task, ("claim",))) == 4
        check(cli.database_url, redis_client)
        return
    # Then the loss failed its job for good and stopped the rollout: the task is paused
    assert (t["state"], t["wave"], t["wave_state"], t["failed"]) == ("paused", "1", "stopped", "1")
    drain(redis_client, cli.database_url)
    if scenario == "stop+redis-lost":  # (the stop alone is this scenario's first half)
        # When Redis loses everything and the operator reconciles while node-b runs
        redis_client.flushall()
        code, _, err = cli("reconcile")
        assert code == 0, err
        t = q.task_state(str(task))
        assert (t["state"], t["wave_state"]) == ("paused", "stopped"), t
        wait_until(lambda: redis_client.hexists(KEYS.workers, "node-b"), 10, "node-b back",
                   b.tail, [b])
    # Then node-b took no job of the stopped rollout: node-a's one claim is the only one
    drain(redis_client, cli.database_url)
    assert len(events(cli.database_url, task, ("claim",))) == 1
    # When the operator continues the rollout
    cli.ok("tasks", "continue", str(task))
    # Then the rest of wave 1 and all of wave 2 run on node-b, each once
    code, out, err = cli("tasks", "wait", str(task), "--timeout", "60s")
    drain(redis_client, cli.database_url)
    assert code == 3, out + err + b.tail()
    assert job_states(cli.database_url, task) == ["lost"] + ["succeeded"] * 7
    claims = events(cli.database_url, task, ("claim",))
    assert len(claims) == HOSTS and len({c.job_id for c in claims}) == HOSTS
    [lost] = events(cli.database_url, task, ("lost",))
    assert "node-a" in str(lost.data)
    # And the history checker finds every job ended once, nothing early, twice or unexplained
    check(cli.database_url, redis_client)
