"""Does the metrics endpoint slow a node down? Drain rate with and without ``--metrics-port``.

    .venv/bin/python benchmarks/metrics.py            # 5 runs of each, 10,000 jobs
    .venv/bin/python benchmarks/metrics.py --quick    # 2 runs of each, 3,000 jobs

The drain of benchmarks/workers.py (N due zero-duration simulate jobs, one node in this
process, its children real processes, jobs/s from the due time to the last ack on the Redis
clock), run alternately without metrics and with the endpoint on and a scraper reading it
every 100 ms (150 times Prometheus' usual 15 s), so both see the same machine load; then the
cost of the metrics hooks per job, timed alone. Prints the medians and their ratio, then the
JSON (also written to benchmarks/results/metrics.json).
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import quick_main  # noqa: E402
from benchmarks.workers import drain_library  # noqa: E402
from scheduler.config import Settings  # noqa: E402
from tests.servers import free_port  # noqa: E402

SCRAPE_EVERY_S = 0.1


class Scraper:
    """Reads the node's /metrics every SCRAPE_EVERY_S until stopped; counts the scrapes."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.scrapes = 0
        self.thread: threading.Thread | None = None

    def start(self, node: Any) -> None:
        node.metrics.serve(node.config.settings.metrics_port, "127.0.0.1")
        url = f"http://127.0.0.1:{node.config.settings.metrics_port}/metrics"

        def loop() -> None:
            while not self.stop.wait(SCRAPE_EVERY_S):
                with urllib.request.urlopen(url, timeout=5) as resp:
                    resp.read()
                self.scrapes += 1
        self.thread = threading.Thread(target=loop, daemon=True)
        self.thread.start()


def hook_cost_us(jobs: int = 100_000, batch: int = 100) -> float:
    """Microseconds the metrics hooks add per job, timed alone (no Redis, no scheduler noise):
    one claim observation per batch, a queue-wait and a duration observation and a finished
    count per job, the counts added per batch as the finisher does."""
    import time

    from workers.metrics import NodeMetrics
    from workers.slots import Slots

    m = NodeMetrics(Slots(200))
    dues = [1_000] * batch
    started = time.perf_counter()
    for _ in range(jobs // batch):
        m.claimed_jobs(2_000, dues, 0.001)
        m.counted({"claimed": batch})
        for _ in range(batch):
            m.job_done(5, None)
        m.counted({"acked": batch})
    return (time.perf_counter() - started) / jobs * 1e6


def run(quick: bool) -> dict[str, Any]:
    from benchmarks._common import private_redis

    runs, n = (2, 3_000) if quick else (5, 10_000)
    plain, metered, scrapes = [], [], []
    with private_redis() as raw:
        import redis

        kw = raw.connection_pool.connection_kwargs
        client = redis.Redis(host=kw["host"], port=kw["port"], decode_responses=True)
        for _ in range(runs):
            plain.append(drain_library(client, n, 200, 2)["jobs_per_s"])
            scraper = Scraper()
            settings = dataclasses.replace(Settings(), metrics_port=free_port())
            try:
                metered.append(drain_library(client, n, 200, 2, settings, scraper.start)["jobs_per_s"])
            finally:
                scraper.stop.set()
            scrapes.append(scraper.scrapes)
        client.close()
    off, on = statistics.median(plain), statistics.median(metered)
    return {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
            "jobs": n, "runs": runs, "slots": 200, "processes": 2,
            "without_metrics_jobs_per_s": round(off), "with_metrics_jobs_per_s": round(on),
            "with_over_without": round(on / off, 3),
            "runs_without": [round(x) for x in plain], "runs_with": [round(x) for x in metered],
            "scrapes_per_run": scrapes, "hook_us_per_job": round(hook_cost_us(), 2),
            "load_average_1m": round(os.getloadavg()[0], 2)}


def table(r: dict[str, Any]) -> str:
    return (f"drain of {r['jobs']} jobs, median of {r['runs']} runs each\n"
            f"  without metrics  {r['without_metrics_jobs_per_s']:>8} jobs/s  {r['runs_without']}\n"
            f"  with metrics     {r['with_metrics_jobs_per_s']:>8} jobs/s  {r['runs_with']} "
            f"(scraped every {SCRAPE_EVERY_S * 1000:g} ms: {r['scrapes_per_run']})\n"
            f"  ratio with/without  {r['with_over_without']}\n"
            f"  the hooks alone: {r['hook_us_per_job']} us per job "
            f"(the node's budget at {r['without_metrics_jobs_per_s']} jobs/s: "
            f"{1e6 / r['without_metrics_jobs_per_s']:.0f} us)")


if __name__ == "__main__":
    quick_main(__doc__, "metrics", run, table)
