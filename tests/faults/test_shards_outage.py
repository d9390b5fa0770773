"""The sharded queue while one shard's master fails and the others answer: no job lost, run
twice or sharing its host (ShardedQueue.claim/extend/ack, Finisher, heartbeat).

A queue of 3 shards on the real 3-master test cluster: each shard on its own master
(tests/queue/test_shards_claim.py checks the spread). Task ids pick the shard (id mod 3): task 3 in
shard 0, task 1 in shard 1, task 2 in shard 2. The master of shard 2 is killed -9 (the replica
takes over about 2.5 s later, docs/architecture.md "Redis Cluster", or not at all:
``RedisCluster.down_for_good``); shards 0 and 1 answer all along. The cluster fixture heals the
cluster after each test.
"""

from __future__ import annotations

import time

import pytest
import redis

from scheduler.queue.client import JobResult, JobSpec, TaskSpec
from scheduler.queue.sharded import ShardedQueue, open_queue
from scheduler.queue.shards import Shards
from scheduler.redisdb.connect import REDIS_ERRORS
from tests.conftest import cluster_client

SHARDS = Shards("fs", 3)
LEASE_MS = 1_000


def _queue(url: str) -> ShardedQueue:
    q = open_queue(cluster_client(url), SHARDS, lease_ms=LEASE_MS)
    assert isinstance(q, ShardedQueue)
    return q


def _warm(q: ShardedQueue) -> None:
    """Every script a node runs, loaded on every master while all answer (a running node has
    them loaded already: SCRIPT LOAD goes to every master)."""
    q.claim("warm", 1)  # nothing due: visits every shard
    q.coord.places("free", [["0.0", 1]])
    q.extend("warm", [("3.0", 1), ("1.0", 1), ("2.0", 1)])


def _kill_shard_master(redis_cluster, index: int):
    master = redis_cluster.master_of(SHARDS.all[index].due())
    others = {redis_cluster.master_of(k.due()).address
              for i, k in enumerate(SHARDS.all) if i != index}
    assert master.address not in others  # the other shards live on other masters
    replica = redis_cluster.replica_of(master)
    master.kill()
    return replica


def test_a_claim_that_meets_a_dead_shard_keeps_the_jobs_it_took_from_the_others(
        cluster_url, redis_cluster):
    """ShardedQueue.claim visits shard 1, claims job 1.0 there (running, owner w1), then meets
    dead shard 2: 1.0 is handed to the caller all the same. (Before the fix the claim raised,
    nobody ran 1.0, and when its lease ran out the non-idempotent task failed it for good as
    lost, never having run.)"""
    q = _queue(cluster_url)
    for task_id in ("1", "2"):
        q.create_task(TaskSpec(task_id, idempotent=False))
    _warm(q)
    for task_id in ("1", "2"):
        q.enqueue(task_id, [JobSpec(f"{task_id}.0", f"h{task_id}")])
    replica = _kill_shard_master(redis_cluster, 2)
    q._next = 1  # this claim starts at shard 1 (the rotation reaches it every third claim)
    handed: list[str] = []
    try:
        handed += [j.job_id for j in q.claim("w1", 10).jobs]
    except REDIS_ERRORS:
        pass  # the node logs "claim failed; retrying" and claims again later
    redis_cluster.await_master(replica)
    time.sleep(LEASE_MS / 1000 + 0.2)
    other = _queue(cluster_url)
    lost: list[str] = []
    deadline = time.monotonic() + 10
    while "1.0" not in handed and "1.0" not in lost and time.monotonic() < deadline:
        try:
            claim = other.claim("w2", 10)
        except REDIS_ERRORS:
            time.sleep(0.2)
            continue
        handed += [j.job_id for j in claim.jobs]
        lost += claim.lost
        time.sleep(0.1)
    state = other.job_state("1.0")
    other.close()
    q.close()
    assert "1.0" not in lost, (
        f"job 1.0 was never handed to any worker, yet it was failed as lost: {state}")
    assert "1.0" in handed


def _heartbeat(q: ShardedQueue, leases: list[tuple[str, int]]) -> None:
    try:
        q.extend("w1", leases)
    except REDIS_ERRORS:
        pass  # Heartbeat.run: "heartbeat failed; retrying in 0.3s"


