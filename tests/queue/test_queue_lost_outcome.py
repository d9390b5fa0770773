"""The ``lost`` event says what became of the lost job in an explicit ``outcome`` field, so the
recorder never has to read it from the wording of ``error``: ``retry`` (claimed again now),
``held`` (its task is paused: it waits for resume), ``cancelled`` (its task was cancelled or
aborted) or ``failed`` (failed for good). Each case checks that the field matches what the
claim actually did to the job. Leases are real (100 ms); Redis 7 and 6.2 (``qclient``)."""

from __future__ import annotations

import time

from scheduler.queue.client import JobResult, Queue
from tests.queue_support import KEYS, events, make_task

LEASE_MS = 100


def lose_lease() -> None:
    time.sleep(LEASE_MS * 1.5 / 1000)


def the_lost_event(queue: Queue) -> dict[str, str]:
    [lost] = events(queue.client, "lost")
    return lost


def test_a_lost_job_claimed_again_has_outcome_retry(queue: Queue) -> None:
    # Given an idempotent job with attempts left whose worker lost it
    make_task(queue, "t", 1, idempotent=True, max_attempts=3)
    queue.claim("w1", 1, lease_ms=LEASE_MS)
    lose_lease()
    # When the next claim finds it
    claim = queue.claim("w2", 1)
    # Then it runs again, and the event says retry
    assert [j.job_id for j in claim.jobs] == ["t.0"] and claim.jobs[0].after_loss
    assert the_lost_event(queue)["outcome"] == "retry"


def test_a_job_lost_while_its_task_is_paused_has_outcome_held(queue: Queue) -> None:
    make_task(queue, "t", 1, idempotent=True, max_attempts=3)
    queue.claim("w1", 1, lease_ms=LEASE_MS)
    queue.pause("t", "ops")
    lose_lease()
    assert queue.claim("w2", 1).jobs == []
    assert queue.job_state("t.0")["state"] == "held"
    assert the_lost_event(queue)["outcome"] == "held"


def test_a_job_lost_after_its_task_was_cancelled_or_aborted_has_outcome_cancelled(
    queue: Queue,
) -> None:
    # Given a cancelled task and an aborted one, each with a running job lost by its worker
    make_task(queue, "c", 1)
    make_task(queue, "a", 2, idempotent=False, max_failures=1)
    queue.claim("w1", 3, lease_ms=LEASE_MS)
    queue.cancel_task("c", "ops")
    job = queue.job_state("a.0")
    queue.fail("w1", "a.0", int(job["token"]), JobResult(1), error="exit 1", retryable=False)
    assert queue.task_state("a")["state"] == "aborted"
    lose_lease()
    # When a claim finds them
    assert queue.claim("w2", 5).jobs == []
    # Then both were cancelled, and their events say so
    outcomes = {e["job"]: e["outcome"] for e in events(queue.client, "lost")}
    assert outcomes == {"c.0": "cancelled", "a.1": "cancelled"}
    assert queue.job_state("c.0") == {} and queue.job_state("a.1") == {}
    # and each ended once: no cancel event repeats the end the lost event recorded (found by
    # the nemesis's history checker)
    cancelled = [j for e in events(queue.client, "cancel") for j in e.get("jobs", "").split()]
    assert "c.0" not in cancelled and "a.1" not in cancelled
    assert queue.task_state("c")["cancelled"] == "1" and queue.task_state("a")["cancelled"] == "1"


def test_a_lost_job_that_may_not_run_again_has_outcome_failed(queue: Queue) -> None:
    # Given a non-idempotent job, and an idempotent one on its last attempt (a paused task:
    # a job that may not run again fails for good even there)
    make_task(queue, "n", 1, idempotent=False, max_attempts=3)
    make_task(queue, "l", 1, idempotent=True, max_attempts=1)
    queue.claim("w1", 2, lease_ms=LEASE_MS)
    queue.pause("l", "ops")
    lose_lease()
    claim = queue.claim("w2", 5)
    assert claim.jobs == [] and sorted(claim.lost) == ["l.0", "n.0"]
    outcomes = {e["job"]: e["outcome"] for e in events(queue.client, "lost")}
    assert outcomes == {"n.0": "failed", "l.0": "failed"}
    assert sorted(queue.client.zrange(KEYS.dead, 0, -1)) == ["l.0", "n.0"]
