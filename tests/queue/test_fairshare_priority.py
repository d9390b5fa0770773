"""Priority classes and Queue.reprioritize (reprioritize.lua, claim.lua) on a real Redis.

Every test runs on Redis 7 and on Redis 6.2 (the ``qclient`` fixture).
"""

from __future__ import annotations

import json

import pytest
import redis

from scheduler.config import Settings
from scheduler.errors import BadArgumentError, Code, QueueError, UnknownTaskError
from scheduler.queue.client import JobResult, Queue
from scheduler.queue.fairshare import reorder_now
from scheduler.queue.keys import PRIORITY_CLASSES
from tests.queue_support import KEYS, events, make_task, redis_now_ms

SETTINGS = Settings(overload_threshold_ms=1_000)


def classes_of(client: redis.Redis, job_id: str) -> list[str]:
    """The classes whose due set holds the job (exactly one for a queued job)."""
    return [p for p in PRIORITY_CLASSES if client.zscore(KEYS.due(p), job_id) is not None]


def test_an_urgent_task_in_an_overloaded_queue_starts_in_the_next_claim_round(queue: Queue) -> None:
    # Given a normal backlog a minute late, reordered for fair share
    now = redis_now_ms(queue.client)
    make_task(queue, "big", 500, due_ms=now - 60_000)
    make_task(queue, "other", 200, due_ms=now - 59_000)
    reorder_now(queue, SETTINGS)
    # When an urgent task is submitted now
    make_task(queue, "fw", 3, priority="urgent")
    # Then the very next claim round takes all its jobs first
    claim = queue.claim("w", 8)
    assert [j.job_id for j in claim.jobs][:3] == ["fw.0", "fw.1", "fw.2"]
    assert all(j.task_id in ("big", "other") for j in claim.jobs[3:])


def test_bulk_jobs_never_start_while_normal_or_urgent_jobs_are_due(queue: Queue) -> None:
    now = redis_now_ms(queue.client)
    make_task(queue, "bulk", 20, due_ms=now - 90_000, priority="bulk")
    make_task(queue, "norm", 15, due_ms=now - 1_000)
    make_task(queue, "urg", 5, due_ms=now - 500, priority="urgent")
    seen: list[str] = []
    while (jobs := queue.claim("w", 3).jobs):
        seen += [j.task_id for j in jobs]
    assert seen == ["urg"] * 5 + ["norm"] * 15 + ["bulk"] * 20


def test_fair_share_works_inside_each_class(queue: Queue) -> None:
    now = redis_now_ms(queue.client)
    make_task(queue, "ua", 20, due_ms=now - 30_000, priority="urgent")
    make_task(queue, "ub", 2, due_ms=now - 29_000, priority="urgent")
    make_task(queue, "na", 20, due_ms=now - 30_000)
    make_task(queue, "nb", 2, due_ms=now - 29_000)
    summary = reorder_now(queue, SETTINGS)
    assert summary is not None and sorted(summary.classes) == ["normal", "urgent"]
    order = [j.job_id for _ in range(3) for j in queue.claim("w", 4).jobs]
    assert order[:4] == ["ua.0", "ub.0", "ua.1", "ub.1"]
    assert order[4:8] == ["ua.10", "ua.11", "ua.12", "ua.13"]  # urgent first, all of it
    rest = [j.job_id for _ in range(10) for j in queue.claim("w", 4).jobs]
    assert all(i.startswith("ua.") for i in rest[:10])
    assert rest[10:14] == ["na.0", "nb.0", "na.1", "nb.1"]


def test_reprioritize_moves_pending_jobs_keeping_their_scores_and_records_it(queue: Queue) -> None:
    # Given a normal task of 1,200 jobs (three chunks), two of them running
    now = redis_now_ms(queue.client)
    ids = make_task(queue, "t", 1_200, due_ms=now - 5_000)
    running = queue.claim("w", 2).jobs
    scores = dict(queue.client.zrange(KEYS.due("normal"), 0, -1, withscores=True))
    # When an operator makes it urgent
    moved = queue.reprioritize("t", "urgent", "ops-anna")
    # Then the task is urgent, every pending job sits in the urgent set at its old score
    assert moved == 1_198
    assert queue.task_state("t")["prio"] == "urgent"
    urgent = dict(queue.client.zrange(KEYS.due("urgent"), 0, -1, withscores=True))
    assert urgent == {i: s for i, s in scores.items() if i not in {j.job_id for j in running}}
    assert set(queue.client.zrange(KEYS.due("normal"), 0, -1)) == {j.job_id for j in running}
    [event] = events(queue.client, "reprioritize")
    assert event["task"] == "t" and event["operator"] == "ops-anna"
    assert json.loads(event["detail"]) == {"from": "normal", "to": "urgent"}
    assert len(ids) == 1_200


