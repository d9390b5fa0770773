"""A change of queue_shards down to 1 (the documented way: drain the queue, delete
{fs}:shards, restart the nodes with the new setting): a node still running with 3 shards stops
at its next heartbeat. Before, it went on: it claimed the new tasks of shard 0 and acked them
into the shard its count routed them to (refused: the job left running until its lease ran out,
then run again or failed for good though it had succeeded).
"""

from __future__ import annotations

import redis

from scheduler.errors import ConfigError
from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from scheduler.queue.sharded import check_shard_count, open_queue, recheck_shard_count
from scheduler.queue.shards import Shards
from scheduler.config import Settings
from workers.config import NodeConfig
from workers.heartbeat import Heartbeat
from workers.slots import Running, Slots

OLD = Shards("fs", 3)
NEW = Shards("fs", 1)


def test_a_node_left_running_with_3_shards_after_a_change_to_1_stops(redis_url):
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    old_q = open_queue(client, OLD, lease_ms=5_000)  # the old node: records 3
    assert client.get(OLD.count_key) == "3"
    # The operator drains the queue and deletes the key, then starts nodes/CLI with 1 shard.
    client.delete(OLD.count_key)
    check_shard_count(client, NEW)  # a new node or CLI of 1 shard starts: accepted
    new_q = open_queue(client, NEW, lease_ms=5_000)
    assert isinstance(new_q, Queue)
    new_q.create_task(TaskSpec("4", exclusive=False))
    new_q.enqueue("4", [JobSpec("4.0", "h4")])

    # The old node's heartbeat: it should stop (ConfigError) as the docs say.
    config = NodeConfig(Settings(), lease_ms=5_000, heartbeat_ms=1_000, worker_id="old",
                        recorder=False)
    hb = Heartbeat(old_q, client, OLD.coord, config, Slots(10), shards=OLD)
    stopped = False
    try:
        hb.beat()
    except ConfigError:
        stopped = True

    # What the old node does meanwhile: it claims 4.0 (shard 0 of its 3) and acks it.
    claim = old_q.claim("old", 10)
    got = [(j.job_id, j.token) for j in claim.jobs]
    codes = old_q.ack("old", [(jid, tok, JobResult()) for jid, tok in got]) if got else []
    state = new_q.job_state("4.0")
    client.close()
    assert stopped, (
        f"the node with queue_shards = 3 goes on after the queue became 1 shard; it claimed "
        f"{got}, its ack answered {codes}, and the job is left {state}")
