"""A job lost with its worker says what is known (``jobs show``): when its lease, last renewed
by a heartbeat, ran out; whether a late result proved it ran; what to check on the host.
Real redis-server and SQLite; the worker is played through the real ``Queue``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis

from scheduler.queue.client import JobResult, Queue
from scheduler.record.migrate import upgrade
from tests.submit_support import KEYS, Cli, drain, inventory


@pytest.fixture
def cli(tmp_path: Path, redis_url: str) -> Cli:
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, "[fleet]\nn-00\n")
    return cli


@pytest.mark.parametrize("late_result", [True, False])
def test_a_lost_job_says_its_last_heartbeat_whether_it_ran_and_what_to_check(
        cli: Cli, redis_client: redis.Redis, late_result: bool) -> None:
    # Given a non-idempotent job whose worker stopped renewing its lease (heartbeats) mid-run
    task = cli.submit("command", "-t", "n-00", "-p", "cmd=true", "--executor", "simulate")
    q = Queue(redis_client, KEYS)
    [job] = q.claim("node-a/1", 1, lease_ms=200).jobs
    q.extend("node-a/1", [(job.job_id, job.token)], lease_ms=300)  # its last heartbeat
    renewed_until_ms = int(redis_client.zscore(KEYS.due("normal"), job.job_id))
    time.sleep(0.35)
    assert q.claim("node-b/1", 1).lost == [job.job_id]
    if late_result:  # the silent worker comes back and reports: refused, but recorded
        q.ack("node-a/1", [(job.job_id, job.token, JobResult(0, 5, ""))])
    drain(redis_client, cli.database_url)
    # When the operator looks at the job
    view = json.loads(cli.ok("jobs", "show", job.job_id, "--output", "json"))
    note = view["lost_note"]
    # Then it says when the lease ran out, whether it ran, and what to check where
    until = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(renewed_until_ms // 1000))
    assert view["state"] == "lost"
    assert f"its last heartbeat renewed the lease until {until}" in note
    if late_result:
        assert "a late result from node-a/1 (exit code 0) proves it ran" in note
    else:
        assert "nobody knows whether it ran" in note
    assert "check on n-00 whether the change was made" in note
    assert f"fleetsched tasks retry-failed {task}" in note
    assert view["attempts"][0]["lease_expired"]
