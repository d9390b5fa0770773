"""Celery, default configuration with the Redis broker: no result backend, prefork pool with
one process per core, prefetch multiplier 4; ``apply_async`` (``eta``/``countdown``), one call
per job. Runs inside Celery's own virtual environment."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from body import record
from celery import Celery

URL = os.environ["BENCH_REDIS_URL"]
SETTINGS = "broker Redis, no result backend, prefork, concurrency = cores, prefetch x4"
app = Celery("celery_peer", broker=URL)


@app.task
def job(key: str, sleep_ms: int = 0) -> None:
    record(key, sleep_ms)


def submit(keys: list[str], etas: list[float | None], sleep_ms: int = 0) -> None:
    for key, eta in zip(keys, etas):
        if eta is None:
            job.apply_async((key, sleep_ms))
        else:
            job.apply_async((key, sleep_ms), eta=datetime.fromtimestamp(eta, UTC))


def worker_argvs(concurrency: int | None) -> list[list[str]]:
    extra = ["--concurrency", str(concurrency)] if concurrency else []
    return [["celery", "-A", "celery_peer", "worker", "--loglevel", "WARNING", *extra]]
