"""Dramatiq with its Redis broker, default configuration (``dramatiq dramatiq_peer``: one
process per core, 8 threads each, the default middleware); ``send`` /
``send_with_options(delay=)``, one call per job. Concurrency N (W4) is one process of N
threads. Runs inside Dramatiq's own virtual environment."""

from __future__ import annotations

import os
import time

import dramatiq
from body import record
from dramatiq.brokers.redis import RedisBroker

URL = os.environ["BENCH_REDIS_URL"]
SETTINGS = "RedisBroker, processes = cores, 8 threads each, default middleware"
dramatiq.set_broker(RedisBroker(url=URL))


@dramatiq.actor
def job(key: str, sleep_ms: int = 0) -> None:
    record(key, sleep_ms)


def submit(keys: list[str], etas: list[float | None], sleep_ms: int = 0) -> None:
    for key, eta in zip(keys, etas):
        if eta is None:
            job.send(key, sleep_ms)
        else:
            job.send_with_options(args=(key, sleep_ms),
                                  delay=max(0, int((eta - time.time()) * 1000)))


def worker_argvs(concurrency: int | None) -> list[list[str]]:
    extra = ["--processes", "1", "--threads", str(concurrency)] if concurrency else []
    return [["dramatiq", "dramatiq_peer", *extra]]
