"""workers.inputs.InputReader on a real redis-server: what a claimed job needs before it can run
(its task's spec, its host's data), what it says when either is missing, and the round trips it
costs on the way from a job's due time to its start."""

from __future__ import annotations

import redis

from scheduler.queue.client import JobSpec, Queue, TaskSpec
from scheduler.queue.shards import Shards
from workers.inputs import InputReader

SHARDS = Shards()


def commands_since(client: redis.Redis, before: int) -> int:
    """Commands the server ran since ``before`` (a ``total_commands_processed``), not counting
    the INFO that reads it."""
    return client.info("stats")["total_commands_processed"] - before - 1


def processed(client: redis.Redis) -> int:
    return client.info("stats")["total_commands_processed"]


def setup(client: redis.Redis) -> tuple[Queue, InputReader]:
    client.flushall()
    queue = Queue(client, lease_ms=30_000)
    queue.create_task(TaskSpec("7", spec={"action": "ping"}, timeout_ms=5_000, idempotent=False))
    queue.enqueue("7", [JobSpec("7.0", "web1"), JobSpec("7.1", "web2")])
    client.hset(SHARDS.coord.host("web1"), mapping={"address": "10.0.0.1", "port": "22"})
    client.hset(SHARDS.coord.host("web2"), mapping={"address": "10.0.0.2", "port": "22"})
    return queue, InputReader(client, SHARDS, queue)


def test_hosts_the_claim_read_and_a_cached_task_cost_no_round_trip(redis_client) -> None:
    queue, reader = setup(redis_client)
    claim = queue.claim("w", 1, with_hosts=True)
    # A new task: its spec is read (the claim's hosts are used, not read again)
    before = processed(redis_client)
    first = reader.read(claim.jobs, claim.hosts)
    assert commands_since(redis_client, before) == 1  # the task hash only
    assert first[0].task.spec == {"action": "ping"} and first[0].task.timeout_ms == 5_000
    assert first[0].task.idempotent is False
    assert first[0].host_data == {"address": "10.0.0.1", "port": "22"}
    # The same task again, its host read by the claim: nothing more to read
    claim = queue.claim("w", 1, with_hosts=True)
    before = processed(redis_client)
    second = reader.read(claim.jobs, claim.hosts)
    assert commands_since(redis_client, before) == 0
    assert second[0].host_data == {"address": "10.0.0.2", "port": "22"}
    assert second[0].problem is None


def test_without_the_claims_hosts_they_are_read_in_one_round_trip_with_new_tasks(
        redis_client) -> None:
    queue, reader = setup(redis_client)
    claim = queue.claim("w", 2)
    assert claim.hosts == {}
    before = processed(redis_client)
    inputs = reader.read(claim.jobs)
    assert commands_since(redis_client, before) == 3  # two hosts and the task, one pipeline
    assert [i.host_data["address"] for i in inputs] == ["10.0.0.1", "10.0.0.2"]


def test_an_unknown_host_or_task_is_a_problem_to_fail_the_job_with(redis_client) -> None:
    queue, reader = setup(redis_client)
    redis_client.delete(SHARDS.coord.host("web2"))
    claim = queue.claim("w", 2, with_hosts=True)
    inputs = reader.read(claim.jobs, claim.hosts)
    assert inputs[0].problem is None
    assert inputs[1].problem == ("unknown host 'web2': it has no connection data in Redis "
                                 "(was it removed from the inventory?)")
    redis_client.delete(SHARDS.coord.task("7"))
    fresh = InputReader(redis_client, SHARDS, queue)  # nothing cached
    assert fresh.read(claim.jobs, claim.hosts)[0].problem == "task 7 is not in Redis"
