"""Lost jobs: a running job whose lease ran out is found by the next claim. Idempotent ones with
attempts left run again; the others fail as lost, never re-run blindly.

Leases here are real (100 ms) and run out by the Redis clock. Every test runs on Redis 7 and
on Redis 6.2 (the ``qclient`` fixture).
"""

from __future__ import annotations

import time

from scheduler.errors import Code
from scheduler.queue.client import JobResult, Queue
from tests.queue_support import KEYS, due_score, events, make_task

LEASE_MS = 100


def lose_lease() -> None:
    time.sleep(LEASE_MS * 1.5 / 1000)


def test_a_lost_idempotent_job_is_claimed_again_with_a_new_token(queue: Queue) -> None:
    make_task(queue, "t", 1, idempotent=True, max_attempts=3)
    first = queue.claim("w1", 1, lease_ms=LEASE_MS).jobs[0]
    lose_lease()
    claim = queue.claim("w2", 1)
    [again] = claim.jobs
    assert (again.job_id, again.after_loss, again.attempt, again.token) == ("t.0", True, 2, first.token + 1)
    assert claim.lost == []
    kinds = [(e["kind"], e.get("worker")) for e in events(queue.client) if e["kind"] in ("lost", "claim")]
    assert kinds == [("claim", "w1"), ("lost", "w1"), ("claim", "w2")]
    lost = events(queue.client, "lost")[0]
    assert lost["error"] == "worker w1 stopped renewing its lease; run again because the action is idempotent"
    state = queue.task_state("t")
    assert (state["running"], state["lost"], state["failed"]) == ("1", "1", "0")
    assert queue.job_state("t.0")["owner"] == "w2"


def test_a_lost_non_idempotent_job_fails_instead_of_running_twice(queue: Queue) -> None:
    make_task(queue, "t", 1, idempotent=False, max_attempts=3)
    first = queue.claim("w1", 1, lease_ms=LEASE_MS).jobs[0]
    lose_lease()
    claim = queue.claim("w2", 1)
    assert claim.jobs == [] and claim.lost == ["t.0"]
    message = "worker w1 stopped renewing its lease; not run again because the action is not idempotent"
    assert events(queue.client, "lost")[0]["error"] == message
    job = queue.job_state("t.0")
    assert (job["state"], job["error"]) == ("failed", message)
    assert queue.client.zscore(KEYS.dead, "t.0") is not None and due_score(queue.client, "t.0") is None
    state = queue.task_state("t")
    assert (state["running"], state["lost"], state["failed"]) == ("0", "1", "1")
    # The lost worker's late answer is refused as stale
    assert queue.ack("w1", [("t.0", first.token, JobResult(0))]) == [Code.STALE_TOKEN]
    assert queue.job_state("t.0")["state"] == "failed"


def test_a_job_lost_on_its_last_attempt_goes_to_the_dead_letter_set(queue: Queue) -> None:
    make_task(queue, "t", 1, idempotent=True, max_attempts=2)
    queue.claim("w1", 1, lease_ms=LEASE_MS)
    lose_lease()
    assert queue.claim("w2", 1, lease_ms=LEASE_MS).jobs[0].attempt == 2
    lose_lease()
    claim = queue.claim("w3", 1)
    assert claim.jobs == [] and claim.lost == ["t.0"]
    assert queue.job_state("t.0")["error"] == \
        "worker w2 stopped renewing its lease; not run again because attempt 2 of 2 was the last"
    assert queue.client.zrange(KEYS.dead, 0, -1) == ["t.0"]
    assert queue.task_state("t")["lost"] == "2"


def test_a_job_lost_while_its_task_is_paused_waits_for_resume(queue: Queue) -> None:
    make_task(queue, "t", 1)
    queue.claim("w1", 1, lease_ms=LEASE_MS)
    queue.pause("t", "ops")
    lose_lease()
    assert queue.claim("w2", 1).jobs == []
    assert queue.job_state("t.0")["state"] == "held"
    assert queue.resume("t", "ops") == 1
    assert queue.claim("w2", 1).jobs[0].attempt == 2


def test_a_job_lost_after_its_task_was_cancelled_is_not_run_again(queue: Queue) -> None:
    make_task(queue, "t", 1)
    queue.claim("w1", 1, lease_ms=LEASE_MS)
    queue.cancel_task("t", "ops")
    lose_lease()
    assert queue.claim("w2", 1).jobs == []
    assert queue.job_state("t.0") == {}
    assert "task is cancelled" in events(queue.client, "lost")[0]["error"]
    assert queue.task_state("t")["cancelled"] == "1"


def test_lost_jobs_fail_as_lost_without_counting_towards_the_abort(queue: Queue) -> None:
    make_task(queue, "t", 4, idempotent=False, max_failures=2, max_running=2)
    queue.claim("w1", 2, lease_ms=LEASE_MS)
    lose_lease()
    claim = queue.claim("w2", 10)
    # both were lost and failed for good (never re-run blindly), but a lost worker is no failed
    # host: the task goes on, and the two parked jobs came back and were claimed
    assert sorted(claim.lost) == ["t.0", "t.1"]
    assert sorted(j.job_id for j in claim.jobs) == ["t.2", "t.3"]
    state = queue.task_state("t")
    assert (state["state"], state["failed"], state["lost_failed"], state["lost"]) == \
        ("active", "2", "2", "2")
