"""Many worker processes against one queue: no job is claimed twice, none before its due time.

Real OS processes (multiprocessing, fork), each with its own connection, on the session Redis.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from typing import Any

import redis

from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from tests.queue_support import events, redis_now_ms

CTX = mp.get_context("fork")


def claim_until_empty(url: str, worker: str, barrier: Any, out: Any) -> None:
    """Claim batches of 8 and ack them until a claim comes back empty; report what was claimed."""
    client = redis.Redis.from_url(url)
    queue = Queue(client, lease_ms=600_000)
    claimed: list[str] = []
    barrier.wait()
    while True:
        claim = queue.claim(worker, 8)
        if not claim.jobs:
            break
        claimed += [j.job_id for j in claim.jobs]
        queue.ack(worker, [(j.job_id, j.token, JobResult(0)) for j in claim.jobs])
    out.put((worker, claimed))
    client.close()


def test_sixteen_processes_claim_ten_thousand_jobs_each_exactly_once(redis_url: str) -> None:
    # Given one queue of 10,000 due jobs
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    queue = Queue(client)
    queue.create_task(TaskSpec("t"))
    assert queue.enqueue("t", [JobSpec(f"t.{k}", f"h{k}") for k in range(10_000)]) == 10_000
    # When 16 processes claim and ack as fast as they can, all starting together
    barrier, out = CTX.Barrier(16), CTX.Queue()
    procs = [CTX.Process(target=claim_until_empty, args=(redis_url, f"w{i}", barrier, out)) for i in range(16)]
    for p in procs:
        p.start()
    results = dict(out.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(timeout=30)
        assert p.exitcode == 0
    # Then every job was claimed exactly once
    every = [job for jobs in results.values() for job in jobs]
    assert len(every) == 10_000 and len(set(every)) == 10_000
    assert sum(1 for jobs in results.values() if jobs) > 1  # they really competed
    assert len(events(client, "claim")) == 10_000
    state = queue.task_state("t")
    assert (state["succeeded"], state["running"]) == ("10000", "0")
    client.close()


def claim_as_due(url: str, worker: str, sleeper: bool, deadline: float, out: Any) -> None:
    """Claim in a loop (tight, or sleeping in wait_for_work); report (job, due, claim clock)."""
    client = redis.Redis.from_url(url)
    queue = Queue(client, lease_ms=600_000)
    seen: list[tuple[str, int, int, int]] = []
    while time.monotonic() < deadline:
        if sleeper:
            queue.wait_for_work(0.5)
        claim = queue.claim(worker, 5)
        sec, usec = client.time()
        after = int(sec) * 1000 + int(usec) // 1000
        seen += [(j.job_id, j.due_ms, claim.now_ms, after) for j in claim.jobs]
        if claim.jobs:
            queue.ack(worker, [(j.job_id, j.token, JobResult(0)) for j in claim.jobs])
        elif claim.next_due_ms is None:
            break
    queue.close()
    out.put(seen)


def test_no_job_is_ever_claimed_before_its_due_time(redis_url: str) -> None:
    # Given 300 jobs due 300-900 ms from now by the Redis clock
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    queue = Queue(client)
    queue.create_task(TaskSpec("t"))
    now = redis_now_ms(client)
    due = {f"t.{k}": now + 300 + 2 * k for k in range(300)}
    queue.enqueue("t", [JobSpec(job_id, "h", due_ms=ms) for job_id, ms in due.items()])
    # When two processes claim in a tight loop and two sleep in wait_for_work between claims
    out = CTX.Queue()
    deadline = time.monotonic() + 20
    procs = [CTX.Process(target=claim_as_due, args=(redis_url, f"w{i}", i % 2 == 1, deadline, out))
             for i in range(4)]
    for p in procs:
        p.start()
    seen = [row for _ in procs for row in out.get(timeout=60)]
    for p in procs:
        p.join(timeout=30)
    # Then each job was claimed once, never before its due time by the Redis clock
    assert sorted(job for job, *_ in seen) == sorted(due)
    for job, due_ms, claim_now, redis_after in seen:
        assert due_ms == due[job]
        assert due_ms <= claim_now <= redis_after, f"{job} claimed at {claim_now}, due at {due_ms}"
    client.close()
