"""A queue of 3 shards (scheduler/queue/sharded.py): claims across shards, and the limits that
hold across tasks (host exclusivity, group limits) kept in shard 0 for every shard's jobs.

Task ids pick the shard (id mod 3): tasks 3, 6 live in shard 0 (the coordination shard),
1, 4 in shard 1, 2, 5 in shard 2. Every test runs on one real redis-server (three hash tags)
and on the real 3-master cluster, where the shards sit on different masters.
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

from scheduler.errors import BadArgumentError, Code, ConfigError
from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from scheduler.queue.sharded import PLACE_RETRY_MS, ShardedQueue, check_shard_count, open_queue
from scheduler.queue.shards import Shards
from tests.conftest import cluster_client

SHARDS = Shards("fs", 3)


@pytest.fixture(params=["redis7", "cluster"])
def sclient(request: pytest.FixtureRequest):
    if request.param == "cluster":
        client = cluster_client(request.getfixturevalue("cluster_url"))
    else:
        client = redis.Redis.from_url(request.getfixturevalue("redis_url"), decode_responses=True)
        client.flushall()
    yield client
    client.close()


@pytest.fixture
def sq(sclient):
    q = open_queue(sclient, SHARDS, lease_ms=30_000)
    assert isinstance(q, ShardedQueue)
    yield q
    q.close()


def add(q: ShardedQueue, task_id: str, hosts: list[str], **policy) -> list[str]:
    q.create_task(TaskSpec(task_id, **policy))
    ids = [f"{task_id}.{k}" for k in range(len(hosts))]
    q.enqueue(task_id, [JobSpec(i, h) for i, h in zip(ids, hosts)])
    return ids


def claim_all(q: ShardedQueue, batch: int = 50) -> list:
    return q.claim("w1", batch).jobs


def test_each_task_lives_in_its_shard_and_one_claim_takes_from_all(sq, sclient):
    for task_id in ("1", "2", "3"):
        add(sq, task_id, [f"h{task_id}-{k}" for k in range(4)], exclusive=False)
    for task_id in ("1", "2", "3"):
        keys = SHARDS.of_task(task_id)
        assert sclient.zcard(keys.due("normal")) == 4, task_id
        assert sclient.exists(keys.task(task_id))
    assert SHARDS.of_task("3") == SHARDS.coord
    jobs = claim_all(sq)
    assert sorted(j.job_id for j in jobs) == sorted(f"{t}.{k}" for t in "123" for k in range(4))
    codes = sq.ack("w1", [(j.job_id, j.token, JobResult()) for j in jobs])
    assert all(c == 0 for c in codes)
    for task_id in ("1", "2", "3"):
        assert sq.task_state(task_id)["succeeded"] == "4"


def test_a_claim_with_hosts_reads_each_jobs_host_in_its_tasks_shard(sq, sclient):
    # Given one exclusive job in each shard, each host's data in its task's shard
    for task_id in ("1", "2", "3"):
        add(sq, task_id, [f"h{task_id}"])
        sclient.hset(SHARDS.of_task(task_id).host(f"h{task_id}"), "address", f"10.0.0.{task_id}")
    # When one claim takes them all (shards 1 and 2 take their places in shard 0)
    claim = sq.claim("w1", 10, with_hosts=True)
    # Then every job comes with its host's data, read in its own shard's claim
    assert sorted(j.job_id for j in claim.jobs) == ["1.0", "2.0", "3.0"]
    assert claim.hosts == {f"{t}.0": {"address": f"10.0.0.{t}"} for t in "123"}


def test_a_host_runs_one_exclusive_job_across_shards(sq, sclient):
    add(sq, "1", ["db1"])  # shard 1
    add(sq, "2", ["db1"])  # shard 2
    add(sq, "3", ["db1"])  # shard 0
    first = claim_all(sq)
    assert len(first) == 1, [j.job_id for j in first]
    # The other two wait: deferred in their shard (remote) or parked on the host (shard 0).
    holder = first[0]
    waiting = [t for t in ("1", "2", "3") if t != holder.task_id]
    for task_id in waiting:
        state = sq.job_state(f"{task_id}.0")["state"]
        assert state in ("pending", "hostwait"), (task_id, state)
    assert sq.claim("w1", 50).jobs == []
    sq.ack("w1", [(holder.job_id, holder.token, JobResult())])
    # One at a time until all ran; never two on db1 at once.
    done = [holder.task_id]
    deadline = time.monotonic() + 3 * PLACE_RETRY_MS / 1000 + 5
    while len(done) < 3 and time.monotonic() < deadline:
        got = sq.claim("w1", 50).jobs
        assert len(got) <= 1
        for job in got:
            done.append(job.task_id)
            sq.ack("w1", [(job.job_id, job.token, JobResult())])
        time.sleep(0.05)
    assert sorted(done) == ["1", "2", "3"]
    assert not sclient.hgetall(SHARDS.coord.busy)
    assert not sclient.zcard(SHARDS.coord.tag + ":placed")


def test_shard_zero_claims_respect_places_held_by_other_shards(sq):
    add(sq, "1", ["db1"])
    job = claim_all(sq)[0]
    assert job.task_id == "1"
    add(sq, "3", ["db1"])  # shard 0, claimed by claim.lua there: it must see the place
    assert claim_all(sq) == []
    assert sq.job_state("3.0")["state"] == "hostwait"
    sq.ack("w1", [(job.job_id, job.token, JobResult())])
    # Freeing the place wakes shard 0's own waiter at once (no retry delay).
    assert [j.job_id for j in claim_all(sq)] == ["3.0"]


def test_a_group_limit_holds_across_shards(sq, sclient):
    sq.set_group_limit("dc1", 1, "op")
    for keys in SHARDS.all:  # the host copies carry their limited groups (submit writes them)
        for host in ("a", "b"):
            sclient.hset(keys.host(host), mapping={"address": "x", "limits": "dc1"})
    add(sq, "1", ["a"], exclusive=False)
    add(sq, "2", ["b"], exclusive=False)
    add(sq, "3", ["a"], exclusive=False)
    first = claim_all(sq)
    assert len(first) == 1
    assert sclient.hget(SHARDS.coord.gbusy, "dc1") == "1"
    sq.ack("w1", [(first[0].job_id, first[0].token, JobResult())])
    assert not sclient.hget(SHARDS.coord.gbusy, "dc1")


def test_a_dead_workers_place_runs_out_with_its_lease(sclient):
    q = open_queue(sclient, SHARDS, lease_ms=400)
    add(q, "1", ["db1"])
    lost = q.claim("dead-worker", 10).jobs
    assert [j.job_id for j in lost] == ["1.0"]
    # The worker dies: no extend, no ack. Another shard's job waits for the place to run out.
    add(q, "2", ["db1"])
    assert q.claim("w2", 10).jobs == []
    time.sleep(0.5)
    deadline = time.monotonic() + 5
    got = []
    while time.monotonic() < deadline and not any(j.task_id == "2" for j in got):
        got += q.claim("w2", 10).jobs
        time.sleep(0.1)
    assert any(j.task_id == "2" for j in got), got
    q.close()


def test_a_renewed_place_outlives_its_first_lease(sclient):
    q = open_queue(sclient, SHARDS, lease_ms=400)
    add(q, "1", ["db1"])
    job = q.claim("w1", 10).jobs[0]
    add(q, "2", ["db1"])
    for _ in range(4):  # the heartbeat renews lease and place together
        time.sleep(0.2)
        assert q.extend("w1", [(job.job_id, job.token)]) == [0]
        assert all(j.task_id != "2" for j in q.claim("w2", 10).jobs)
    q.close()


def test_a_stale_token_frees_no_place(sq, sclient):
    add(sq, "1", ["db1"])
    job = claim_all(sq)[0]
    assert sq.coord.places("free", [[job.job_id, job.token + 1]]) == [0]
    assert sclient.hget(SHARDS.coord.busy, "db1") == job.job_id
    assert sq.coord.places("extend", [[job.job_id, job.token + 1]]) == [0]
    assert sq.coord.places("free", [[job.job_id, job.token]]) == [1]
    assert not sclient.hget(SHARDS.coord.busy, "db1")


def test_places_refuses_bad_arguments_and_writes_nothing(sq, sclient):
    for mode, entries in (("grab", [["1.0", 1]]), ("take", [["1.0", 1]]), ("free", [["", 1]])):
        with pytest.raises(BadArgumentError):
            sq.coord.places(mode, entries)
    assert not sclient.exists(SHARDS.coord.tag + ":placed")


def test_a_wake_from_any_shard_ends_the_wait(sq):
    woke = threading.Event()

    def waiter():
        sq.wait_for_work(5.0)
        woke.set()

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.3)
    other = Queue(sq.client, SHARDS.all[2])
    other.create_task(TaskSpec("5"))
    other.enqueue("5", [JobSpec("5.0", "h")])
    assert woke.wait(3)
    t.join()
    assert [j.job_id for j in claim_all(sq)] == ["5.0"]


def test_a_shard_count_other_than_the_queues_is_refused(sclient):
    check_shard_count(sclient, SHARDS)
    for other in (Shards("fs", 1), Shards("fs", 4)):
        with pytest.raises(ConfigError, match="has 3 shards"):
            check_shard_count(sclient, other)


def test_shards_spread_evenly_over_the_masters_of_a_cluster(redis_cluster):
    """The cluster's masters split the slots evenly: 3 shards on 3 masters, 6 on 2 each."""
    for count, per_master in ((3, 1), (6, 2)):
        masters = [redis_cluster.master_of(keys.due()).address for keys in Shards("fs", count).all]
        assert sorted(masters.count(m) for m in set(masters)) == [per_master] * 3, masters


