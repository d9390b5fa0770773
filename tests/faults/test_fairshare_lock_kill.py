"""The overload lock's holder dies mid-reorder (kill -9 between chunks): a real worker takes over
once the lock's TTL has run out, finishes the reorder, and the queue stays whole.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import redis

from scheduler.queue.keys import PRIORITY_CLASSES, Keys
from tests.faults.history import check_stream
from tests.queue_support import redis_now_ms
from tests.worker_support import ROOT, WorkerProcess, events, submit, wait_until, worker_args

KEYS = Keys()
LOCK_MS = 1_500

HOLDER = """
import sys, time, redis
from scheduler.config import Settings
from scheduler.queue.fairshare import reorder_now
from scheduler.queue.client import Queue

client = redis.Redis.from_url(sys.argv[1], decode_responses=True)

def pause(chunk):
    if chunk == 3:
        print("paused", flush=True)
        time.sleep(600)

reorder_now(Queue(client), Settings(overload_threshold_ms=300, overload_lock_ms=int(sys.argv[2])),
            force=True, worker="holder", on_chunk=pause)
"""


def test_a_killed_lock_holder_is_taken_over_after_the_ttl_and_no_job_is_lost(
        redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> None:
    # Given an overdue backlog of two tasks (3,000 jobs: ten reorder chunks)
    now = redis_now_ms(redis_client)
    jobs = submit(redis_client, "a", 1_500, options={"duration_ms": 20}, due_ms=now - 60_000)
    jobs += submit(redis_client, "b", 1_500, options={"duration_ms": 20}, due_ms=now - 59_000)
    # and a process holding the overload lock, stopped after its third chunk
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, redis_url, str(LOCK_MS)], env=env,
                              stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "paused"
        # When it is killed there (kill -9: no finally, no unlock)
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    killed = redis_now_ms(redis_client)
    lock_left = redis_client.pttl(KEYS.overload_lock)
    assert redis_client.get(KEYS.overload_lock).startswith("holder:") and lock_left > 0
    assert redis_client.hget(KEYS.stats, "fairshare_open").startswith("holder:")
    assert events(redis_client, ("reorder",)) == []
    # and a worker node serves the queue
    w = WorkerProcess(redis_url, tmp_path, worker_args("node-b", slots=4, processes=2, lease="5s"),
                      env={"FLEETSCHED_OVERLOAD_THRESHOLD_MS": "300",
                           "FLEETSCHED_OVERLOAD_LOCK_MS": str(LOCK_MS)}).start()
    try:
        wait_until(lambda: events(redis_client, ("reorder",)), 30, "the worker's reorder",
                   w.tail, [w])
        # Then the worker took over only after the dead holder's lock ran out
        [event] = events(redis_client, ("reorder",))
        detail = json.loads(event["detail"])
        assert event["worker"] == "node-b" and detail["complete"] is True
        assert detail["cut_ms"] >= killed + lock_left - 5
        assert redis_client.hget(KEYS.stats, "fairshare_open") is None
    finally:
        w.stop()
    # and every job is either done or queued exactly once, in one class, with its hash
    acked = {e["job"] for e in events(redis_client, ("ack",))}
    places: dict[str, int] = {}
    for prio in PRIORITY_CLASSES:
        for job_id in redis_client.zrange(KEYS.due(prio), 0, -1):
            places[job_id] = places.get(job_id, 0) + 1
    assert set(places.values()) <= {1}
    assert set(places) | acked == set(jobs) and not set(places) & acked
    assert all(redis_client.exists(KEYS.job(j)) for j in places)
    # and the pending jobs left are interleaved by task
    pending = [j for j in redis_client.zrange(KEYS.due("normal"), 0, -1)
               if redis_client.hget(KEYS.job(j), "state") == "pending"]
    head = [j.partition(".")[0] for j in pending[:20]]
    assert head.count("a") == head.count("b") == 10, head
    check_stream(redis_client, require_end=False)