def test_running_jobs_of_a_reprioritized_task_renew_and_end_their_leases_where_they_are(
        queue: Queue) -> None:
    # Given four running jobs claimed while the task was normal, then the task made bulk
    make_task(queue, "t", 6, max_attempts=3, backoff_ms=1)
    a, b, c, d = queue.claim("w", 4).jobs
    queue.reprioritize("t", "bulk", "ops")
    # When the worker renews, acks, fails (retry), defers and releases them
    assert queue.extend("w", [(a.job_id, a.token)], lease_ms=60_000) == [Code.OK]
    lease = queue.client.zscore(KEYS.due("normal"), a.job_id)
    assert lease is not None and lease > redis_now_ms(queue.client) + 50_000
    assert queue.ack("w", [(a.job_id, a.token, JobResult(exit_code=0))]) == [Code.OK]
    assert queue.fail("w", b.job_id, b.token, JobResult(exit_code=1), error="boom") == "retry"
    assert queue.defer("w", c.job_id, c.token, 0, wclose_ms=None, reason="window") == Code.OK
    assert queue.release("w", [(d.job_id, d.token)]) == [Code.OK]
    # Then nothing is left in the old class, and each job sits once, in the new class
    assert queue.client.zcard(KEYS.due("normal")) == 0
    for job in (b, c, d):
        assert classes_of(queue.client, job.job_id) == ["bulk"]
    assert classes_of(queue.client, a.job_id) == []


def test_a_lost_lease_in_the_old_class_is_still_found_and_retried(queue: Queue) -> None:
    make_task(queue, "t", 1)
    [job] = queue.claim("w", 1, lease_ms=1).jobs
    queue.reprioritize("t", "urgent", "ops")
    queue.client.zadd(KEYS.due("normal"), {job.job_id: 1}, xx=True)  # the lease ran out long ago
    claim = queue.claim("w2", 5)
    assert [(j.job_id, j.after_loss) for j in claim.jobs] == [(job.job_id, True)]
    assert queue.ack("w2", [(job.job_id, claim.jobs[0].token, JobResult())]) == [Code.OK]
    assert all(queue.client.zcard(KEYS.due(p)) == 0 for p in PRIORITY_CLASSES)


def test_claim_files_a_pending_job_met_in_its_tasks_old_class_into_the_new_one(
        queue: Queue) -> None:
    # Given a task whose class changed but whose jobs were not moved yet (a move under way)
    now = redis_now_ms(queue.client)
    make_task(queue, "slow", 3, due_ms=now - 10_000)
    make_task(queue, "n", 2, due_ms=now - 5_000)
    queue.client.hset(KEYS.task("slow"), "prio", "bulk")
    # When workers claim
    first = [j.job_id for j in queue.claim("w", 2).jobs]
    # Then the moved task's jobs wait for their new class's turn, at their old scores
    assert first == ["n.0", "n.1"]
    assert all(classes_of(queue.client, f"slow.{k}") == ["bulk"] for k in range(3))
    assert [j.job_id for j in queue.claim("w", 5).jobs] == ["slow.0", "slow.1", "slow.2"]


def test_two_overlapping_reprioritizes_end_in_the_last_ones_class(queue: Queue) -> None:
    make_task(queue, "t", 10)
    queue.reprioritize("t", "urgent", "a")
    queue.client.hset(KEYS.task("t"), "prio", "bulk")  # a second one's first call, then ...
    assert queue.reprioritize("t", "bulk", "b") == 10  # ... its walk
    assert queue.client.zcard(KEYS.due("bulk")) == 10


def test_reprioritize_to_the_same_class_changes_nothing_and_records_nothing(queue: Queue) -> None:
    make_task(queue, "t", 3, priority="bulk")
    assert queue.reprioritize("t", "bulk", "ops") == 0
    assert events(queue.client, "reprioritize") == []


def test_reprioritize_refuses_unknown_tasks_bad_classes_and_finished_tasks(queue: Queue) -> None:
    make_task(queue, "t", 2)
    with pytest.raises(UnknownTaskError):
        queue.reprioritize("nope", "urgent", "ops")
    with pytest.raises(BadArgumentError):
        queue.reprioritize("t", "asap", "ops")
    queue.cancel_task("t", "ops")
    with pytest.raises(QueueError) as err:
        queue.reprioritize("t", "urgent", "ops")
    assert err.value.code == Code.TASK_NOT_ACTIVE
    assert events(queue.client, "reprioritize") == []


def test_a_paused_task_resumes_into_its_new_class(queue: Queue) -> None:
    make_task(queue, "t", 4, due_ms=redis_now_ms(queue.client) - 1_000)
    queue.pause("t", "ops")
    queue.claim("w", 4)  # holds the due jobs
    queue.reprioritize("t", "urgent", "ops")
    assert queue.resume("t", "ops") == 4
    assert queue.client.zcard(KEYS.due("urgent")) == 4


def test_a_cancel_while_reprioritize_moves_the_task_leaves_no_entry_in_the_old_class(
        queue: Queue) -> None:
    # Given a task of 1,200 jobs whose move to urgent has begun: class changed, first chunk moved
    ids = make_task(queue, "t", 1_200)
    fixed = [KEYS.task("t"), *KEYS.all_due(), KEYS.events]
    queue.call("reprioritize", fixed, ["t", "urgent", "ops", 1, KEYS.wake, ""])
    chunk = ids[:500]
    queue.call("reprioritize", fixed + [KEYS.job(i) for i in chunk],
               ["t", "urgent", "ops", 0, KEYS.wake, "", *chunk])
    assert queue.client.zcard(KEYS.due("normal")) == 700
    # When the operator cancels the task before the move finished
    assert queue.cancel_task("t", "ops") == 1_200
    # Then no entry of the task is left in any class, and a later claim finds nothing to drop
    assert all(queue.client.zcard(k) == 0 for k in KEYS.all_due())
    before = len(events(queue.client, "cancel"))
    assert queue.claim("w", 10).jobs == []
    assert len(events(queue.client, "cancel")) == before