def test_sharding_a_queue_that_still_runs_tasks_is_refused(sclient):
    """Task 4 lives in shard 0 of an unsharded queue; with 3 shards its id says shard 1."""
    Queue(sclient, SHARDS.coord).create_task(TaskSpec("4"))
    with pytest.raises(ConfigError, match="still runs task 4 unsharded"):
        check_shard_count(sclient, SHARDS)
    assert sclient.get(SHARDS.count_key) is None  # nothing recorded: still an unsharded queue
    Queue(sclient, SHARDS.coord).cancel_task("4", "op")
    check_shard_count(sclient, SHARDS)
    assert sclient.get(SHARDS.count_key) == "3"


def test_sharding_a_queue_whose_unsharded_tasks_all_ended_is_allowed(sclient):
    """Task 4's hash stays `active` in Redis after its last job succeeded; its counters say it
    is over, so the documented change from 1 to 3 shards goes ahead."""
    unsharded = Queue(sclient, SHARDS.coord)
    unsharded.create_task(TaskSpec("4"))
    unsharded.enqueue("4", [JobSpec("4.0", "h0")])
    with pytest.raises(ConfigError, match="still runs task 4 unsharded"):
        check_shard_count(sclient, SHARDS)
    job = unsharded.claim("w", 1).jobs[0]
    assert unsharded.ack("w", [(job.job_id, job.token, JobResult(0))]) == [Code.OK]
    assert sclient.hget(SHARDS.coord.task("4"), "state") == "active"
    check_shard_count(sclient, SHARDS)
    assert sclient.get(SHARDS.count_key) == "3"
