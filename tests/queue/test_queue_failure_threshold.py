"""``max_failures`` counts hosts that failed an attempt (``count_failures = attempts``, the
default): with retries left, a failing change stops after N hosts, not after every host was
tried; ``final`` keeps counting jobs failed for good. Real redis-server (7 and 6.2)."""

from __future__ import annotations

from scheduler.queue.client import JobResult, Queue
from tests.queue_support import events, make_task

FAIL = JobResult(1, 1, "")


def _fail(q: Queue, job) -> object:
    return q.fail_job("w", job.job_id, job.token, FAIL, error="exit 1", retryable=True)


def test_the_host_that_reaches_the_limit_is_not_retried_and_the_task_aborts(queue: Queue) -> None:
    # Given 8 hosts, at most 2 at a time, 3 attempts each, abort after 2 hosts failed
    make_task(queue, "t", 8, max_running=2, max_failures=2, max_attempts=3, backoff_ms=60_000)
    a, b = queue.claim("w", 8).jobs
    # When the first host fails an attempt: retried (1 host failed, the limit is 2)
    first = _fail(queue, a)
    assert (first.outcome, first.aborted) == ("retry", False)
    # And the second host fails its first attempt: the limit is reached
    second = _fail(queue, b)
    # Then that failure is final and aborts the task, after 2 hosts, not 8
    assert (second.outcome, second.aborted) == ("failed", True)
    task = queue.task_state("t")
    assert (task["state"], task["failed_hosts"], task["failed"]) == ("aborted", "2", "1")
    [abort] = events(queue.client, "abort")
    assert abort["error"].startswith("2 hosts failed an attempt (host-t.0,host-t.1), the limit is 2")
    assert abort["count"] == "2"
    assert queue.sweep_aborted("t") == 7  # the retrying job and the 6 never started
    claimed = {e["job"] for e in events(queue.client, "claim")}
    assert claimed == {a.job_id, b.job_id}


def test_a_host_counts_once_however_many_attempts_it_fails(queue: Queue) -> None:
    make_task(queue, "t", 1, max_failures=2, max_attempts=3, backoff_ms=0)
    outcomes = []
    for _ in range(3):
        [job] = queue.claim("w", 1).jobs
        outcomes.append(_fail(queue, job).outcome)
    assert outcomes == ["retry", "retry", "failed"]
    task = queue.task_state("t")
    assert (task["state"], task["failed_hosts"], task["failed"]) == ("active", "1", "1")


def test_final_counts_only_jobs_failed_for_good(queue: Queue) -> None:
    make_task(queue, "t", 4, max_failures=2, max_attempts=2, backoff_ms=0,
              count_failures="final")
    jobs = queue.claim("w", 4).jobs
    assert [_fail(queue, j).outcome for j in jobs] == ["retry"] * 4
    assert queue.task_state("t")["state"] == "active"
    again = queue.claim("w", 4).jobs
    outcomes = [_fail(queue, j) for j in again]
    assert [(o.outcome, o.aborted) for o in outcomes[:2]] == [("failed", False), ("failed", True)]


def test_retry_failed_gives_the_requeued_hosts_their_budget_back(queue: Queue) -> None:
    make_task(queue, "t", 3, max_failures=1, max_attempts=3, backoff_ms=0)
    [a, *_] = queue.claim("w", 3).jobs
    assert _fail(queue, a).aborted
    queue.sweep_aborted("t")

    queue.retry_failed("t", "ops")
    task = queue.task_state("t")
    assert (task["state"], task["failed_hosts"], task["failed"]) == ("active", "0", "0")
