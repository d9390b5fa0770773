"""A job held back by a host or group limit does not block the jobs behind it: it leaves the
due set to wait (state hostwait) and the claim goes on to the next ones, whatever their task
or class. Real redis-server (7 and 6.2)."""

from __future__ import annotations

from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from tests.queue_support import redis_now_ms


def test_a_job_waiting_for_its_host_or_group_does_not_block_the_jobs_behind_it(
        queue: Queue) -> None:
    now = redis_now_ms(queue.client)
    # Given task b running on h0, and a group g (hosts h4, h5) limited to 1 with h4 busy
    queue.client.hset(queue.keys.host("h4"), "limits", "g")
    queue.client.hset(queue.keys.host("h5"), "limits", "g")
    queue.set_group_limit("g", 1, "ops")
    queue.create_task(TaskSpec("b"))
    queue.enqueue("b", [JobSpec("b.0", "h0", due_ms=now - 10_000),
                        JobSpec("b.1", "h4", due_ms=now - 10_000)])
    running = queue.claim("w", 2).jobs
    assert {j.job_id for j in running} == {"b.0", "b.1"}
    # And, due before everything else, task a's jobs on h0 and h5 (urgent), then c's on h1-h3
    queue.create_task(TaskSpec("a", priority="urgent"))
    queue.enqueue("a", [JobSpec("a.0", "h0", due_ms=now - 5_000),
                        JobSpec("a.1", "h5", due_ms=now - 5_000)])
    queue.create_task(TaskSpec("c"))
    queue.enqueue("c", [JobSpec(f"c.{k}", f"h{k}", due_ms=now - 1_000) for k in (1, 2, 3)])
    # When a worker claims 3
    claimed = queue.claim("w", 3).jobs
    # Then it gets c's three jobs; a's wait for their host and their group
    assert sorted(j.job_id for j in claimed) == ["c.1", "c.2", "c.3"]
    states = {j: queue.job_state(j)["state"] for j in ("a.0", "a.1")}
    assert states == {"a.0": "hostwait", "a.1": "hostwait"}
    # And once b's jobs end, a's run, without having used an attempt
    queue.ack("w", [(j.job_id, j.token, JobResult(0)) for j in running])
    again = queue.claim("w", 3).jobs
    assert sorted((j.job_id, j.attempt) for j in again) == [("a.0", 1), ("a.1", 1)]
