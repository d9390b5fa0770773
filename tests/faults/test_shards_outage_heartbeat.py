"""The heartbeat while one shard stays down: every chunk of leases (EXTEND_BATCH = 500) is
renewed where its shard answers, also after a chunk whose leases all live in the dead shard
(a task never spans shards, so a fan-out's jobs share one).

A node runs 500 jobs of one big task (task 2: shard 2) and then one job of task 1 (shard 1).
Shard 2's master dies and stays dead (no failover, as in tests/faults/test_shards_outage.py).
The real Heartbeat.run thread beats meanwhile: no other worker may claim 1.0 in shard 1, which
answered all along (before the fix the renewal stopped at the dead chunk: 1.0 ran twice).
"""

from __future__ import annotations

import threading
import time

from scheduler.config import Settings
from scheduler.queue.client import JobSpec, TaskSpec
from scheduler.queue.sharded import ShardedQueue, open_queue
from scheduler.queue.shards import Shards
from scheduler.redisdb.connect import REDIS_ERRORS
from tests.conftest import cluster_client
from workers.config import NodeConfig
from workers.heartbeat import EXTEND_BATCH, Heartbeat
from workers.slots import Running, Slots

SHARDS = Shards("fs", 3)
LEASE_MS = 3_000


def _queue(url: str) -> ShardedQueue:
    q = open_queue(cluster_client(url), SHARDS, lease_ms=LEASE_MS)
    assert isinstance(q, ShardedQueue)
    return q


def test_a_chunk_all_in_the_dead_shard_does_not_stop_the_renewal_of_the_next_chunks(
        cluster_url, redis_cluster):
    q = _queue(cluster_url)
    q.create_task(TaskSpec("1", exclusive=False))
    q.create_task(TaskSpec("2", exclusive=False))
    q.claim("warm", 1)
    q.extend("warm", [("3.0", 1), ("1.0", 1), ("2.0", 1)])
    q.enqueue("2", [JobSpec(f"2.{k}", f"h{k}") for k in range(EXTEND_BATCH)])
    q.enqueue("1", [JobSpec("1.0", "h-one")])
    q._next = 2
    big = q.claim("w1", EXTEND_BATCH).jobs
    q._next = 1
    one = q.claim("w1", 1).jobs
    assert len(big) == EXTEND_BATCH and [j.job_id for j in one] == ["1.0"]
    slots = Slots(EXTEND_BATCH + 10)
    slots.add(Running(j.job_id, j.token, j.task_id, 0, True, 3600.0) for j in big + one)
    config = NodeConfig(Settings(), slots=EXTEND_BATCH + 10, lease_ms=LEASE_MS,
                        heartbeat_ms=LEASE_MS // 3, worker_id="w1", recorder=False)
    hb = Heartbeat(q, q.client, SHARDS.coord, config, slots, shards=SHARDS)
    hb.beat()  # all answer: every lease renewed
    stop = threading.Event()
    thread = threading.Thread(target=hb.run, args=(stop,), daemon=True)

    other = _queue(cluster_url)
    got: list[str] = []
    with redis_cluster.down_for_good(SHARDS.all[2].due()):
        thread.start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3 * LEASE_MS / 1000 and "1.0" not in got:
            other._next = 1  # shard 1 first; batch 1
            try:
                got += [j.job_id for j in other.claim("w2", 1).jobs]
            except REDIS_ERRORS:
                pass
            time.sleep(0.25)
        state = q.job_state("1.0")
        stop.set()
        thread.join(5)
    other.close()
    q.close()
    assert "1.0" not in got, (
        f"1.0 (shard 1, which answered all along) was claimed again by w2 while w1 ran it "
        f"and its heartbeat beat: {state}")
