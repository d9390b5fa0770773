"""Fair share and priority classes on real worker processes (``python -m scheduler worker``), real Redis,
the simulate executor: the node master's overload check starts the reorders by itself.

The overload threshold is 300 ms here (100 ms by default), so each scenario takes seconds.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import redis

from scheduler.queue.client import JobSpec, Queue, TaskSpec
from scheduler.queue.keys import Keys
from tests.worker_support import WorkerProcess, events, started_workers, wait_until

KEYS = Keys()
THRESHOLD_MS = 300


@pytest.fixture
def node(redis_url: str, tmp_path: Path):
    with started_workers(redis_url, tmp_path) as start:
        def start_node(worker_id: str = "node-a", *, slots: int = 8,
                       threshold_ms: int = THRESHOLD_MS, fair_share_by: str = "task") -> WorkerProcess:
            env = {"FLEETSCHED_OVERLOAD_THRESHOLD_MS": str(threshold_ms),
                   "FLEETSCHED_FAIR_SHARE_BY": fair_share_by}
            return start(worker_id, env=env, slots=slots, processes=2, lease="5s")

        yield start_node


def submit(client: redis.Redis, task: str, n: int, *, priority: str = "normal",
           duration_ms: int = 10, due_ms: int = 0) -> None:
    """A task of ``n`` simulated jobs of ``duration_ms`` each (hosts written as submit does)."""
    pipe = client.pipeline(transaction=False)
    for k in range(n):
        pipe.hset(KEYS.host(f"{task}-h{k}"), mapping={"address": "127.0.0.1", "port": 22,
                                                       "user": "", "vars": "{}"})
    pipe.execute()
    spec = {"action": "command", "params": {"cmd": ["true"]}, "executor": "simulate",
            "executor_options": {"duration_ms": duration_ms}}
    q = Queue(client, KEYS)
    q.create_task(TaskSpec(task, priority=priority, spec=spec, timeout_ms=60_000))
    q.enqueue(task, [JobSpec(f"{task}.{k}", f"{task}-h{k}", due_ms=due_ms) for k in range(n)])


def finished(client: redis.Redis, task: str, n: int) -> bool:
    return int(client.hget(KEYS.task(task), "succeeded") or 0) == n


def test_without_overload_jobs_are_claimed_in_due_order(redis_client: redis.Redis, node) -> None:
    # Given a node whose threshold the queue never reaches, and two tasks queued one after other
    w = node(slots=4, threshold_ms=20_000)
    w.wait_registered(redis_client)
    submit(redis_client, "a", 12, duration_ms=0)
    submit(redis_client, "b", 12, duration_ms=0)
    wait_until(lambda: finished(redis_client, "a", 12) and finished(redis_client, "b", 12), 20,
               "both tasks done", w.tail, [w])
    # Then no reorder happened and the claims followed the due order
    assert events(redis_client, ("reorder",)) == []
    claimed = [e["job"] for e in events(redis_client, ("claim",))]
    assert claimed == sorted(claimed, key=lambda i: (i[0], i))  # a before b; ids as Redis sorts


def test_bob_s_four_jobs_start_within_a_few_claim_rounds_of_the_reorder(
        redis_client: redis.Redis, node) -> None:
    # Given Alice's 3,000 jobs queued on a node with 8 slots, and Bob's 4 a moment later
    w = node(slots=8)
    w.wait_registered(redis_client)
    submit(redis_client, "alice", 3_000)
    wait_until(lambda: int(redis_client.hget(KEYS.task("alice"), "succeeded") or 0) > 40, 20,
               "alice's task under way", w.tail, [w])
    submit(redis_client, "bob", 4)
    # When the node notices the overload and reorders
    wait_until(lambda: finished(redis_client, "bob", 4), 20, "bob's jobs done", w.tail, [w])
    # (a reorder's event is written when it ends, maybe after Bob's jobs; cut_ms is its start)
    queued = next(int(e["ts"]) for e in events(redis_client, ("enqueue",)) if e["task"] == "bob")

    def reorder_after_bob() -> dict | None:
        details = [json.loads(e["detail"]) for e in events(redis_client, ("reorder",))]
        return next((d for d in details if d["cut_ms"] >= queued), None)

    reorder = wait_until(reorder_after_bob, 20, "the reorder's event", w.tail, [w])
    stream = events(redis_client, ("claim",))
    # Then Bob's jobs were all claimed within three claim rounds (8 slots each) of the reorder
    bob_last = max(int(e["ts"]) for e in stream if e["task"] == "bob")
    claims_between = [e for e in stream if reorder["cut_ms"] <= int(e["ts"]) <= bob_last]
    assert len(claims_between) <= 3 * 8, claims_between
    assert reorder["tasks"] == 2
    # and long before Alice's task is done
    assert int(redis_client.hget(KEYS.task("alice"), "succeeded") or 0) < 1_500


def test_ten_backlogged_tasks_get_equal_shares_of_the_claims(
        redis_client: redis.Redis, node) -> None:
    # Given ten tasks of 400 down to 40 jobs, all queued at once, the biggest first
    sizes = {f"t{i}": 400 - 40 * i for i in range(10)}
    for task, n in sizes.items():
        submit(redis_client, task, n, duration_ms=5)
    # When one node with 8 slots works through them
    w = node(slots=8)
    wait_until(lambda: finished(redis_client, "t9", sizes["t9"]), 60, "the smallest task done",
               w.tail, [w])
    wait_until(lambda: events(redis_client, ("reorder",)), 20, "the reorder's event", w.tail, [w])
    stream = events(redis_client, ("reorder", "claim"))
    # Then from the reorder until the smallest task's last claim, each task got 10% +- 10%
    start = next(json.loads(e["detail"])["cut_ms"] for e in stream if e["kind"] == "reorder")
    end = max(int(e["ts"]) for e in stream if e["kind"] == "claim" and e["task"] == "t9")
    window = Counter(e["task"] for e in stream
                     if e["kind"] == "claim" and start <= int(e["ts"]) <= end)
    fair = sum(window.values()) / 10
    assert len(window) == 10 and fair >= 20
    assert all(abs(n - fair) <= 0.1 * fair for n in window.values()), window


def test_urgent_jobs_start_in_the_next_claim_round_and_bulk_ones_only_when_nothing_else_is_due(
        redis_client: redis.Redis, node) -> None:
    # Given a node overloaded with a normal task, and a bulk task due too
    w = node(slots=8)
    w.wait_registered(redis_client)
    submit(redis_client, "normal", 400)
    submit(redis_client, "bulk", 20, priority="bulk")
    wait_until(lambda: int(redis_client.hget(KEYS.task("normal"), "succeeded") or 0) > 40, 20,
               "the normal task under way", w.tail, [w])
    # When an urgent task arrives
    submit(redis_client, "fw", 3, priority="urgent")
    wait_until(lambda: finished(redis_client, "bulk", 20), 60, "every task done", w.tail, [w])
    stream = events(redis_client, ("enqueue", "claim"))
    # Then the first claims after its arrival are its three jobs
    queued = next(i for i, e in enumerate(stream) if e["kind"] == "enqueue" and e["task"] == "fw")
    after = [e["task"] for e in stream[queued:] if e["kind"] == "claim"]
    assert after[:3] == ["fw"] * 3
    # and no bulk job started before the last normal one
    claims = [e["task"] for e in stream if e["kind"] == "claim"]
    assert claims.index("bulk") > max(i for i, t in enumerate(claims) if t == "normal")
