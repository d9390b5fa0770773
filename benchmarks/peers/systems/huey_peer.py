"""Huey with RedisHuey, default configuration (``huey_consumer huey_peer.huey``: one worker
thread, scheduler every second, polling delay 0.1 s); calling the task / ``schedule(eta=)``,
one call per job. Concurrency N (W4) is ``-w N``. Runs inside Huey's own virtual environment."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from body import record
from huey import RedisHuey

URL = os.environ["BENCH_REDIS_URL"]
SETTINGS = "RedisHuey, 1 worker thread, scheduler interval 1 s, poll delay 0.1 s; -w N for N"
huey = RedisHuey("bench", url=URL)


@huey.task()
def job(key: str, sleep_ms: int = 0) -> None:
    record(key, sleep_ms)


def submit(keys: list[str], etas: list[float | None], sleep_ms: int = 0) -> None:
    for key, eta in zip(keys, etas):
        if eta is None:
            job(key, sleep_ms)
        else:
            job.schedule(args=(key, sleep_ms), eta=datetime.fromtimestamp(eta, UTC))


def worker_argvs(concurrency: int | None) -> list[list[str]]:
    extra = ["-w", str(concurrency)] if concurrency else []
    return [["huey_consumer", "huey_peer.huey", "-q", *extra]]
