"""Recorder benchmark: events per second from the Redis stream into SQLite and PostgreSQL.

    .venv/bin/python benchmarks/recorder.py            # full run
    .venv/bin/python benchmarks/recorder.py --quick    # 20,000 events, batch 1000 only
    .venv/bin/python benchmarks/recorder.py --only sqlite --batches 1000,2000 --runs 5

Starts its own private redis-server, a SQLite file in a temporary directory, and a private
PostgreSQL cluster (tests.servers.start_postgres), or uses FLEETSCHED_BENCH_DATABASE_URL (a
server on which it may create a database). For each database and batch size it fills the stream
with N events in the documented format (not timed), then times one ``Recorder`` draining it:
read, insert events, update job rows, recompute task counters, XACK, trim.

Workloads:
- ``rows``: tasks of 100 jobs with SQL rows (create, enqueue, claim + ack per job), so nearly
  every event also updates a job row: what a production recorder does. A job's claim and ack
  are neighbours, so they land in one batch and collapse into one row update;
- ``apart``: the same events, ordered every create and enqueue first, then every claim, then
  every ack: a job's claim and ack land in different batches, as when many jobs run at once,
  so every job event is a row update of its own (the harder case);
- ``events``: the same events for tasks without rows (the queue used alone): inserts only.
Throughput is reported per second of wall time and per CPU second of the recorder process (the
machine is shared: CPU time is the steadier figure). The floor, in the same run: the same event
rows, parsed and serialized beforehand, inserted by a bare driver executemany (no Redis, no
SQLAlchemy, no row updates), and the ratio recorder/floor. Medians of several runs. Prints a
table, then JSON (also written to benchmarks/results/recorder.json).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import redis
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduler.queue.keys import Keys  # noqa: E402
from scheduler.record import migrate  # noqa: E402
from scheduler.record.engine import make_engine  # noqa: E402
from scheduler.record.fold import StreamEvent, event_row  # noqa: E402
from scheduler.record.recorder import Recorder  # noqa: E402
from scheduler.redact import redact_url  # noqa: E402
from tests.recorder_events import create_task_rows, job_lifecycle, xadd_all  # noqa: E402
from tests.servers import RedisServer, redis_server_binary, start_postgres  # noqa: E402

KEYS = Keys("bench")
JOBS_PER_TASK = 100
PHASE = {"claim": 1, "ack": 2, "fail": 2}
WORKLOADS = ("events", "rows", "apart")


def fill(client: redis.Redis, engine: sa.Engine, n_events: int, workload: str) -> int:
    """Put about ``n_events`` events of ``workload`` in the stream (and the SQL rows it needs)."""
    client.delete(KEYS.events)
    batches: list[list[dict]] = []
    produced, k = 0, 0
    while produced < n_events:
        if workload == "events":
            tid = f"q{k}"
            jobs = [(f"{tid}.{i}", f"web-{i:04d}") for i in range(JOBS_PER_TASK)]
        else:
            task_id, jobs = create_task_rows(engine, JOBS_PER_TASK)
            tid = str(task_id)
        batches.append(list(job_lifecycle(tid, jobs)))
        produced += len(batches[-1])
        k += 1
    events = [ev for batch in batches for ev in batch]
    if workload == "apart":  # every create and enqueue, then every claim, then every ack
        events.sort(key=lambda ev: PHASE.get(ev["kind"], 0))
    return len(xadd_all(client, events, KEYS, pipeline_size=2000))


def reset(engine: sa.Engine) -> None:
    with engine.begin() as conn:
        for table in ("events", "jobs", "tasks"):
            conn.execute(sa.text(f"DELETE FROM {table}"))


def run_recorder(client: redis.Redis, engine: sa.Engine, n: int, batch: int,
                 workload: str) -> tuple[float, float]:
    reset(engine)
    produced = fill(client, engine, n, workload)
    rec = Recorder(client, engine, KEYS, f"bench-{uuid.uuid4().hex[:6]}", batch=batch)
    start, cpu = time.perf_counter(), time.process_time()
    while rec.run_once(block_ms=None):
        pass
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert rec.stats.inserted == produced, (rec.stats.inserted, produced)
    client.xgroup_destroy(KEYS.events, "recorder")
    return produced / elapsed, produced / cpu


def run_floor(client: redis.Redis, engine: sa.Engine, n: int, batch: int) -> tuple[float, float]:
    """The database's floor: the same event rows, already parsed and serialized, written by a
    bare driver executemany in transactions of ``batch`` (no Redis, no SQLAlchemy, no rows)."""
    reset(engine)
    fill(client, engine, n, "events")
    rows = [event_row(StreamEvent(i, f)) for i, f in client.xrange(KEYS.events)]
    sqlite = engine.dialect.name == "sqlite"
    mark = "?" if sqlite else "%s"
    sql = (f"INSERT INTO events (id, ts, kind, task_id, job_id, host, worker, operator, data) "
           f"VALUES ({', '.join([mark] * 9)})")
    params = [(r["id"], r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f") if sqlite else r["ts"],
               r["kind"], r["task_id"], r["job_id"], r["host"], r["worker"], r["operator"],
               json.dumps(r["data"])) for r in rows]
    start, cpu = time.perf_counter(), time.process_time()
    for s in range(0, len(params), batch):
        with engine.begin() as conn:
            conn.exec_driver_sql(sql, params[s:s + batch])
    return len(rows) / (time.perf_counter() - start), len(rows) / (time.process_time() - cpu)


def databases(tmp: Path, only: str | None) -> tuple[list[tuple[str, str]], Any]:
    dbs = [("sqlite", f"sqlite:///{tmp / 'bench.db'}")]
    server = None
    if only == "sqlite":
        return dbs, None
    if only == "postgresql":
        dbs = []
    external = os.environ.get("FLEETSCHED_BENCH_DATABASE_URL")
    if external:
        name = f"fleetsched_bench_{uuid.uuid4().hex[:6]}"
        admin = sa.create_engine(external, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        dbs.append(("postgresql", sa.engine.make_url(external).set(database=name)
                    .render_as_string(hide_password=False)))
    else:
        try:
            server = start_postgres(tmp / "pg")
            dbs.append(("postgresql", server.create_database("fleetsched_bench")))
        except BaseException as exc:  # noqa: BLE001 - pytest.skip raises outside pytest too
            print(f"postgresql skipped: {exc}", file=sys.stderr)
    return dbs, server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer runs")
    parser.add_argument("--only", choices=["sqlite", "postgresql"], help="one database only")
    parser.add_argument("--batches", help="comma-separated batch sizes (default 200,1000,5000; "
                        "--quick: 1000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (the median)")
    args = parser.parse_args()
    n = 20_000 if args.quick else 50_000
    runs = args.runs
    batches = ([int(b) for b in args.batches.split(",")] if args.batches
               else [1000] if args.quick else [200, 1000, 5000])
    tmp = Path(tempfile.mkdtemp(prefix="fs-bench-rec-"))
    redis_srv = RedisServer(binary=redis_server_binary() or "redis-server", dir=tmp)
    redis_srv.start()
    client = redis.Redis.from_url(redis_srv.url, decode_responses=True)
    dbs, pg = databases(tmp, args.only)
    results: list[dict[str, Any]] = []
    try:
        for name, url in dbs:
            migrate.upgrade(url)
            engine = make_engine(url)
            for batch in batches:
                floors = [run_floor(client, engine, n, batch) for _ in range(runs)]
                floor = statistics.median(f[0] for f in floors)
                for workload in WORKLOADS:
                    got = [run_recorder(client, engine, n, batch, workload) for _ in range(runs)]
                    eps = statistics.median(g[0] for g in got)
                    cpu = statistics.median(g[1] for g in got)
                    results.append({"database": name, "workload": workload, "batch": batch,
                                    "events": n, "runs": runs, "events_per_s": round(eps),
                                    "events_per_cpu_s": round(cpu),
                                    "floor_events_per_s": round(floor),
                                    "ratio_to_floor": round(eps / floor, 3)})
                    print(f"{name:10} {workload:6} batch {batch:5}: {eps:9,.0f} ev/s, "
                          f"{cpu:9,.0f} ev/cpu-s (floor {floor:9,.0f}, {eps / floor:.2f}x)",
                          file=sys.stderr)
            engine.dispose()
    finally:
        client.close()
        redis_srv.stop()
        if pg is not None:
            pg.stop(mode="immediate")
            shutil.rmtree(pg.datadir.parent, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'database':10} {'workload':8} {'batch':>6} {'events/s':>10} {'ev/cpu-s':>10} "
          f"{'floor/s':>10} {'ratio':>6}")
    for r in results:
        print(f"{r['database']:10} {r['workload']:8} {r['batch']:>6} {r['events_per_s']:>10,} "
              f"{r['events_per_cpu_s']:>10,} {r['floor_events_per_s']:>10,} "
              f"{r['ratio_to_floor']:>6.2f}")
    doc = {"benchmark": "recorder", "quick": args.quick, "cpu_count": os.cpu_count(),
           "databases": [redact_url(u) if "postgres" in u else "sqlite (temp file)"
                         for _, u in dbs], "results": results}
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "recorder.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
