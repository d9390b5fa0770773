"""The node's presence while one shard (not shard 0) does not answer: the heartbeat still
writes it (shard 0 answers), so status, doctor, the exporter and the recorders' dead-node
takeover see a live node; and a change of the shard count meanwhile still stops it.
"""

from __future__ import annotations

import threading
import time

from scheduler.config import Settings
from scheduler.errors import ConfigError
from scheduler.queue.client import JobSpec, TaskSpec
from scheduler.queue.presence import read_workers
from scheduler.queue.sharded import ShardedQueue, open_queue
from scheduler.queue.shards import Shards
from tests.conftest import cluster_client
from workers.config import NodeConfig
from workers.heartbeat import Heartbeat
from workers.slots import Running, Slots

SHARDS = Shards("fs", 3)
LEASE_MS = 1_000


def test_a_live_node_stays_live_and_sees_a_count_change_while_a_shard_is_silent(
        cluster_url, redis_cluster):
    q = open_queue(cluster_client(cluster_url), SHARDS, lease_ms=LEASE_MS)
    assert isinstance(q, ShardedQueue)
    q.create_task(TaskSpec("1", exclusive=False))
    q.create_task(TaskSpec("2", exclusive=False))
    q.claim("warm", 1)
    q.extend("warm", [("3.0", 1), ("1.0", 1), ("2.0", 1)])
    q.enqueue("1", [JobSpec("1.0", "h1")])
    q.enqueue("2", [JobSpec("2.0", "h2")])
    jobs = q.claim("w1", 10).jobs
    assert {j.job_id for j in jobs} == {"1.0", "2.0"}
    slots = Slots(10)
    slots.add(Running(j.job_id, j.token, j.task_id, 0, True, 3600.0) for j in jobs)
    config = NodeConfig(Settings(), lease_ms=LEASE_MS, heartbeat_ms=LEASE_MS // 3,
                        worker_id="w1", recorder=False)
    hb = Heartbeat(q, q.client, SHARDS.coord, config, slots, shards=SHARDS)
    hb.beat()
    assert [w["worker"] for w in read_workers(q.client, "fs") if not w["stale"]] == ["w1"]
    stop = threading.Event()
    outcome: list[BaseException] = []

    def guarded() -> None:  # Node._spawn: a ConfigError stops the node
        try:
            hb.run(stop)
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    thread = threading.Thread(target=guarded, daemon=True)
    with redis_cluster.down_for_good(SHARDS.all[2].due()):
        thread.start()
        time.sleep(2 * LEASE_MS / 1000 + 0.5)
        rows = read_workers(q.client, "fs")  # shard 0 answers
        renewed_1 = q.job_state("1.0")
        q.client.set(SHARDS.count_key, 4)  # the operator's rolling change of queue_shards
        thread.join(3 * LEASE_MS / 1000)
        stop.set()
        thread.join(5)
    q.close()
    assert renewed_1["owner"] == "w1"  # alive: shard 1's lease was renewed all along
    stale = [w["worker"] for w in rows if w["stale"]]
    problems = []
    if stale:
        problems.append(f"w1 beats every 0.5 s and shard 0 answers, yet it is shown dead: {rows}")
    if not any(isinstance(e, ConfigError) for e in outcome):
        problems.append(f"the count became 4 and w1 (3 shards) did not stop: {outcome}")
    assert not problems, "; ".join(problems)
