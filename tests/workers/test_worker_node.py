"""The node master as a real process (``python -m scheduler worker``) on a real Redis: claiming, running,
acking, failing, heartbeats, sharing work between two masters, and SIGTERM.

Leases are 1-2 s so the whole file stays fast; the simulate executor stands in for the hosts
(the SSH path has its own test file).
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
import redis

from scheduler.queue.client import Queue
from tests.worker_support import (
    KEYS,
    claims_per_job,
    dump,
    events,
    final_outcomes,
    started_workers,
    submit,
    wait_until,
)


@pytest.fixture
def start_worker(redis_url: str, tmp_path: Path):
    with started_workers(redis_url, tmp_path) as start:
        yield start


def acked(client: redis.Redis, job_ids: list[str]) -> bool:
    return all(v == "acked" for v in final_outcomes(client, job_ids).values())


def test_a_node_runs_due_jobs_and_acks_each_once_with_its_result(redis_client, start_worker) -> None:
    # Given 40 due jobs
    jobs = submit(redis_client, "1", 40, params={"cmd": ["fw-check", "{host.name}"]})
    # When one node serves the queue
    w = start_worker("node-a", slots=8, processes=2)
    wait_until(lambda: acked(redis_client, jobs), 20, "every job acked",
               lambda: w.tail() + dump(redis_client), [w])
    # Then each job was claimed once and its ack carries exit code, duration and output
    assert set(claims_per_job(redis_client).values()) == {1}
    acks = events(redis_client, ("ack",))
    assert len(acks) == 40 and {a["worker"] for a in acks} == {"node-a"}
    first = next(a for a in acks if a["job"] == "1.3")
    assert first["exit_code"] == "0" and int(first["duration_ms"]) >= 0
    output = json.loads(first["output"])
    assert output[0]["command"] == "fw-check 1-h3" and "[simulated] 1-h3" in output[0]["stdout_head"]


def test_the_node_reports_its_heartbeat_in_the_workers_hash_and_leaves_it_on_exit(
        redis_client, start_worker) -> None:
    w = start_worker("node-hb", slots=6, processes=2, lease="1500ms")
    w.wait_registered(redis_client)
    first = json.loads(redis_client.hget(KEYS.workers, "node-hb"))
    assert first["slots"] == 6 and first["busy"] == 0 and first["pid"] == w.proc.pid
    # The beat is renewed at a third of the lease
    wait_until(lambda: json.loads(redis_client.hget(KEYS.workers, "node-hb"))["ms"] > first["ms"],
               3, "a second heartbeat", w.tail)
    w.signal(signal.SIGTERM)
    assert w.wait(15) == 0
    assert not redis_client.hexists(KEYS.workers, "node-hb")


def test_an_unknown_action_or_host_fails_for_good_with_a_clear_error(redis_client, start_worker) -> None:
    # Given a task naming an action that does not exist, and a job whose host has no data
    bad_action = submit(redis_client, "2", 1, action="no-such-action")
    unknown_host = submit(redis_client, "3", ["ghost-01"], write_hosts=False)
    w = start_worker("node-b")
    jobs = bad_action + unknown_host
    wait_until(lambda: all(v == "failed" for v in final_outcomes(redis_client, jobs).values()),
               15, "both jobs failed", lambda: w.tail() + dump(redis_client), [w])
    fails = {e["job"]: e for e in events(redis_client, ("fail",))}
    assert "unknown action 'no-such-action'" in fails["2.0"]["error"]
    assert "unknown host 'ghost-01'" in fails["3.0"]["error"]
    # Permanently: no retry was scheduled although attempts were left
    assert not events(redis_client, ("retry",))


def test_a_job_past_its_timeout_fails_with_a_timeout_error_and_the_node_goes_on(
        redis_client, start_worker) -> None:
    # Given a node that is up, and a job that runs 10 s with a timeout of 1.5 s
    w = start_worker("node-c", slots=4, processes=1)
    w.wait_registered(redis_client)
    slow = submit(redis_client, "4", 1, options={"duration_ms": 10_000}, timeout_ms=1500,
                  idempotent=False)
    # Each attempt times out (a loaded machine may first retry one whose child never started)
    wait_until(lambda: final_outcomes(redis_client, slow)["4.0"] == "failed", 45,
               "the slow job to fail", lambda: w.tail() + dump(redis_client), [w])
    (fail,) = events(redis_client, ("fail",))
    assert "timed out" in fail["error"] and int(fail["duration_ms"]) < 6000
    # And the node goes on with the next job
    after = submit(redis_client, "5", 3)
    wait_until(lambda: acked(redis_client, after), 20, "later jobs acked", w.tail)


def test_a_job_ten_times_longer_than_the_lease_is_never_claimed_twice(redis_client, start_worker) -> None:
    # Given a 1 s lease and a job of 10 s, with a second node hungry for work
    long = submit(redis_client, "6", 1, options={"duration_ms": 10_000})
    a = start_worker("node-d", lease="1s")
    a.wait_registered(redis_client)
    wait_until(lambda: claims_per_job(redis_client).get("6.0"), 10, "the claim", a.tail)
    b = start_worker("node-e", lease="1s")
    # When it runs to the end, kept alive by heartbeats only
    wait_until(lambda: acked(redis_client, long), 20, "the long job acked",
               lambda: a.tail() + b.tail() + dump(redis_client))
    # Then it was claimed once, never lost, and acked by the node that claimed it
    assert claims_per_job(redis_client)["6.0"] == 1
    assert not events(redis_client, ("lost", "retry"))
    (ack,) = events(redis_client, ("ack",))
    assert ack["worker"] == "node-d" and int(ack["duration_ms"]) >= 10_000


def test_two_masters_share_the_work_and_never_run_a_job_twice(redis_client, start_worker) -> None:
    # Given two nodes on one queue, 4 slots each
    a = start_worker("node-f", slots=4, processes=2, lease="1s")
    b = start_worker("node-g", slots=4, processes=2, lease="1s")
    a.wait_registered(redis_client)
    b.wait_registered(redis_client)
    # When 200 jobs of 20 ms arrive
    jobs = submit(redis_client, "7", 200, options={"duration_ms": 20})
    wait_until(lambda: acked(redis_client, jobs), 30, "every job acked",
               lambda: a.tail() + b.tail())
    # Then both nodes did part of it, and no job was claimed or acked twice
    by_worker = {}
    for e in events(redis_client, ("ack",)):
        by_worker[e["worker"]] = by_worker.get(e["worker"], 0) + 1
    assert sum(by_worker.values()) == 200
    assert by_worker.get("node-f", 0) > 20 and by_worker.get("node-g", 0) > 20
    assert set(claims_per_job(redis_client).values()) == {1}


def test_sigterm_acks_what_finishes_in_the_grace_period_and_releases_the_rest(
        redis_client, start_worker) -> None:
    # Given a node with 2 s of grace running 3 jobs of 0.8 s and 3 jobs of 30 s
    short = submit(redis_client, "8", 3, options={"duration_ms": 800})
    long = submit(redis_client, "9", 3, options={"duration_ms": 30_000})
    a = start_worker("node-h", slots=6, processes=2, grace="2s", lease="2s")
    wait_until(lambda: len(claims_per_job(redis_client)) == 6, 15, "all six claimed", a.tail)
    # When it gets SIGTERM
    sent = time.monotonic()
    a.signal(signal.SIGTERM)
    # Then the short jobs are acked, the long ones released without counting an attempt
    assert a.wait(15) == 0
    assert time.monotonic() - sent < 6
    assert acked(redis_client, short)
    released = {e["job"]: e for e in events(redis_client, ("release",))}
    assert set(released) == set(long)
    q = Queue(redis_client, KEYS)
    assert {q.job_state(j)["state"] for j in long} == {"pending"}
    assert {q.job_state(j)["attempt"] for j in long} == {"0"}
    # And another node claims them at once (no lease to wait out)
    b = start_worker("node-i", slots=6, processes=1, lease="2s")
    wait_until(lambda: all(claims_per_job(redis_client)[j] == 2 for j in long), 10,
               "the released jobs claimed again", b.tail)
    again = [e for e in events(redis_client, ("claim",)) if e["worker"] == "node-i"]
    assert {e["attempt"] for e in again} == {"1"}
    assert not events(redis_client, ("lost", "retry", "fail"))


def test_children_are_started_up_to_the_limit_under_load_and_exit_when_idle(
        redis_client, start_worker) -> None:
    # Given an idle node allowed 3 children of 2 jobs each, idle period 1 s
    w = start_worker("node-j", slots=6, processes=3, extra=["--idle", "1s"])
    w.wait_registered(redis_client)
    assert len(w.children()) == 1  # one warm child
    # When 6 jobs of 1.5 s arrive at once
    jobs = submit(redis_client, "10", 6, options={"duration_ms": 1500})
    # Then the node starts children up to its limit, all six jobs run at once
    wait_until(lambda: len(w.children()) == 3, 5, "three children", w.tail, [w])
    wait_until(lambda: acked(redis_client, jobs), 10, "every job acked", w.tail, [w])
    acks = [int(e["duration_ms"]) for e in events(redis_client, ("ack",))]
    claims = [int(e["ts"]) for e in events(redis_client, ("claim",))]
    assert max(claims) - min(claims) < 1000 and len(acks) == 6
    # And once idle for the idle period, the extra children exit; one stays warm
    wait_until(lambda: len(w.children()) == 1, 5, "the extra children to exit", w.tail, [w])


def test_a_node_started_where_a_tasks_py_lies_runs_jobs_with_the_installed_package(
        redis_client, start_worker, tmp_path: Path) -> None:
    # Given the worker's working directory holds an Invoke file named tasks.py, common in ops
    # repositories (the worker's cwd is tmp_path); importing it would break the actions
    (tmp_path / "tasks.py").write_text("raise SystemExit('the Invoke tasks.py was imported')\n")
    jobs = submit(redis_client, "1", 4, params={"cmd": ["true"]})
    # When a node serves the queue from there
    w = start_worker("node-a", slots=2, processes=1)
    # Then master and children import only the installed package: every job succeeds
    wait_until(lambda: acked(redis_client, jobs), 20, "every job acked",
               lambda: w.tail() + dump(redis_client), [w])
    assert "tasks.py was imported" not in w.tail()
