"""Redis faults under the queue: kill -9 with AOF (appendfsync always) loses no acknowledged
enqueue; a SCRIPT FLUSH or a restart mid-run costs nothing but a script reload."""

from __future__ import annotations

import threading
import time

import redis

from scheduler.errors import Code
from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from scheduler.queue.scripts import script_source
from tests.faults.history import check_stream
from tests.queue_support import KEYS
from tests.servers import RedisServer


def test_kill_minus_nine_after_acknowledged_enqueues_loses_no_job(private_redis: RedisServer) -> None:
    # Given a Redis with AOF fsynced at every write, and a producer enqueueing batches of 100
    private_redis.restart(appendonly=True)
    client = redis.Redis.from_url(private_redis.url, decode_responses=True)
    queue = Queue(client)
    queue.create_task(TaskSpec("t"))
    acknowledged: list[list[str]] = []
    attempted: list[list[str]] = []

    def produce() -> None:
        for batch in range(10_000):
            ids = [f"t.{batch * 100 + k}" for k in range(100)]
            attempted.append(ids)
            try:
                queue.enqueue("t", [JobSpec(i, f"h-{i}") for i in ids])  # a host per job
            except redis.ConnectionError:
                return
            acknowledged.append(ids)

    producer = threading.Thread(target=produce)
    producer.start()
    # When redis-server is killed with SIGKILL in the middle of the stream
    while len(acknowledged) < 20:
        time.sleep(0.01)
    private_redis.kill()
    producer.join(timeout=60)
    assert not producer.is_alive() and len(acknowledged) >= 20
    private_redis.start()
    # Then every acknowledged job is back after the restart, and the batch in flight is
    # either all there or not there at all (a script is atomic in the AOF too)
    client = redis.Redis.from_url(private_redis.url, decode_responses=True)
    queued = set(client.zrange(KEYS.due("normal"), 0, -1))
    for ids in acknowledged:
        assert queued.issuperset(ids)
        assert all(client.exists(KEYS.job(i)) for i in ids[:3])
    in_flight = attempted[len(acknowledged)] if len(attempted) > len(acknowledged) else []
    assert len(queued.intersection(in_flight)) in (0, len(in_flight))
    assert len(queued) == int(client.hget(KEYS.stats, "enqueued"))
    assert int(client.hget(KEYS.task("t"), "total")) == len(queued)
    check_stream(client, require_end=False)
    client.close()


def test_the_queue_recovers_from_script_flush_in_the_middle_of_a_run(redis_client: redis.Redis) -> None:
    queue = Queue(redis_client)
    queue.create_task(TaskSpec("t"))
    queue.enqueue("t", [JobSpec(f"t.{k}", f"h{k}") for k in range(50)])  # a host per job
    sha = redis_client.register_script(script_source("claim")).sha
    done = 0
    for round_ in range(10):
        if round_ % 3 == 1:
            # Given the server forgot every script (SCRIPT FLUSH, a failover, a restart)
            redis_client.script_flush()
            assert redis_client.script_exists(sha) == [False]
        # When the queue goes on, redis-py's Script reloads on NOSCRIPT and the call succeeds
        jobs = queue.claim("w", 5).jobs
        assert redis_client.script_exists(sha) == [True]
        assert queue.extend("w", [(j.job_id, j.token) for j in jobs]) == [Code.OK] * len(jobs)
        if round_ % 3 == 1:
            redis_client.script_flush()
        done += sum(1 for c in queue.ack("w", [(j.job_id, j.token, JobResult(0)) for j in jobs]) if c == 0)
    assert done == 50 and queue.next_due()[1] is None
    check_stream(redis_client)


def test_a_restart_without_persistence_mid_run_needs_no_special_handling(private_redis: RedisServer) -> None:
    # The scripts are gone after a restart; the client reconnects and reloads them on first use.
    client = redis.Redis.from_url(private_redis.url, decode_responses=True)
    queue = Queue(client)
    queue.create_task(TaskSpec("t"))
    queue.enqueue("t", [JobSpec("t.0", "h")])
    private_redis.restart()
    queue.create_task(TaskSpec("t"))
    queue.enqueue("t", [JobSpec("t.0", "h")])
    assert [j.job_id for j in queue.claim("w", 1).jobs] == ["t.0"]
    client.close()
