"""A node outlives a Redis restart: claims, heartbeats and acks resume, nothing is lost."""

from __future__ import annotations

import time
from pathlib import Path

import redis

from tests.faults.history import check_stream
from tests.worker_support import (
    WorkerProcess,
    dump,
    final_outcomes,
    submit,
    wait_until,
    worker_args,
)


def test_a_node_goes_on_after_redis_is_killed_and_restarted(private_redis, tmp_path: Path) -> None:
    # Given a node on a Redis with AOF (fsync always), running jobs of 0.5 s
    private_redis.restart(appendonly=True)
    client = redis.Redis.from_url(private_redis.url, decode_responses=True)
    before = submit(client, "41", 8, options={"duration_ms": 500})
    w = WorkerProcess(private_redis.url, tmp_path, worker_args("node-r", slots=4, processes=1,
                                                               lease="3s")).start()
    try:
        wait_until(lambda: "acked" in final_outcomes(client, before).values(), 15,
                   "a first ack", w.tail, [w])
        # When Redis is killed with SIGKILL and comes back a second later
        private_redis.kill()
        time.sleep(1.0)
        private_redis.start()
        client = redis.Redis.from_url(private_redis.url, decode_responses=True)
        # Then the node reconnects by itself: the jobs queued before end, and new ones run
        after = submit(client, "42", 4)
        jobs = before + after
        wait_until(lambda: set(final_outcomes(client, jobs).values()) == {"acked"}, 30,
                   "every job acked", lambda: w.tail() + dump(client), [w])
        assert w.proc.poll() is None
        check_stream(client)
    finally:
        w.stop()
