"""A worker frozen past its lease (SIGSTOP, a real OS process) cannot ack, fail or extend the
job once another worker claimed it again: the fencing token moved on."""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import time
from typing import Any

import redis

from scheduler.errors import StaleTokenError
from scheduler.queue.client import JobResult, Queue
from tests.faults.history import check_stream
from tests.queue_support import events, make_task

CTX = mp.get_context("fork")
LEASE_MS = 300


def frozen_worker(url: str, conn: Any) -> None:
    """Claim one job, report it, wait for 'go', then try to extend, fail and ack it."""
    client = redis.Redis.from_url(url)
    queue = Queue(client, lease_ms=LEASE_MS)
    job = queue.claim("w-frozen", 1).jobs[0]
    conn.send((job.job_id, job.token))
    conn.recv()  # the parent stops us (SIGSTOP) before it sends 'go'
    answers: dict[str, str] = {}
    answers["extend"] = queue.extend("w-frozen", [(job.job_id, job.token)])[0].name
    try:
        queue.fail("w-frozen", job.job_id, job.token, JobResult(1), error="late")
        answers["fail"] = "accepted"
    except StaleTokenError:
        answers["fail"] = "StaleTokenError"
    answers["ack"] = queue.ack("w-frozen", [(job.job_id, job.token, JobResult(0))])[0].name
    conn.send(answers)


def test_a_worker_stopped_past_its_lease_cannot_finish_a_job_claimed_again(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    queue = Queue(client)
    make_task(queue, "t", 1, idempotent=True)
    parent, child = CTX.Pipe()
    proc = CTX.Process(target=frozen_worker, args=(redis_url, child))
    proc.start()
    try:
        # Given a worker that claimed the job, then froze (SIGSTOP) past its lease
        job_id, old_token = parent.recv()
        os.kill(proc.pid, signal.SIGSTOP)
        time.sleep(LEASE_MS * 2 / 1000)
        # When another worker claims the job again
        [again] = queue.claim("w-live", 1, lease_ms=60_000).jobs
        assert (again.job_id, again.after_loss, again.token) == (job_id, True, old_token + 1)
        # And the frozen worker wakes up and tries to finish it
        parent.send("go")
        os.kill(proc.pid, signal.SIGCONT)
        answers = parent.recv()
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        proc.join(timeout=30)
    # Then every one of its answers is refused, and the job is still the live worker's
    assert answers == {"extend": "STALE_TOKEN", "fail": "StaleTokenError", "ack": "STALE_TOKEN"}
    state = queue.job_state(job_id)
    assert (state["state"], state["owner"], state["token"]) == ("running", "w-live", str(again.token))
    history = [e for e in events(client) if e.get("job") == job_id]
    assert [e["kind"] for e in history] == ["claim", "lost", "claim", "stale", "stale"]
    # and each refused result is recorded: proof that the frozen worker ran the job too
    late = [(e["verb"], e["reason"], e["token"], e["current_token"], e["worker"]) for e in history[3:]]
    assert late == [("fail", "stale_token", str(old_token), str(again.token), "w-frozen"),
                    ("ack", "stale_token", str(old_token), str(again.token), "w-frozen")]
    assert queue.task_state("t")["running"] == "1"
    check_stream(client, require_end=False)
    client.close()
