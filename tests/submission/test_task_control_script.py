"""``retry_failed.lua`` called directly (through ``Queue.retry_failed``), on Redis 7 and 6.2:
only failed jobs move, with a new attempt budget and the same growing fencing token; an aborted
task is revived; a cancelled task and bad arguments change nothing."""

from __future__ import annotations

import pytest
import redis

from scheduler.errors import Code, QueueError, UnknownTaskError
from scheduler.queue.client import JobResult, Queue
from scheduler.queue.scripts import script_source
from tests.queue_support import KEYS, events, make_task, snapshot


def fail_for_good(q: Queue, n: int) -> list[str]:
    claim = q.claim("w", n)
    for job in claim.jobs:
        q.fail("w", job.job_id, job.token, JobResult(1), error="boom", retryable=False)
    return [j.job_id for j in claim.jobs]


def test_failed_jobs_are_pending_again_now_with_a_new_attempt_budget_and_the_same_token(
        queue: Queue, qclient: redis.Redis) -> None:
    # Given a task of 5 jobs: 3 failed for good, 1 running, 1 pending
    make_task(queue, "t1", 5, max_attempts=2)
    failed = fail_for_good(queue, 3)
    running = queue.claim("w", 1).jobs[0].job_id
    pending = ({f"t1.{k}" for k in range(5)} - set(failed) - {running}).pop()
    tokens = {j: queue.job_state(j)["token"] for j in failed}
    # When an operator retries the failed jobs
    moved = queue.retry_failed("t1", "ops")
    # Then exactly the failed ones are pending again, due now, attempt 0, token unchanged
    assert [sorted(jobs) for _, jobs in moved] == [sorted(failed)]
    for job in failed:
        state = queue.job_state(job)
        assert (state["state"], state["attempt"], state["token"]) == ("pending", "0", tokens[job])
        assert "error" not in state
    assert qclient.zcard(KEYS.dead) == 0
    assert queue.job_state(running)["state"] == "running"
    assert queue.job_state(pending)["state"] == "pending"
    assert queue.task_state("t1")["failed"] == "0"
    (event,) = events(qclient, "retry-failed")
    assert event["operator"] == "ops" and event["count"] == "3" and event["task"] == "t1"
    # And they can be claimed again, from attempt 1 with a newer token
    again = {j.job_id: j for j in queue.claim("w2", 10).jobs}
    assert set(again) == set(failed) | {pending}
    assert all(again[j].attempt == 1 and again[j].token == int(tokens[j]) + 1 for j in failed)


def test_an_aborted_task_is_revived_and_its_cancelled_jobs_stay_cancelled(
        queue: Queue, qclient: redis.Redis) -> None:
    # Given a task aborted by its second failure, its pending jobs swept
    make_task(queue, "t2", 6, max_failures=2, max_attempts=1)
    failed = fail_for_good(queue, 2)
    queue.cancel_task("t2", "sweeper")
    assert queue.task_state("t2")["state"] == "aborted"
    # When the failed jobs are retried
    queue.retry_failed("t2", "ops")
    # Then the task is active again, only the two failed jobs come back
    live = queue.task_state("t2")
    assert (live["state"], live["failed"], live["overshoot"]) == ("active", "0", "0")
    assert sorted(j.job_id for j in queue.claim("w", 10).jobs) == sorted(failed)


def test_a_cancelled_task_an_unknown_task_and_a_foreign_job_id_change_nothing(
        queue: Queue, qclient: redis.Redis) -> None:
    make_task(queue, "t3", 3, max_attempts=1)
    fail_for_good(queue, 1)
    queue.cancel_task("t3", "ops")
    make_task(queue, "t5", 1)
    before = snapshot(qclient)
    with pytest.raises(QueueError, match="t3 is cancelled; its failed jobs stay failed"):
        queue.retry_failed("t3", "ops")
    with pytest.raises(UnknownTaskError):
        queue.retry_failed("nope", "ops")
    script = qclient.register_script(script_source("retry_failed"))
    reply = script(keys=[KEYS.task("t5"), *KEYS.all_due(), KEYS.dead, KEYS.events,
                         KEYS.job("t4.0")], args=["t5", "ops", KEYS.wake, "", "t4.0"])
    assert reply[0] == Code.BAD_ARGUMENT and "not of task t5" in reply[1]
    assert snapshot(qclient) == before


def test_retry_failed_during_an_aborts_cancel_sweep_is_not_undone_by_the_sweeps_later_chunks(
        queue: Queue, qclient: redis.Redis) -> None:
    # Given a task of 1,200 jobs (three cancel chunks) aborted by its first failure
    make_task(queue, "t4", 1_200, max_failures=1, max_attempts=1)
    [job] = queue.claim("w", 1).jobs
    assert queue.fail_job("w", job.job_id, job.token, JobResult(1), error="boom",
                          retryable=False).aborted
    # and the abort's sweep under way: its first chunk cancelled jobs 0..499
    keys = queue._task_keys("t4")
    queue.call("cancel", keys, ["t4", "", 1, 0, ""])
    first = [f"t4.{k}" for k in range(500)]
    assert queue.call("cancel", keys + [KEYS.job(i) for i in first], ["t4", "", 0, 0, "", *first])[0] == 499
    # When the operator runs retry-failed before the sweep's next chunk
    queue.retry_failed("t4", "ops")
    rest = [f"t4.{k}" for k in range(500, 1_000)]
    reply = queue.call("cancel", keys + [KEYS.job(i) for i in rest], ["t4", "", 0, 0, "", *rest])
    # Then the later chunk cancels nothing and says the sweep is over
    assert (reply[0], reply[2]) == (0, 0)
    assert queue.task_state("t4")["state"] == "active"
    due = set(qclient.zrange(KEYS.due("normal"), 0, -1))
    assert due == {job.job_id} | {f"t4.{k}" for k in range(500, 1_200)}
    assert queue.task_state("t4")["cancelled"] == "499"


def test_retry_failed_on_an_aborted_task_counts_each_host_once_and_no_cancelled_one(
        queue: Queue) -> None:
    # Given a task that aborts at 2 hosts that failed an attempt: t.0 failed an attempt (it
    # waits for its retry), then t.1 failed for good and aborted the task; the abort's sweep
    # cancelled t.0 and t.2
    make_task(queue, "t", 3, max_failures=2, max_attempts=2, backoff_ms=60_000)
    a, b = queue.claim("w", 2).jobs
    assert queue.fail("w", a.job_id, a.token, JobResult(1), error="boom") == "retry"
    assert queue.fail_job("w", b.job_id, b.token, JobResult(1), error="boom",
                          retryable=False).aborted
    assert queue.sweep_aborted("t") == 2
    t = queue.task_state("t")
    # Then the cancelled t.0 no longer counts: one failed host, named once
    assert (t["state"], t["failed_hosts"], t["failed_names"]) == ("aborted", "1", "host-t.1")
    # When the operator retries the failed job (the budget counts again from the jobs still
    # failed: none) and it fails once more
    assert [j for _, ids in queue.retry_failed("t", "ops") for j in ids] == ["t.1"]
    assert queue.task_state("t")["failed_hosts"] == "0"
    again = queue.claim("w", 1).jobs[0]
    outcome = queue.fail_job("w", again.job_id, again.token, JobResult(1), error="boom",
                             retryable=False)
    # Then the task is not aborted at once: one host failed, the limit is 2; named once
    t = queue.task_state("t")
    assert not outcome.aborted
    assert (t["state"], t["failed_hosts"], t["failed_names"]) == ("active", "1", "host-t.1")
