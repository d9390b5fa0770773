"""The claim+ack cost of host exclusivity (one job per host at a time, across tasks).

Starts its own private redis-server (no persistence) and drains 10,000 queued jobs with
``Queue.claim`` (batch 100) + ``Queue.ack`` in one process, three ways, medians of 5 runs
(3 with --quick), all in the same run so the ratios compare like with like:

1. ``overlap``: tasks that allow overlap (``TaskSpec(exclusive=False)``: no host bookkeeping);
2. ``exclusive``: the default, every job on its own host (each claim takes the host, each
   ack frees it: one HGET, one HSET and the free's HGET/HDEL/LRANGE/DEL per job);
3. ``contended``: the default, two tasks of 5,000 jobs on the same 5,000 hosts, submitted
   together: every job of the second task finds its host busy, waits (state hostwait) and is
   moved back when the first task's job on that host is acknowledged;
4. ``grouped``: the default, every host in one limited group (``groups limit``) whose limit is
   never reached: the group bookkeeping alone (read the host's limits and the group's count at
   claim, count it, give it back at the end).

Run: ``.venv/bin/python benchmarks/host_limits.py [--quick]``
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import private_redis, quick_main  # noqa: E402
from benchmarks.queue_core import RESULT, jobs_of  # noqa: E402
from scheduler.queue.client import Queue, TaskSpec  # noqa: E402

JOBS = 10_000
BATCH = 100


def drain(client: redis.Redis, layout: str) -> float:
    """Jobs/s of claiming and acknowledging every queued job of ``layout``."""
    client.flushall()
    queue = Queue(client)
    if layout == "contended":
        for task in ("a", "b"):
            queue.create_task(TaskSpec(task))
            queue.enqueue(task, jobs_of(task, JOBS // 2))  # the same host names in both
    else:
        queue.create_task(TaskSpec("t", exclusive=layout != "overlap"))
        jobs = jobs_of("t", JOBS)
        if layout == "grouped":
            queue.set_group_limit("fleet", JOBS * 10, "bench")
            pipe = client.pipeline(transaction=False)
            for job in jobs:
                pipe.hset(queue.keys.host(job.host), "limits", "fleet")
            pipe.execute()
        queue.enqueue("t", jobs)
    done = 0
    start = time.perf_counter()
    while done < JOBS:
        jobs = queue.claim("bench", BATCH).jobs
        if not jobs:
            continue  # waiters were moved back by the last ack: claim again
        codes = queue.ack("bench", [(j.job_id, j.token, RESULT) for j in jobs])
        done += sum(1 for c in codes if c == 0)
    return JOBS / (time.perf_counter() - start)


def run(quick: bool) -> dict[str, Any]:
    runs = 3 if quick else 5
    rates: dict[str, list[float]] = {
        k: [] for k in ("overlap", "exclusive", "contended", "grouped")}
    with private_redis() as client:
        for _ in range(runs):  # interleaved, so load on the machine hits every layout alike
            for layout in rates:
                rates[layout].append(drain(client, layout))
    med = {k: round(statistics.median(v)) for k, v in rates.items()}
    return {"jobs": JOBS, "batch": BATCH, "runs": runs, "jobs_per_s": med,
            "exclusive_vs_overlap": round(med["exclusive"] / med["overlap"], 3),
            "contended_vs_overlap": round(med["contended"] / med["overlap"], 3),
            "grouped_vs_overlap": round(med["grouped"] / med["overlap"], 3)}


def table(r: dict[str, Any]) -> str:
    rows = [f"claim+ack of {r['jobs']:,} queued jobs, batch {r['batch']}, median of {r['runs']}"]
    for k, v in r["jobs_per_s"].items():
        rows.append(f"  {k:<10} {v:>8,} jobs/s  ({v / r['jobs_per_s']['overlap']:.2f}x overlap)")
    return "\n".join(rows)


if __name__ == "__main__":
    quick_main(__doc__, "host_limits", run, table)
