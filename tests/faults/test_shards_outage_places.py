"""A job claimed in shard 1 that cannot take its place in shard 0 while shard 0 fails is given
back (no attempt counted) or kept until it can be, never failed as lost: it never ran (issue 26
section 6, first bullet: killing shard 0's master mid-drain failed non-idempotent jobs of the
other shards as lost, "stopped renewing its lease", while their node was alive).

Two real faults, each deterministic:
- shard 0's master stalls (CLIENT PAUSE: alive, answering nothing) past the lease while the
  node's places call waits on it: before the fix the claim waited with the job in hand, nothing
  renewed its lease, and another node's claim failed it as lost;
- shard 0's master is killed -9 before the node's first give-back ever (release.lua not yet
  loaded: redis-py loads a missing script on every master, which fails while one is dead): the
  places call and the give-back fail at once; before the fix the job was left to run out.

Task 1 (shard 1) is exclusive and not idempotent; node w1 claims it, node w2 keeps claiming in
shard 1 (it would find the lease run out) and gives back what it gets. The end: job 1.0's events
in shard 1's stream have no `lost`, the job is pending or running, and it then runs and is
acked once.
"""

from __future__ import annotations

import json
import threading
import time

from scheduler.config import Settings
from scheduler.queue.client import JobResult, JobSpec, TaskSpec
from scheduler.queue.sharded import ShardedQueue, open_queue
from scheduler.queue.shards import Shards
from scheduler.redisdb.connect import REDIS_ERRORS
from tests.conftest import cluster_client
from workers.config import NodeConfig
from workers.heartbeat import Heartbeat
from workers.slots import Slots

SHARDS = Shards("fs", 3)
LEASE_MS = 2_000
JOB = "1.0"


def _queue(url: str) -> ShardedQueue:
    q = open_queue(cluster_client(url), SHARDS, lease_ms=LEASE_MS)
    assert isinstance(q, ShardedQueue)
    return q


def _setup(q: ShardedQueue, *, release_loaded: bool) -> None:
    q.create_task(TaskSpec("1", idempotent=False))  # exclusive by default: needs a place
    q.claim("warm", 1)  # claim.lua on every master (nothing due)
    q.coord.places("free", [["0.0", 1]])
    q.extend("warm", [("3.0", 1), ("1.0", 1), ("2.0", 1)])
    if release_loaded:
        q.release("warm", [("1.9", 1)])
    q.enqueue("1", [JobSpec(JOB, "db1")])


def _w2_claims(other: ShardedQueue, seen: dict[str, list[str]]) -> None:
    """One claim of node w2 in shard 1 alone (it does not wait on shard 0): a lease run out
    there is found now. What it gets it gives back (it cannot take the place either)."""
    try:
        claim = other.parts[1].claim("w2", 10, shard_mode="remote")
    except REDIS_ERRORS:
        return
    seen["lost"] += claim.lost
    if claim.jobs:
        seen["w2"] += [j.job_id for j in claim.jobs]
        other.parts[1].release("w2", [(j.job_id, j.token) for j in claim.jobs])


def _events_of(q: ShardedQueue, job_id: str) -> list[dict[str, str]]:
    events = q.client.xrange(SHARDS.all[1].events)
    return [fields for _, fields in events if fields.get("job") == job_id]


