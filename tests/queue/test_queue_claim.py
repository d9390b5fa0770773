"""claim.lua through Queue.claim: order, leases, fencing tokens, parking, holding, cancelling.

Every test runs on Redis 7 and on Redis 6.2 (the ``qclient`` fixture).
"""

from __future__ import annotations

import pytest
import redis

from scheduler.errors import BadArgumentError, Code
from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from scheduler.queue.scripts import script_source
from tests.queue_support import KEYS, due_score, events, make_task, redis_now_ms


def test_claim_drains_urgent_then_normal_then_bulk(queue: Queue) -> None:
    # Given one due job in each class, the bulk one the oldest
    now = redis_now_ms(queue.client)
    make_task(queue, "b", 1, due_ms=now - 3000, priority="bulk")
    make_task(queue, "n", 1, due_ms=now - 2000, priority="normal")
    make_task(queue, "u", 1, due_ms=now - 1000, priority="urgent")
    # When claimed one at a time
    order = [queue.claim("w", 1).jobs[0].job_id for _ in range(3)]
    # Then the class decides, not the age
    assert order == ["u.0", "n.0", "b.0"]


def test_claim_takes_at_most_the_batch_in_due_order_and_leases_them(queue: Queue) -> None:
    now = redis_now_ms(queue.client)
    queue.create_task(TaskSpec("t"))
    queue.enqueue("t", [JobSpec(f"t.{k}", f"h{k}", due_ms=now - 100 * (10 - k)) for k in range(10)])
    claim = queue.claim("w1", 4, lease_ms=5_000)
    assert [j.job_id for j in claim.jobs] == ["t.0", "t.1", "t.2", "t.3"]
    for job in claim.jobs:
        assert due_score(queue.client, job.job_id) == claim.now_ms + 5_000
        assert (job.token, job.attempt, job.after_loss) == (1, 1, False)
        assert queue.job_state(job.job_id)["owner"] == "w1"
    assert queue.task_state("t")["running"] == "4"
    assert claim.next_due_ms == now - 100 * (10 - 4)
    assert [e["job"] for e in events(queue.client, "claim")] == ["t.0", "t.1", "t.2", "t.3"]
    assert {e["worker"] for e in events(queue.client, "claim")} == {"w1"}


def test_a_job_due_in_the_future_is_not_claimed(queue: Queue) -> None:
    now = redis_now_ms(queue.client)
    make_task(queue, "t", 2, due_ms=now + 60_000)
    claim = queue.claim("w", 10)
    assert claim.jobs == []
    assert claim.next_due_ms == now + 60_000


def test_every_claim_issues_a_new_fencing_token(queue: Queue) -> None:
    make_task(queue, "t", 1)
    first = queue.claim("w1", 1, lease_ms=1).jobs[0]
    queue.client.zadd(KEYS.due("normal"), {"t.0": 0}, xx=True)  # its lease is over
    second = queue.claim("w2", 1).jobs[0]
    assert second.token == first.token + 1
    assert second.after_loss is True


def test_a_task_at_its_concurrency_limit_parks_jobs_and_each_finish_unparks_one(queue: Queue) -> None:
    # Given a task of 5 jobs allowed 2 at a time
    now = redis_now_ms(queue.client)
    queue.create_task(TaskSpec("t", max_running=2))
    queue.enqueue("t", [JobSpec(f"t.{k}", f"h{k}", due_ms=now - 1000 + k) for k in range(5)])
    # When a worker asks for 10
    claim = queue.claim("w", 10)
    # Then it gets 2, and the other 3 wait in the parked list, out of the due set
    assert [j.job_id for j in claim.jobs] == ["t.0", "t.1"]
    assert queue.client.lrange(KEYS.parked("t"), 0, -1) == ["t.2", "t.3", "t.4"]
    assert due_score(queue.client, "t.2") is None
    assert queue.job_state("t.2")["state"] == "parked"
    assert len(events(queue.client, "park")) == 3
    # When one finishes, one parked job goes back at its own due time
    assert queue.ack("w", [("t.0", claim.jobs[0].token, JobResult(0))]) == [Code.OK]
    assert due_score(queue.client, "t.2") == now - 1000 + 2
    assert queue.job_state("t.2")["state"] == "pending"
    assert queue.client.lrange(KEYS.parked("t"), 0, -1) == ["t.3", "t.4"]
    assert [j.job_id for j in queue.claim("w", 10).jobs] == ["t.2"]
    assert queue.task_state("t")["running"] == "2"


def test_a_paused_task_jobs_are_held_and_resume_puts_them_back_in_order(queue: Queue) -> None:
    now = redis_now_ms(queue.client)
    queue.create_task(TaskSpec("p"))
    queue.enqueue("p", [JobSpec(f"p.{k}", f"h{k}", due_ms=now - 500 + k) for k in range(3)])
    make_task(queue, "other", 1, due_ms=now)
    queue.pause("p", "alice")
    # claim skips the paused task's jobs, moving them out of the due set
    assert [j.job_id for j in queue.claim("w", 10).jobs] == ["other.0"]
    assert queue.client.zrange(KEYS.held("p"), 0, -1, withscores=True) == [
        ("p.0", now - 500), ("p.1", now - 499), ("p.2", now - 498)]
    assert queue.job_state("p.1")["state"] == "held"
    assert queue.resume("p", "bob") == 3
    assert [due_score(queue.client, f"p.{k}") for k in range(3)] == [now - 500, now - 499, now - 498]
    assert [(e["kind"], e["operator"]) for e in events(queue.client) if e["kind"] in ("pause", "resume")] \
        == [("pause", "alice"), ("resume", "bob")]
    assert [j.job_id for j in queue.claim("w", 10).jobs] == ["p.0", "p.1", "p.2"]


