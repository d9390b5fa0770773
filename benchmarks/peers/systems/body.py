"""The job body every system runs: optionally sleep, then one Redis round trip (RPUSH) that
records the job's key and the wall-clock time it finished.

The key is what the benchmark submitted (``h000123``, ``a:h000123``); the driver matches it to
the job's due time. One client per process, made on first use (after any fork), from
``BENCH_REDIS_URL``. arq's body is the same RPUSH through its own async client.
"""

from __future__ import annotations

import os
import time

import redis

DONE = "bench:done"
_client: tuple[int, redis.Redis] | None = None


def client() -> redis.Redis:
    global _client
    if _client is None or _client[0] != os.getpid():
        _client = (os.getpid(), redis.Redis.from_url(os.environ["BENCH_REDIS_URL"]))
    return _client[1]


def record(key: str, sleep_ms: int = 0) -> None:
    """The job: sleep ``sleep_ms`` (W4 only), then RPUSH "KEY TIME" onto ``bench:done``."""
    if sleep_ms:
        time.sleep(sleep_ms / 1000)
    client().rpush(DONE, f"{key} {time.time():.6f}")
