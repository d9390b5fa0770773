"""Queue core benchmark: our Lua verbs against the floor on the same Redis, in the same run.

    .venv/bin/python benchmarks/queue_core.py            # full run (about two minutes)
    .venv/bin/python benchmarks/queue_core.py --quick    # smaller sizes, fewer runs

Starts its own private redis-server (tests.servers.RedisServer, no persistence) and measures:
1. enqueue throughput for 100,000 jobs: ``Queue.enqueue`` vs a pipelined ZADD loop (the floor);
2. claim+ack throughput in one process at batch 1, 10, 100: ``Queue.claim`` + ``Queue.ack`` vs a
   bare Lua ZRANGE BYSCORE + ZADD XX claim script with pipelined ZREM acks (seed 001's loop);
3. claim latency p50/p99 (batch 10) with 10k, 100k and 1M jobs queued, ours and the floor's;
4. Redis memory per queued job: INFO used_memory delta / jobs (everything the enqueue wrote:
   job hashes, the due set, the task hash, the enqueue events);
5. where claim+ack's time goes at batch 100: server CPU per job in claim and in ack (INFO cpu,
   which waiting for a core does not inflate), the commands the scripts call (commandstats),
   the client's CPU, and the same for the floor.
Figures are medians of several runs; ours are also printed as ratios of the floor. Prints a
table, then the JSON (also written to benchmarks/results/queue_core.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import redis

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec  # noqa: E402

FLOOR_KEY = "{bench}:floor"
TASK_SIZE = 10_000  # jobs per task when filling big queues
RESULT = JobResult(exit_code=0, duration_ms=5)
# Seed 001's claim, the floor: the due members up to now, moved to now + lease.
BARE_CLAIM = """
local items = redis.call('ZRANGE', KEYS[1], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, ARGV[3])
for _, member in ipairs(items) do redis.call('ZADD', KEYS[1], 'XX', ARGV[2], member) end
return items
"""


def host(k: int) -> str:
    return f"web-{k:06d}.dc1.example.net"


def now_ms() -> int:
    return int(time.time() * 1000)


def jobs_of(task_id: str, n: int, offset: int = 0) -> list[JobSpec]:
    """Jobs due a minute ago (a realistic 13-digit due time), on realistic host names."""
    due = now_ms() - 60_000
    return [JobSpec(f"{task_id}.{k}", host(offset + k), due_ms=due) for k in range(n)]


def fresh(client: redis.Redis) -> None:
    client.flushall()


def redis_cpu_s(client: redis.Redis) -> float:
    """CPU seconds of the server's main thread (getrusage: not inflated by waiting for a core)."""
    info = client.info("cpu")
    return float(info["used_cpu_user_main_thread"]) + float(info["used_cpu_sys_main_thread"])


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


# ------------------------------------------------------------------------------- enqueue


def enqueue_floor(client: redis.Redis, n: int) -> float:
    fresh(client)
    ids = [f"t.{k}" for k in range(n)]

    def run() -> None:
        pipe = client.pipeline(transaction=False)
        for start in range(0, n, 1_000):
            for i in ids[start:start + 1_000]:
                pipe.zadd(FLOOR_KEY, {i: 1})
            pipe.execute()

    return n / timed(run)


def enqueue_ours(client: redis.Redis, n: int) -> float:
    fresh(client)
    queue = Queue(client)
    queue.create_task(TaskSpec("t"))
    jobs = jobs_of("t", n)
    rate = n / timed(lambda: queue.enqueue("t", jobs))
    assert client.zcard("{fs}:due:normal") == n
    return rate


# ------------------------------------------------------------------------------- claim + ack


