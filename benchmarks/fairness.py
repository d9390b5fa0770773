"""Fair-share benchmark: Alice and Bob on one node, and what a reorder costs.

    .venv/bin/python benchmarks/fairness.py            # full run (a few minutes)
    .venv/bin/python benchmarks/fairness.py --quick    # smaller sizes, one run each

Starts its own private redis-server (tests.servers.RedisServer, no persistence) and measures:
1. Alice/Bob (seed 002): one real worker node (``python -m scheduler worker``, 8 slots, simulate
   executor). Alice submits 3,000 jobs of 20 ms; Bob submits 4 jobs of 20 ms a second later.
   Completion time = the task's last ack minus its enqueue (Redis clock, from the events).
   Run with fair share on (``fair_share_by=task``) and off (``off``: due order only), in the
   same run, alternating; the overload threshold is the default (`overload_threshold_ms`, 100 ms).
2. The cost of one reorder of 10,000 and 100,000 overdue jobs (ten tasks): total time, script
   calls, the mean time Redis spent in one chunk script and in one read page (INFO
   commandstats), the longest single call measured by the client (round trip, read pages and
   chunks), and what Redis itself logged slower than 1 ms (SLOWLOG) during the reorder.
Figures are medians over the runs. Prints a table, then the JSON (also written to
benchmarks/results/fairness.json).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import quick_main  # noqa: E402
from scheduler.config import Settings  # noqa: E402
from scheduler.queue.client import JobSpec, Queue, TaskSpec  # noqa: E402
from scheduler.queue.fairshare import reorder_now  # noqa: E402
from scheduler.queue.keys import Keys  # noqa: E402
from tests.servers import RedisServer, redis_server_binary  # noqa: E402

KEYS = Keys()
THRESHOLD_MS = Settings().overload_threshold_ms  # the default
JOB_MS = 20
SLOTS = 8
SLOWLOG_US = 1_000  # Redis logs every command slower than this during the reorder (1 ms)


def submit(client: redis.Redis, task: str, n: int, duration_ms: int, due_ms: int = 0) -> None:
    pipe = client.pipeline(transaction=False)
    for k in range(n):
        pipe.hset(KEYS.host(f"{task}-h{k}"), mapping={"address": "127.0.0.1", "port": 22,
                                                       "user": "", "vars": "{}"})
    pipe.execute()
    spec = {"action": "command", "params": {"cmd": ["true"]}, "executor": "simulate",
            "executor_options": {"duration_ms": duration_ms}}
    q = Queue(client, KEYS)
    q.create_task(TaskSpec(task, spec=spec, timeout_ms=600_000))
    q.enqueue(task, [JobSpec(f"{task}.{k}", f"{task}-h{k}", due_ms=due_ms) for k in range(n)])


def start_worker(url: str, tmp: Path, fair_share_by: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env.update(FLEETSCHED_REDIS_URL=url, FLEETSCHED_STATE_DIR=str(tmp / "state"),
               XDG_CONFIG_HOME=str(tmp / "config"), FLEETSCHED_LOG_LEVEL="warning",
               FLEETSCHED_FAIR_SHARE_BY=fair_share_by, PYTHONPATH=str(ROOT))
    args = [sys.executable, "-P", "-m", "scheduler", "worker", "--id", "bench",
            "--slots", str(SLOTS), "--processes", "2", "--lease", "30s", "--grace", "5s", "--no-recorder"]
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=tmp)


def done(client: redis.Redis, task: str, n: int) -> bool:
    return int(client.hget(KEYS.task(task), "succeeded") or 0) >= n


def alice_bob(url: str, tmp: Path, alice_jobs: int, fair_share_by: str) -> dict[str, Any]:
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushall()
    proc = start_worker(url, tmp, fair_share_by)
    try:
        deadline = time.monotonic() + 30
        while not client.hexists(KEYS.workers, "bench"):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("the worker did not start")
            time.sleep(0.05)
        submit(client, "alice", alice_jobs, JOB_MS)
        time.sleep(1.0)
        submit(client, "bob", 4, JOB_MS)
        deadline = time.monotonic() + 600
        while not (done(client, "alice", alice_jobs) and done(client, "bob", 4)):
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit("the run did not finish")
            time.sleep(0.05)
    finally:
        proc.terminate()
        proc.wait(30)
    queued: dict[str, int] = {}
    last_ack: dict[str, int] = {}
    reorders = 0
    for _id, e in client.xrange(KEYS.events):
        if e["kind"] == "enqueue":
            queued.setdefault(e["task"], int(e["ts"]))
        elif e["kind"] == "ack":
            last_ack[e["task"]] = int(e["ts"])
        elif e["kind"] == "reorder":
            reorders += 1
    client.close()
    a = (last_ack["alice"] - queued["alice"]) / 1000
    b = (last_ack["bob"] - queued["bob"]) / 1000
    return {"alice_s": a, "bob_s": b, "ratio": b / a, "reorders": reorders}


def reorder_cost(url: str, jobs: int) -> dict[str, Any]:
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushall()
    q = Queue(client, KEYS)
    due = int(time.time() * 1000) - 600_000
    per_task = jobs // 10
    for t in range(10):
        q.create_task(TaskSpec(f"t{t}"))
        q.enqueue(f"t{t}", [JobSpec(f"t{t}.{k}", f"web-{t}-{k:06d}.dc1.example.net", due_ms=due + t)
                            for k in range(per_task)])
    client.config_set("slowlog-max-len", 10_000)
    client.config_set("slowlog-log-slower-than", SLOWLOG_US)
    client.slowlog_reset()
    client.config_resetstat()
    settings = Settings(overload_threshold_ms=1_000, overload_lock_ms=30_000)
    summary = reorder_now(q, settings, force=True)
    stats = client.info("commandstats")
    log = client.slowlog_get(10_000)
    client.config_set("slowlog-log-slower-than", 10_000)
    assert summary is not None and summary.complete
    client.close()
    scripts = stats.get("cmdstat_evalsha", {"usec_per_call": 0.0})
    reads = stats.get("cmdstat_zrange", {"usec_per_call": 0.0})
    server_max = max((e["duration"] for e in log), default=0) / 1000
    return {"jobs": jobs, "moved": summary.jobs, "total_ms": summary.duration_ms,
            "calls": len(summary.calls_ms), "chunks": summary.chunks,
            "longest_call_ms": round(summary.longest_call_ms, 2),
            "chunk_redis_ms_avg": round(scripts["usec_per_call"] / 1000, 3),
            "page_redis_ms_avg": round(reads["usec_per_call"] / 1000, 3),
            "slowlog_entries": len(log), "longest_redis_command_ms": round(server_max, 2)}


def median(rows: list[dict[str, Any]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def run(quick: bool) -> dict[str, Any]:
    runs = 1 if quick else 3
    alice_jobs = 800 if quick else 3_000
    sizes = [10_000] if quick else [10_000, 100_000]
    binary = redis_server_binary()
    if binary is None:
        raise SystemExit("redis-server not found on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(binary=binary, dir=Path(tmp))
        server.start()
        try:
            on: list[dict[str, Any]] = []
            off: list[dict[str, Any]] = []
            for i in range(runs):
                on.append(alice_bob(server.url, Path(tmp), alice_jobs, "task"))
                off.append(alice_bob(server.url, Path(tmp), alice_jobs, "off"))
                print(f"run {i + 1}/{runs}: on {on[-1]}  off {off[-1]}", file=sys.stderr)
            costs: dict[str, list[dict[str, Any]]] = {}
            for size in sizes:
                costs[str(size)] = [reorder_cost(server.url, size) for _ in range(runs)]
        finally:
            server.stop()
    return {
        "quick": quick, "runs": runs, "alice_jobs": alice_jobs, "bob_jobs": 4, "job_ms": JOB_MS,
        "slots": SLOTS, "overload_threshold_ms": THRESHOLD_MS,
        "fair_share_on": {k: median(on, k) for k in ("alice_s", "bob_s", "ratio", "reorders")},
        "fair_share_off": {k: median(off, k) for k in ("alice_s", "bob_s", "ratio", "reorders")},
        "reorder_cost": {size: {k: median(rows, k) for k in rows[0]}
                         for size, rows in costs.items()},
        "raw": {"on": on, "off": off, "reorder_cost": costs},
    }


def table(r: dict[str, Any]) -> str:
    lines = [f"Alice/Bob: Alice {r['alice_jobs']} jobs, Bob 4, {r['job_ms']} ms each, {r['slots']} "
             f"slots, threshold {r['overload_threshold_ms']} ms, median of {r['runs']}",
             f"{'fair share':<12}{'Bob done (s)':>14}{'Alice done (s)':>16}{'ratio':>8}"
             f"{'reorders':>10}"]
    for label, key in (("on", "fair_share_on"), ("off", "fair_share_off")):
        row = r[key]
        lines.append(f"{label:<12}{row['bob_s']:>14.2f}{row['alice_s']:>16.2f}{row['ratio']:>8.3f}"
                     f"{row['reorders']:>10.0f}")
    lines.append("")
    lines.append(f"{'overdue jobs':>12}{'total (ms)':>12}{'calls':>7}{'chunk in Redis':>16}"
                 f"{'page in Redis':>15}{'longest call':>14}{'SLOWLOG >1ms':>14}{'max':>8}")
    lines.append(f"{'':>12}{'':>12}{'':>7}{'(ms, mean)':>16}{'(ms, mean)':>15}{'(ms, client)':>14}"
                 f"{'(entries)':>14}{'(ms)':>8}")
    for size, row in r["reorder_cost"].items():
        lines.append(f"{int(size):>12,}{row['total_ms']:>12.0f}{row['calls']:>7.0f}"
                     f"{row['chunk_redis_ms_avg']:>16.3f}{row['page_redis_ms_avg']:>15.3f}"
                     f"{row['longest_call_ms']:>14.2f}{row['slowlog_entries']:>14.0f}"
                     f"{row['longest_redis_command_ms']:>8.2f}")
    return "\n".join(lines)


def main() -> None:
    quick_main(__doc__, "fairness", run, table,
               shown=lambda r: {k: v for k, v in r.items() if k != "raw"})


if __name__ == "__main__":
    main()
