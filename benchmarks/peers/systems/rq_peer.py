"""RQ, default configuration: queue ``default``, one ``rq worker --with-scheduler`` (a forked
work horse per job, the default Worker class); ``enqueue`` / ``enqueue_at``, one call per job.
Concurrency N (W4) is N such workers. Runs inside RQ's own virtual environment."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from body import record
from redis import Redis
from rq import Queue

URL = os.environ["BENCH_REDIS_URL"]
SETTINGS = "queue default, `rq worker --with-scheduler` (fork per job), N workers for N slots"


def job(key: str, sleep_ms: int = 0) -> None:
    record(key, sleep_ms)


def submit(keys: list[str], etas: list[float | None], sleep_ms: int = 0) -> None:
    q = Queue(connection=Redis.from_url(URL))
    for key, eta in zip(keys, etas):
        if eta is None:
            q.enqueue(job, key, sleep_ms)
        else:
            q.enqueue_at(datetime.fromtimestamp(eta, UTC), job, key, sleep_ms)


def worker_argvs(concurrency: int | None) -> list[list[str]]:
    return [["rq", "worker", "--with-scheduler", "--url", URL, "--quiet"]
            for _ in range(concurrency or 1)]