def test_a_dead_shard_does_not_stop_the_renewal_of_places_in_shard_0(
        cluster_url, redis_cluster):
    """Node w1 runs 1.0 (shard 1, exclusive, host db1) and 2.0 (shard 2). Shard 2's master
    dies and stays down for longer than a lease; w1's heartbeat keeps renewing 1.0's place in
    shard 0, so task 3's exclusive job on db1 (shard 0) is not claimed while 1.0 runs there
    ("a host never runs two exclusive jobs at once across shards while shard 0 answers").
    Before the fix every beat failed at shard 2 first and the place lapsed."""
    q = _queue(cluster_url)
    q.create_task(TaskSpec("1"))
    q.create_task(TaskSpec("2", exclusive=False))
    q.create_task(TaskSpec("3"))
    _warm(q)
    q.enqueue("1", [JobSpec("1.0", "db1")])
    q.enqueue("2", [JobSpec("2.0", "h2")])
    other = _queue(cluster_url)  # w2, connected before the clock of the 1 s lease starts
    running = {j.job_id: j.token for j in q.claim("w1", 10).jobs}
    assert set(running) == {"1.0", "2.0"}
    q.enqueue("3", [JobSpec("3.0", "db1")])
    leases = [("1.0", running["1.0"]), ("2.0", running["2.0"])]  # shard 1's first
    _heartbeat(q, leases)
    # Shard 2 stays down for longer than a lease (its replica does not take over)
    with redis_cluster.down_for_good(SHARDS.all[2].due()):
        got: list[str] = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < 4 * LEASE_MS / 1000 and not got:
            _heartbeat(q, leases)
            other._next = 0  # start at shard 0; batch 1: a claim there ends the call
            try:
                got = [j.job_id for j in other.claim("w2", 1).jobs]
            except REDIS_ERRORS:
                pass
            time.sleep(0.25)
        state = q.job_state("1.0")
    other.close()
    q.close()
    assert state["state"] == "running" and state["owner"] == "w1"  # w1 still runs 1.0 on db1
    assert "3.0" not in got, f"3.0 claimed on db1 while 1.0 runs there: {state}"


def test_a_dead_shard_does_not_stop_the_renewal_of_leases_in_the_shards_that_answer(
        cluster_url, redis_cluster):
    """Node w1 runs 2.0 (shard 2) and 1.0 (shard 1), heartbeating every 0.25 s. Shard 2's
    master dies: 1.0's lease in shard 1 is renewed all the same, so w2 never claims it again.
    (Before the fix every beat raised at shard 2 before shard 1 was renewed: the job ran twice
    at once.)"""
    q = _queue(cluster_url)
    q.create_task(TaskSpec("1", exclusive=False))
    q.create_task(TaskSpec("2", exclusive=False))
    _warm(q)
    q.enqueue("2", [JobSpec("2.0", "h2")])
    q.enqueue("1", [JobSpec("1.0", "h1")])
    running = {j.job_id: j.token for j in q.claim("w1", 10).jobs}
    assert set(running) == {"1.0", "2.0"}
    replica = _kill_shard_master(redis_cluster, 2)
    leases = [("2.0", running["2.0"]), ("1.0", running["1.0"])]  # the slots' order
    other = _queue(cluster_url)
    got: list[str] = []
    t0 = time.monotonic()
    while time.monotonic() - t0 < 2.0 and not got:
        _heartbeat(q, leases)
        other._next = 1
        try:
            got = [j.job_id for j in other.claim("w2", 1).jobs]
        except REDIS_ERRORS:
            pass
        time.sleep(0.25)
    redis_cluster.await_master(replica)
    other.close()
    q.close()
    assert "1.0" not in got, "1.0 claimed again by w2 while w1 ran it and renewed it"


def test_an_ack_batch_across_a_failing_shard_acks_each_job_once(cluster_url, redis_cluster):
    """The finisher acks 1.0 (shard 1) and 2.0 (shard 2) in one batch while shard 2's master
    dies. ShardedQueue.ack acks 1.0 and raises PartlyAnswered; the finisher's retry
    (Finisher._ack) sends only 2.0 again until shard 2's replica answers. Both acked once: no
    'stale' event for 1.0 (before the fix the retry re-acked 1.0, refused as unknown_job and
    recorded as a stale run of a job this worker alone ran), the node's acked count is 2."""
    from scheduler.config import Settings
    from workers.config import NodeConfig
    from workers.finisher import Finisher
    from workers.slots import Slots
    from workers.stats import NodeStats

    q = _queue(cluster_url)
    q.create_task(TaskSpec("1", exclusive=False))
    q.create_task(TaskSpec("2", exclusive=False))
    _warm(q)
    q.ack("warm", [("1.9", 1, JobResult())])  # load ack.lua on every master
    q.enqueue("1", [JobSpec("1.0", "h1")])
    q.enqueue("2", [JobSpec("2.0", "h2")])
    running = {j.job_id: j.token for j in q.claim("w1", 10).jobs}
    assert set(running) == {"1.0", "2.0"}
    before = len(q.client.xrange(SHARDS.all[1].events))
    config = NodeConfig(Settings(), lease_ms=15_000, heartbeat_ms=5_000, worker_id="w1",
                        recorder=False)
    stats = NodeStats()
    finisher = Finisher(q, config, Slots(2), None, stats)
    replica = _kill_shard_master(redis_cluster, 2)
    finisher._ack([("1.0", running["1.0"], JobResult()), ("2.0", running["2.0"], JobResult())])
    redis_cluster.await_master(replica)
    stale = [f for _, f in q.client.xrange(SHARDS.all[1].events)[before:]
             if f.get("kind") == "stale"]
    left = [q.job_state(j) for j in ("1.0", "2.0")]
    q.close()
    assert stale == [], f"a stale run recorded for 1.0, acked once by its only worker: {stale}"
    assert stats.acked == 2
    assert left == [{}, {}]  # both acked: their hashes are gone
