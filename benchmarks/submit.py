"""Submission fan-out benchmark: how long a 10,000-host task takes to be accepted.

    .venv/bin/python benchmarks/submit.py            # 10,000 hosts, 7 runs
    .venv/bin/python benchmarks/submit.py --quick    # 10,000 hosts, 3 runs

"Accepted" is what ``fleetsched submit`` waits for: the plan (action parameters validated,
target resolved against the stored inventory), the record in SQL (the task, one job row per
host, the ``submit`` event, one transaction on SQLite), the fan-out to Redis (host hashes,
task hash, 10 enqueue calls of 1,000 jobs) and the task marked queued in SQL. Each run submits a
new task for every host of an inventory of N hosts in 100 groups, into a private redis-server
(no persistence) and a SQLite file, and times each phase; the table shows medians and the
slowest run. Target: total < 2 s for 10,000 hosts. Also prints the floor for the Redis part,
a bare pipelined ZADD of the same job ids, measured in the same run. And the plan of a
one-host task against the same inventory (library time: ``plan_task`` in a read transaction,
the median of 25), which should not grow with the inventory (target: <= 5 ms).
Writes benchmarks/results/submit.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from benchmarks._common import save_result  # noqa: E402
from scheduler.inventory import import_inventory  # noqa: E402
from scheduler.queue.keys import Keys  # noqa: E402
from scheduler.record import make_engine  # noqa: E402
from scheduler.record.migrate import upgrade  # noqa: E402
from scheduler.record.session import transaction
from scheduler.submission.fanout import fan_out, mark_queued  # noqa: E402
from scheduler.submission.submit import TaskRequest, plan_task, record_task  # noqa: E402
from tests.servers import start_redis  # noqa: E402

GROUPS = 100


def write_inventory(path: Path, n: int) -> None:
    lines = []
    for g in range(GROUPS):
        lines.append(f"[grp{g:03d}]")
        lines += [f"node{i:06d} ansible_host=10.{i // 65536}.{i // 256 % 256}.{i % 256} "
                  f"serial=SN{i:08d}" for i in range(g, n, GROUPS)]
    path.write_text("\n".join(lines) + "\n")


def one_run(engine: Any, client: redis.Redis, request: TaskRequest) -> dict[str, float]:
    keys = Keys()
    t0 = time.perf_counter()
    with transaction(engine) as session:
        plan = plan_task(session, request, operator="bench")
        t1 = time.perf_counter()
        task_id = record_task(session, plan)
    t2 = time.perf_counter()
    fan_out(client, keys, plan.task_spec(task_id), plan.hosts, plan.job_specs(task_id))
    t3 = time.perf_counter()
    with transaction(engine) as session:
        mark_queued(session, task_id)
    t4 = time.perf_counter()
    assert client.hget(keys.task(str(task_id)), "total") == str(len(plan.jobs))
    return {"plan": t1 - t0, "record": t2 - t1, "fan_out": t3 - t2, "mark_queued": t4 - t3,
            "total": t4 - t0}


def floor(client: redis.Redis, n: int) -> float:
    """A bare pipelined ZADD of n job ids: the least any enqueue of n jobs can cost."""
    client.delete("floor")
    t0 = time.perf_counter()
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, 1000):
        pipe.zadd("floor", {f"99.{k}": 1_800_000_000_000 for k in range(start, min(n, start + 1000))})
    pipe.execute()
    return time.perf_counter() - t0


def one_host_plan_ms(engine: Any) -> float:
    """Median ms of planning a task on one named host (what `fleetsched submit -t HOST` does
    before writing anything)."""
    import sqlalchemy as sa

    from scheduler.record.models import Host
    from scheduler.record.session import transaction
    from scheduler.submission.submit import plan_task

    with transaction(engine, commit=False) as session:
        name = session.execute(sa.select(Host.name).order_by(Host.name).limit(1)
                               .offset(4_321)).scalar_one()
    request = TaskRequest("command", name, {"cmd": "uptime"}, executor="simulate")
    samples = []
    for _ in range(26):
        start = time.perf_counter()
        with transaction(engine, commit=False) as session:
            plan_task(session, request, operator="bench")
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples[1:])  # the first pays for caches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    runs = 3 if args.quick else 7
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        server = start_redis(tmp)
        client = redis.Redis.from_url(server.url, decode_responses=True)
        url = f"sqlite:///{tmp / 'bench.db'}"
        upgrade(url)
        engine = make_engine(url)
        try:
            inv = tmp / "fleet.ini"
            write_inventory(inv, args.hosts)
            import_inventory(engine, inv, operator="bench")
            request = TaskRequest("command", "all", {"cmd": "uptime"}, executor="simulate",
                                  max_concurrency=None)
            one_run(engine, client, request)  # warm-up: imports, statement caches
            results = [one_run(engine, client, request) for _ in range(runs)]
            floors = [floor(client, args.hosts) for _ in range(runs)]
            one_host = one_host_plan_ms(engine)
            version = client.info("server")["redis_version"]
        finally:
            engine.dispose()
            client.close()
            server.stop()
    phases = ["plan", "record", "fan_out", "mark_queued", "total"]
    summary = {p: {"median_s": statistics.median(r[p] for r in results),
                   "max_s": max(r[p] for r in results)} for p in phases}
    summary["zadd_floor"] = {"median_s": statistics.median(floors), "max_s": max(floors)}
    print(f"submit of a {args.hosts:,}-host task, SQLite + redis-server {version}, "
          f"{runs} runs (median / slowest)")
    print(f"{'phase':<12} {'median':>9} {'slowest':>9}")
    for name, row in summary.items():
        print(f"{name:<12} {row['median_s'] * 1000:8.0f}ms {row['max_s'] * 1000:8.0f}ms")
    print(f"plan of a one-host task against the {args.hosts:,} hosts: {one_host:.1f} ms "
          f"(median of 25; target <= 5 ms: {'met' if one_host <= 5 else 'MISSED'})")
    ratio = summary["fan_out"]["median_s"] / summary["zadd_floor"]["median_s"]
    print(f"fan-out / ZADD floor: {ratio:.1f}x; target total < 2 s: "
          f"{'met' if summary['total']['max_s'] < 2 else 'MISSED'}")
    save_result("submit", {"hosts": args.hosts, "runs": runs, "redis": version,
                           "phases": summary, "fan_out_over_floor": ratio,
                           "one_host_plan_ms": round(one_host, 2)})


if __name__ == "__main__":
    main()
