"""A dead worker's jobs come back within about a lease of their expiry whatever the backlog:
the claim visits expired leases ({P}:leases) before the due sets, whose lease entries sort
behind every job due earlier (issue 12, defect 5: 18,200 claims went by before one was seen)."""

from __future__ import annotations

import time

from scheduler.queue.client import Queue
from tests.queue_support import KEYS, make_task, redis_now_ms


def test_an_expired_lease_is_found_by_the_next_claim_behind_a_backlog_of_10000(
        queue: Queue) -> None:
    now = redis_now_ms(queue.client)
    # Given a job claimed under a short lease by a worker that then died
    make_task(queue, "b", 1, due_ms=now - 120_000)
    [dead] = queue.claim("dead-worker", 1, lease_ms=200).jobs
    # and 10,000 jobs of another task overdue by a minute (all due before the lease expires)
    make_task(queue, "a", 10_000, due_ms=now - 60_000)
    time.sleep(0.3)
    # When another worker claims a small batch
    claim = queue.claim("w2", 10)
    # Then the lost job is in it, retried (idempotent task), with a new token
    again = {j.job_id: j for j in claim.jobs}.get(dead.job_id)
    assert again is not None and again.after_loss and again.token > dead.token
    assert queue.client.zscore(KEYS.leases, dead.job_id) is not None  # leased again


def test_a_finished_job_leaves_the_leases_set_and_a_stale_entry_is_dropped(queue: Queue) -> None:
    from scheduler.queue.client import JobResult

    make_task(queue, "t", 3)
    jobs = queue.claim("w", 3).jobs
    assert queue.client.zcard(KEYS.leases) == 3
    queue.ack("w", [(jobs[0].job_id, jobs[0].token, JobResult(0))])
    queue.release("w", [(jobs[1].job_id, jobs[1].token)])
    queue.fail_job("w", jobs[2].job_id, jobs[2].token, JobResult(1), error="x", retryable=False)
    assert queue.client.zcard(KEYS.leases) == 0
    # A leftover entry for a job that is not due yet is dropped without touching the job
    make_task(queue, "later", 1, due_ms=redis_now_ms(queue.client) + 3_600_000)
    queue.client.zadd(KEYS.leases, {"later.0": 1})
    assert [j.job_id for j in queue.claim("w", 5).jobs] == [jobs[1].job_id]
    assert queue.client.zscore(KEYS.leases, "later.0") is None
    assert queue.job_state("later.0")["state"] == "pending"