def test_claim_cancels_the_jobs_of_a_cancelled_task_it_meets(queue: Queue) -> None:
    make_task(queue, "c", 3)
    queue.client.hset(KEYS.task("c"), "state", "cancelled")  # as if cancel_task had not swept yet
    assert queue.claim("w", 10).jobs == []
    assert queue.client.zcard(KEYS.due("normal")) == 0
    assert queue.job_state("c.0") == {}
    assert queue.task_state("c")["cancelled"] == "3"
    [cancel] = events(queue.client, "cancel")
    assert (cancel["count"], cancel["jobs"]) == ("3", "c.0 c.1 c.2")


def test_claim_rejects_bad_arguments_in_the_script_too(qclient: redis.Redis) -> None:
    # Given the script called directly with arguments Python would refuse
    claim = qclient.register_script(script_source("claim"))
    keys = [*KEYS.all_due(), KEYS.dead, KEYS.events]
    for args, words in ([KEYS.tag, "w", 0, 1000, 64, KEYS.wake], "batch"), \
                       ([KEYS.tag, "w", 1, -5, 64, KEYS.wake], "lease"), \
                       ([KEYS.tag, "w", 10, 1000, 5, KEYS.wake], "scan limit"), \
                       ([KEYS.tag, "", 1, 1000, 64, KEYS.wake], "worker"):
        code, message = claim(keys=keys, args=args)
        assert code == Code.BAD_ARGUMENT and words in message
    assert qclient.dbsize() == 0


@pytest.mark.parametrize("batch", [0, -1, 10_001, 1.5, True])
def test_claim_refuses_a_bad_batch_before_calling_redis(queue: Queue, batch: object) -> None:
    with pytest.raises(BadArgumentError, match="batch"):
        queue.claim("w", batch)  # type: ignore[arg-type]


def test_claim_refuses_a_non_positive_lease(queue: Queue) -> None:
    with pytest.raises(BadArgumentError, match="lease_ms"):
        queue.claim("w", 1, lease_ms=-1)
    with pytest.raises(BadArgumentError, match="lease_ms"):
        Queue(queue.client, lease_ms=0)


def test_an_orphan_due_entry_without_a_job_hash_is_dropped(queue: Queue) -> None:
    make_task(queue, "t", 1)
    queue.client.zadd(KEYS.due("normal"), {"ghost.1": 0})
    assert [j.job_id for j in queue.claim("w", 5).jobs] == ["t.0"]
    assert due_score(queue.client, "ghost.1") is None


def test_claim_work_is_bounded_when_a_cancelled_task_floods_the_head(queue: Queue) -> None:
    # Given 1000 due jobs of a cancelled task ahead of a live one
    now = redis_now_ms(queue.client)
    make_task(queue, "dead", 1000, due_ms=now - 10_000)
    make_task(queue, "live", 1, due_ms=now - 1)
    queue.client.hset(KEYS.task("dead"), "state", "cancelled")
    # When claimed with batch 1, one call cancels at most batch * 4 + 64 entries
    first = queue.claim("w", 1)
    assert first.jobs == []
    assert queue.client.zcard(KEYS.due("normal")) == 1001 - 68
    # And repeated claims get through to the live job
    for _ in range(20):
        claim = queue.claim("w", 1)
        if claim.jobs:
            break
    assert [j.job_id for j in claim.jobs] == ["live.0"]


def test_a_claim_with_hosts_returns_each_claimed_jobs_host_hash_from_the_same_call(
        queue: Queue) -> None:
    # Given four due jobs: two hosts with connection data, one host unknown to Redis, one
    # whose key is not a hash (read as unknown: the claim's reply is not lost for it)
    make_task(queue, "t", 4)
    queue.client.hset(KEYS.host("host-t.0"), mapping={"address": "10.0.0.1", "port": "2222"})
    queue.client.hset(KEYS.host("host-t.1"), mapping={"address": "10.0.0.2", "user": "ops"})
    queue.client.set(KEYS.host("host-t.3"), "not a hash")
    # When claimed asking for the hosts
    claim = queue.claim("w", 4, with_hosts=True)
    # Then each claimed job's host hash comes back by job id, empty for the unknown hosts
    assert claim.hosts == {"t.0": {"address": "10.0.0.1", "port": "2222"},
                           "t.1": {"address": "10.0.0.2", "user": "ops"}, "t.2": {}, "t.3": {}}
    # An empty claim asking for them, and a claim not asking, carry none
    assert queue.claim("w", 3, with_hosts=True).hosts == {}
    make_task(queue, "u", 1)
    queue.client.hset(KEYS.host("host-u.0"), "address", "10.0.0.3")
    claim = queue.claim("w", 1)
    assert [j.job_id for j in claim.jobs] == ["u.0"] and claim.hosts == {}