def _finish(q: ShardedQueue) -> None:
    """Every shard answers again: 1.0 runs once (claimed with its place) and is acked."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            jobs = q.claim("w3", 10).jobs
        except REDIS_ERRORS:
            jobs = []
        mine = [j for j in jobs if j.job_id == JOB]
        if mine:
            assert q.ack("w3", [(JOB, mine[0].token, JobResult())]) == [0]
            return
        time.sleep(0.2)
    raise AssertionError(f"{JOB} never ran after the outage: {q.job_state(JOB)}")


def _verdict(q: ShardedQueue, seen: dict[str, list[str]]) -> None:
    events = _events_of(q, JOB)
    kinds = [e.get("kind") for e in events]
    assert JOB not in seen["lost"] and "lost" not in kinds, (
        f"{JOB} never started, yet it was failed as lost: {json.dumps(events)}")
    assert kinds.count("ack") == 1 and kinds.count("fail") == 0, kinds
    assert any(e.get("kind") == "release" and e.get("worker") == "w1" for e in events), (
        kinds)  # w1 gave it back (no attempt counted)
    task = q.task_state("1")
    assert task.get("succeeded") == "1" and task.get("lost", "0") == "0", task


def test_a_claim_whose_places_call_stalls_past_the_lease_gives_its_job_back(
        cluster_url, redis_cluster):
    q, other, last = _queue(cluster_url), _queue(cluster_url), _queue(cluster_url)
    _setup(q, release_loaded=True)
    master0 = redis_cluster.master_of(SHARDS.all[0].due())
    seen: dict[str, list[str]] = {"lost": [], "w2": []}
    handed: list[object] = []

    def w1_claims() -> None:
        q._next = 1  # shard 1 first: 1.0 claimed, then its place asked of the paused shard 0
        try:
            handed.append([j.job_id for j in q.claim("w1", 1).jobs])
        except REDIS_ERRORS as exc:
            handed.append(exc)

    pause_s = 3 * LEASE_MS / 1000
    master0.conn.execute_command("CLIENT", "PAUSE", str(int(pause_s * 1000)), "ALL")
    t0 = time.monotonic()
    t = threading.Thread(target=w1_claims, daemon=True)
    t.start()
    # w2 starts once w1 holds 1.0 (a loaded machine may run w2's first claim before w1's: w1
    # would then find nothing in shard 1 and have nothing to give back)
    while not any(e.get("kind") == "claim" and e.get("worker") == "w1"
                  for e in _events_of(other, JOB)) and time.monotonic() - t0 < pause_s / 2:
        time.sleep(0.02)
    while time.monotonic() - t0 < pause_s - 0.5:
        _w2_claims(other, seen)
        time.sleep(0.1)
    t.join(30)
    assert not t.is_alive()
    assert JOB not in seen["lost"], f"{JOB} never started, yet w2 found it lost: {handed}"
    assert handed and JOB not in (handed[0] if isinstance(handed[0], list) else []), handed
    # the take that w1's places call made once shard 0 answered again is freed (w1 gave 1.0 back)
    deadline = time.monotonic() + 5
    while q.client.hget(SHARDS.coord.tag + ":places", JOB) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not q.client.hget(SHARDS.coord.tag + ":places", JOB)
    _finish(last)
    _verdict(last, seen)
    for x in (q, other, last):
        x.close()


def test_a_job_that_cannot_be_given_back_while_shard_0_fails_over_is_kept_then_given_back(
        cluster_url, redis_cluster):
    q, other, last = _queue(cluster_url), _queue(cluster_url), _queue(cluster_url)
    _setup(q, release_loaded=False)
    config = NodeConfig(Settings(), lease_ms=LEASE_MS, heartbeat_ms=250, worker_id="w1",
                        recorder=False)
    heartbeat = Heartbeat(_queue(cluster_url), q.client, SHARDS.coord, config, Slots(2),
                          shards=SHARDS)
    seen: dict[str, list[str]] = {"lost": [], "w2": []}
    master0 = redis_cluster.master_of(SHARDS.all[0].due())
    replica0 = redis_cluster.replica_of(master0)
    master0.kill()
    q._next = 1  # shard 1 first: 1.0 claimed; shard 0 refuses its place and the give-back
    try:
        handed = [j.job_id for j in q.claim("w1", 1).jobs]
    except REDIS_ERRORS:
        handed = []
    assert JOB not in handed
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3 * LEASE_MS / 1000:  # the failover, and a lease after it
        try:
            heartbeat.beat()
        except REDIS_ERRORS:
            pass  # Heartbeat.run: retried within half a second
        _w2_claims(other, seen)
        time.sleep(0.25)
    redis_cluster.await_master(replica0)
    _finish(last)
    _verdict(last, seen)
    for x in (q, other, last, heartbeat.queue):
        x.close()
