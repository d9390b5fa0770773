"""arq, default configuration: ``arq arq_peer.WorkerSettings`` (max_jobs 10, poll delay
0.5 s); ``enqueue_job`` (``_defer_until``), one awaited call per job. Its body is the same RPUSH
as body.py through arq's own async client. Runs inside arq's own virtual environment."""

from __future__ import annotations

import asyncio
import os
import time
from datetime import UTC, datetime

from arq import create_pool
from arq.connections import RedisSettings

URL = os.environ["BENCH_REDIS_URL"]
SETTINGS = "WorkerSettings defaults: max_jobs 10, poll_delay 0.5 s; max_jobs N for N slots"
DONE = "bench:done"


async def job(ctx: dict, key: str, sleep_ms: int = 0) -> None:
    if sleep_ms:
        await asyncio.sleep(sleep_ms / 1000)
    await ctx["redis"].rpush(DONE, f"{key} {time.time():.6f}")


class WorkerSettings:
    functions = [job]
    redis_settings = RedisSettings.from_dsn(URL)


class WorkerSettings4:  # arq reads the class's own attributes only (no inheritance)
    functions = [job]
    redis_settings = RedisSettings.from_dsn(URL)
    max_jobs = 4


def submit(keys: list[str], etas: list[float | None], sleep_ms: int = 0) -> None:
    async def go() -> None:
        pool = await create_pool(RedisSettings.from_dsn(URL))
        for key, eta in zip(keys, etas):
            if eta is None:
                await pool.enqueue_job("job", key, sleep_ms)
            else:
                await pool.enqueue_job("job", key, sleep_ms,
                                       _defer_until=datetime.fromtimestamp(eta, UTC))
        await pool.aclose()
    asyncio.run(go())


def worker_argvs(concurrency: int | None) -> list[list[str]]:
    if concurrency not in (None, 4):
        raise ValueError("arq_peer defines WorkerSettings4 only")
    return [["arq", "arq_peer.WorkerSettings" + ("4" if concurrency else "")]]