def claim_ack_floor(client: redis.Redis, n: int, batch: int,
                    cpu: dict[str, float] | None = None) -> float:
    """Jobs/s of seed 001's loop; ``cpu``, if given, gets its server and client CPU (µs/job)."""
    fresh(client)
    script = client.register_script(BARE_CLAIM)
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, 1_000):
        pipe.zadd(FLOOR_KEY, {f"t.{k}": 1 for k in range(start, min(n, start + 1_000))})
    pipe.execute()
    done = 0

    def run() -> None:
        nonlocal done
        while True:
            now = now_ms()
            ids = script(keys=[FLOOR_KEY], args=[now, now + 30_000, batch])
            if not ids:
                return
            acks = client.pipeline(transaction=False)
            for i in ids:
                acks.zrem(FLOOR_KEY, i)
            acks.execute()
            done += len(ids)

    server, own = redis_cpu_s(client), time.process_time()
    rate = n / timed(run)
    if cpu is not None:
        cpu.update(redis_cpu_us=round((redis_cpu_s(client) - server) / n * 1e6, 2),
                   client_cpu_us=round((time.process_time() - own) / n * 1e6, 2))
    assert done == n
    return rate


def claim_ack_ours(client: redis.Redis, n: int, batch: int) -> float:
    fresh(client)
    queue = Queue(client)
    queue.create_task(TaskSpec("t"))
    queue.enqueue("t", jobs_of("t", n))
    done = 0

    def run() -> None:
        nonlocal done
        while True:
            jobs = queue.claim("bench", batch).jobs
            if not jobs:
                return
            codes = queue.ack("bench", [(j.job_id, j.token, RESULT) for j in jobs])
            done += sum(1 for c in codes if c == 0)

    rate = n / timed(run)
    assert done == n
    return rate


# ------------------------------------------------------------------------------- where the time goes


INNER = ("xadd", "hmget", "hset", "zadd", "zrem", "del", "zrange", "hincrby")  # commands in scripts


def breakdown(client: redis.Redis, n: int, batch: int) -> dict[str, Any]:
    """Per-job CPU of claim+ack, one phase at a time (all claims, then all acks), µs:
    the server's CPU in each verb, the time of the commands the scripts call (commandstats),
    the client's CPU; and the floor's server and client CPU for the same loop."""
    out: dict[str, Any] = {"jobs": n, "batch": batch}
    fresh(client)
    queue = Queue(client, lease_ms=600_000)  # no lease runs out between the two phases
    queue.create_task(TaskSpec("t"))
    queue.enqueue("t", jobs_of("t", n))
    claims, phase = [], {}
    for verb in ("claim", "ack"):
        client.config_resetstat()
        server, own = redis_cpu_s(client), time.process_time()
        if verb == "claim":
            while jobs := queue.claim("bench", batch).jobs:
                claims.append(jobs)
        else:
            for jobs in claims:
                queue.ack("bench", [(j.job_id, j.token, RESULT) for j in jobs])
        stats = client.info("commandstats")
        phase[verb] = {"redis_cpu_us": round((redis_cpu_s(client) - server) / n * 1e6, 2),
                       "client_cpu_us": round((time.process_time() - own) / n * 1e6, 2),
                       "commands_us": {c: round(stats[f"cmdstat_{c}"]["usec"] / n, 2)
                                       for c in INNER if f"cmdstat_{c}" in stats}}
    out.update(phase)
    out["floor"] = {}
    claim_ack_floor(client, n, batch, out["floor"])
    return out


# ------------------------------------------------------------------------------- latency, memory


def fill_ours(client: redis.Redis, queue: Queue, size: int, have: int) -> int:
    """Enqueue jobs (tasks of TASK_SIZE) until ``size`` are queued; the new count."""
    while have < size:
        task_id = f"t{have // TASK_SIZE}"
        queue.create_task(TaskSpec(task_id))
        queue.enqueue(task_id, jobs_of(task_id, min(TASK_SIZE, size - have), offset=have))
        have += min(TASK_SIZE, size - have)
    return have


def percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def latency_ours(queue: Queue, rounds: int, calls: int) -> tuple[float, float]:
    p50s, p99s = [], []
    for round_ in range(rounds + 1):  # round 0 warms up (caches, allocator) and is not counted
        samples = []
        for _ in range(calls):
            start = time.perf_counter()
            jobs = queue.claim("bench", 10).jobs
            samples.append((time.perf_counter() - start) * 1000)
            queue.release("bench", [(j.job_id, j.token) for j in jobs])  # back at their due time
        if round_ == 0:
            continue
        p50, p99 = percentiles(samples)
        p50s.append(p50)
        p99s.append(p99)
    return statistics.median(p50s), statistics.median(p99s)


