"""restore.lua (``Queue.restore``): how reconcile puts back jobs Redis lost that may not simply be
queued again, on Redis 7, 6.2 and the cluster (docs/reliability.md, "Reconcile and live nodes")."""

from __future__ import annotations

import pytest

from scheduler.errors import BadArgumentError, Code, UnknownTaskError
from scheduler.queue.client import JobResult, Queue, TaskSpec
from tests.queue_support import KEYS, events


def kinds(queue: Queue) -> list[str]:
    return [e["kind"] for e in events(queue.client)]


def test_restore_puts_each_job_back_as_its_fate_says_once(queue: Queue) -> None:
    # Given a task recreated by reconcile (its hash, none of its jobs)
    queue.create_task(TaskSpec("t", idempotent=False, exclusive=True))
    result = {"exit_code": "0", "duration_ms": "12", "output": "done", "error": ""}
    entries = [("run", "t.0", "h0", 1, 7, "node-a", 0), ("lost", "t.1", "h1", 1, 1003, "", 0),
               ("ack", "t.2", "h2", 1, 4, "node-b", 0, result),
               ("fail", "t.3", "h3", 1, 5, "node-b", 0, {**result, "exit_code": "2",
                                                           "error": "boom"})]
    # When reconcile restores them
    assert queue.restore("t", entries) == 4
    # Then the run is back under its node's token (its ack lands as after any claim)...
    run = queue.job_state("t.0")
    assert (run["state"], run["token"], run["owner"]) == ("running", "7", "node-a")
    assert queue.client.hget(KEYS.busy, "h0") == "t.0"
    assert queue.ack("node-a", [("t.0", 7, JobResult(0))]) == [Code.OK]
    # ...the unreported started job ended lost, the late results decided the others
    assert queue.job_state("t.1")["state"] == "failed"
    assert queue.job_state("t.2") == {}
    assert queue.job_state("t.3")["state"] == "failed"
    t = queue.task_state("t")
    assert (t["total"], t["succeeded"], t["failed"], t["lost_failed"], t["running"]) == \
        ("4", "2", "2", "1", "0")
    assert kinds(queue) == ["create", "adopt", "lost", "ack", "fail", "ack"]
    # And a second restore of the same jobs changes nothing
    assert queue.restore("t", entries[:2]) == 1  # t.0 was acked since: its hash is gone
    assert queue.job_state("t.1")["state"] == "failed"


def test_restore_ends_the_jobs_of_a_task_redis_no_longer_holds_cancelled(queue: Queue) -> None:
    assert queue.restore("c", [("cancel", "c.0", "h0", 1, 2, "", 0)]) == 1
    [cancel] = events(queue.client, "cancel")
    assert (cancel["task"], cancel["jobs"]) == ("c", "c.0")
    with pytest.raises(UnknownTaskError):
        queue.restore("c", [("run", "c.1", "h1", 1, 2, "node-a", 0)])
    with pytest.raises(BadArgumentError):
        queue.restore("c", [("again", "c.1", "h1", 1, 2, "", 0)])