def latency_floor(client: redis.Redis, size: int, rounds: int, calls: int) -> tuple[float, float]:
    fresh(client)
    script = client.register_script(BARE_CLAIM)
    pipe = client.pipeline(transaction=False)
    for start in range(0, size, 10_000):
        pipe.zadd(FLOOR_KEY, {f"t.{k}": 1 for k in range(start, min(size, start + 10_000))})
        pipe.execute()
    p50s, p99s = [], []
    for round_ in range(rounds + 1):  # round 0 warms up and is not counted
        samples = []
        for _ in range(calls):
            now = now_ms()
            start = time.perf_counter()
            ids = script(keys=[FLOOR_KEY], args=[now, now + 30_000, 10])
            samples.append((time.perf_counter() - start) * 1000)
            client.zadd(FLOOR_KEY, {i: 1 for i in ids}, xx=True)
        if round_ == 0:
            continue
        p50, p99 = percentiles(samples)
        p50s.append(p50)
        p99s.append(p99)
    fresh(client)
    return statistics.median(p50s), statistics.median(p99s)


def used_memory(client: redis.Redis) -> int:
    return int(client.info("memory")["used_memory"])


# ------------------------------------------------------------------------------- driver


def run(quick: bool) -> dict[str, Any]:
    from benchmarks._common import private_redis

    with private_redis() as client:
        return measure(client, quick)


def paired(runs: int, floor: Callable[[], float], ours: Callable[[], float]) -> dict[str, Any]:
    """Floor and ours measured back to back in each run (so both see the same machine load);
    medians of the rates, the median of the per-run ratios, and best against best (the least
    disturbed run of each, for a machine shared with other work)."""
    pairs = [(floor(), ours()) for _ in range(runs)]
    return {"floor_per_s": round(statistics.median(f for f, _ in pairs)),
            "ours_per_s": round(statistics.median(o for _, o in pairs)),
            "ratio": round(statistics.median(o / f for f, o in pairs), 3),
            "best_ratio": round(max(o for _, o in pairs) / max(f for f, _ in pairs), 3)}


def measure(client: redis.Redis, quick: bool) -> dict[str, Any]:
    runs = 3 if quick else 5
    out: dict[str, Any] = {"redis_version": client.info("server")["redis_version"], "quick": quick,
                           "runs": runs}
    n = 20_000 if quick else 100_000
    out["enqueue"] = {"jobs": n, **paired(runs, lambda: enqueue_floor(client, n),
                                          lambda: enqueue_ours(client, n)), "target": 0.5}

    out["claim_ack"] = []
    for batch, jobs in ((1, 1_000 if quick else 3_000), (10, 3_000 if quick else 10_000),
                        (100, 10_000 if quick else 30_000)):
        pair = paired(runs, lambda: claim_ack_floor(client, jobs, batch),
                      lambda: claim_ack_ours(client, jobs, batch))
        out["claim_ack"].append({"batch": batch, "jobs": jobs, **pair,
                                 "target": 0.4 if batch == 100 else None})

    out["breakdown"] = [breakdown(client, 10_000 if quick else 30_000, 100) for _ in range(runs)]
    out["breakdown_median"] = _median_breakdown(out["breakdown"])

    sizes = (10_000, 100_000) if quick else (10_000, 100_000, 1_000_000)
    rounds, calls = (3, 300) if quick else (5, 500)
    out["latency"] = []
    fresh(client)
    queue, have = Queue(client), 0
    for size in sizes:
        # memory: what filling up to this size added, per job added
        before, events_before = used_memory(client), int(client.memory_usage("{fs}:events") or 0)
        added = size - have
        have = fill_ours(client, queue, size, have)
        per_job = (used_memory(client) - before) / added
        events = (int(client.memory_usage("{fs}:events") or 0) - events_before) / added
        p50, p99 = latency_ours(queue, rounds, calls)
        out["latency"].append({"queued": size, "ours_p50_ms": round(p50, 3), "ours_p99_ms": round(p99, 3),
                               "bytes_per_job": round(per_job, 1), "of_which_events": round(events, 1)})
    fresh(client)
    for row in out["latency"]:
        p50, p99 = latency_floor(client, row["queued"], rounds, calls)
        row.update(floor_p50_ms=round(p50, 3), floor_p99_ms=round(p99, 3))
    first, last = out["latency"][0], out["latency"][-1]
    out["p99_growth"] = {"from": first["queued"], "to": last["queued"],
                         "ratio": round(last["ours_p99_ms"] / first["ours_p99_ms"], 3), "target": 1.5}
    out["memory"] = {"bytes_per_job": last["bytes_per_job"], "target": 300}
    return out


def table(r: dict[str, Any]) -> str:
    lines = [f"Queue core on Redis {r['redis_version']} ({'quick' if r['quick'] else 'full'} run, "
             f"medians of {r['runs']} runs)", ""]
    e = r["enqueue"]
    lines += [f"{'measure':44} {'ours':>12} {'floor':>12} {'ratio':>7} {'target':>8} {'best':>6}",
              f"{'enqueue ' + format(e['jobs'], ',') + ' jobs (jobs/s)':44} {e['ours_per_s']:>12,} "
              f"{e['floor_per_s']:>12,} {e['ratio']:>7.2f} {'>= 0.5':>8} {e['best_ratio']:>6.2f}"]
    for c in r["claim_ack"]:
        target = ">= 0.4" if c["target"] else ""
        lines.append(f"{'claim+ack batch ' + str(c['batch']) + ' (jobs/s)':44} {c['ours_per_s']:>12,} "
                     f"{c['floor_per_s']:>12,} {c['ratio']:>7.2f} {target:>8} {c['best_ratio']:>6.2f}")
    for row in r["latency"]:
        label = f"claim p50 / p99, {row['queued']:,} queued (ms)"
        lines.append(f"{label:44} {row['ours_p50_ms']:>5.2f} /{row['ours_p99_ms']:>5.2f} "
                     f"{row['floor_p50_ms']:>5.2f} /{row['floor_p99_ms']:>5.2f}")
    b = r["breakdown_median"]
    c, a, f = b["claim"], b["ack"], b["floor"]
    for what in ("redis", "client"):
        label = f"per job at batch 100, {'server' if what == 'redis' else 'client'} CPU (us)"
        lines.append(f"{label:44} claim {c[what + '_cpu_us']:.2f} + ack {a[what + '_cpu_us']:.2f}"
                     f"   floor {f[what + '_cpu_us']:.2f}")
    for verb, row in (("claim", c), ("ack", a)):
        inner = ", ".join(f"{k} {v:.2f}" for k, v in row["commands_us"].items() if v >= 0.05)
        lines.append(f"{'  commands in ' + verb + ' (us per job)':44} {inner}")
    g = r["p99_growth"]
    lines.append(f"{'claim p99 at ' + format(g['to'], ',') + ' / at ' + format(g['from'], ','):44} "
                 f"{g['ratio']:>12.2f} {'':>12} {'':>7} {'<= 1.5':>8}")
    for row in r["latency"]:
        lines.append(f"{'memory per queued job, ' + format(row['queued'], ',') + ' (bytes)':44} "
                     f"{row['bytes_per_job']:>12.0f} {'':>12} {'':>7} {'<= 300':>8}"
                     f"   (events {row['of_which_events']:.0f})")
    return "\n".join(lines)


def _median_breakdown(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of each figure over the breakdown runs."""
    med = statistics.median
    out: dict[str, Any] = {}
    for part in ("claim", "ack", "floor"):
        rows = [r[part] for r in runs]
        out[part] = {k: med(row[k] for row in rows) for k in ("redis_cpu_us", "client_cpu_us")}
        if part != "floor":
            out[part]["commands_us"] = {c: med(row["commands_us"].get(c, 0.0) for row in rows)
                                        for c in rows[0]["commands_us"]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer runs")
    args = parser.parse_args()
    result = run(args.quick)
    print(table(result))
    print(json.dumps(result, indent=2))
    results = ROOT / "benchmarks" / "results"
    results.mkdir(exist_ok=True)
    (results / "queue_core.json").write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
