"""Events at volume: the operator queries and ``db prune`` over 10 million events on PostgreSQL.

    .venv/bin/python benchmarks/events_volume.py           # 10,000,000 events, 5 runs each
    .venv/bin/python benchmarks/events_volume.py --quick   # 200,000 events, 3 runs each
    .venv/bin/python benchmarks/events_volume.py --events 1000000 --database-url URL

Loads the record into a private PostgreSQL (initdb/pg_ctl, as the test fixtures start it; or an
empty database at ``--database-url``), generated server-side with ``generate_series``, not
timed: 90 days of tasks (sizes 20 to 10,000 hosts, and one task of 100,000 hosts two days ago)
on a fleet of 100,000 hosts, each job a ``claim`` and an ``ack`` or ``fail`` event (2% fail),
3% with a failed attempt before (``claim``, ``retry``), each task a ``submit`` and an
``enqueue`` event; the jobs of the last hours still pending. The schema is at revision 0006
while loading; the upgrade to the newest revision (the indexes of 0007) is timed on the loaded
tables, then VACUUM ANALYZE.

Then times, as medians of several runs (each run on another host, job or day; a query whose
runs exceed ``BUDGET_S`` stops repeating): ``report --since 1d`` and ``7d`` (``build_report``),
``hosts history HOST`` (default limit), ``jobs show``, ``tasks show`` of the 100,000-host task
(with and without ``--events``), ``tasks output --failed`` of it, and one ``db prune`` that
removes the oldest day (its time, transactions and the longest one). Prints a table, then JSON
(also written to benchmarks/results/events_volume.json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402
from sqlalchemy.orm import Session  # noqa: E402

from benchmarks._common import save_result  # noqa: E402
from scheduler.record import migrate  # noqa: E402
from scheduler.record.engine import make_engine  # noqa: E402
from scheduler.record.models import Task  # noqa: E402
from scheduler.record.prune import prune  # noqa: E402
from scheduler.reports import ReportFilter, build_report, event_trail  # noqa: E402
from scheduler.reports.attempts import job_attempts, task_outputs  # noqa: E402
from scheduler.reports.trail import DEFAULT_LIMIT  # noqa: E402
from scheduler.submission.taskinfo import show_task  # noqa: E402

DAYS = 90
HOSTS = 100_000
BIG_TASK = 100_000  # hosts of the task `tasks show` and `tasks output` read (fewer if small)
SIZES = (20, 100, 500, 2_000, 10_000)  # the other tasks' sizes, in turn
RATE = 20  # jobs a task starts per second
EVENTS_PER_JOB = 2 + 2 / 33  # claim + ack/fail, and a failed attempt for one job in 33
HISTORY_LIMIT = 1000  # `hosts history --limit` default
BUDGET_S = 60.0  # a measure stops repeating once its runs took this long


@contextlib.contextmanager
def private_postgres() -> Iterator[str]:
    """The URL of a database on a private PostgreSQL cluster, removed afterwards."""
    import shutil

    from tests.servers import PostgresServer, pg_bindir

    bindir = pg_bindir()
    if bindir is None:
        sys.exit("error: PostgreSQL is not installed (apt-get install postgresql), "
                 "or pass --database-url")
    base = Path(tempfile.mkdtemp(prefix="fs-bench-pg-", dir="/tmp"))
    base.chmod(0o755)
    server = PostgresServer(bindir=bindir, datadir=base / "data")
    server.init()
    server.start()
    try:
        yield server.create_database("events_volume")
    finally:
        server.stop(mode="immediate")
        shutil.rmtree(base, ignore_errors=True)


def hosts_for(events: int) -> int:
    """The fleet: ``HOSTS``, fewer for a small run so that a host has some history."""
    return max(100, min(HOSTS, int(events / EVENTS_PER_JOB) // 40))


def plan_tasks(events: int, now: datetime) -> list[dict[str, Any]]:
    """Tasks spread over ``DAYS`` days up to ``now``, sized to give about ``events`` events."""
    jobs = int(events / EVENTS_PER_JOB)
    big = min(BIG_TASK, hosts_for(events), jobs // 20)
    sizes, left, i = [], jobs - big, 0
    while left > 0:
        sizes.append(min(SIZES[i % len(SIZES)], big, left))
        left -= sizes[-1]
        i += 1
    start = now - timedelta(days=DAYS)
    step = (timedelta(days=DAYS) - timedelta(hours=1)) / max(len(sizes) - 1, 1)
    when = [start + step * k for k in range(len(sizes))]
    sizes.append(big)
    when.append(now - timedelta(days=2))
    order = sorted(range(len(sizes)), key=lambda k: when[k])
    tasks = []
    for n, k in enumerate(order, start=1):
        ends = when[k] + timedelta(seconds=sizes[k] / RATE + 600)
        tasks.append({"id": n, "action": "command", "operator": f"op{n % 7}", "target": "all",
                      "created_at": when[k], "started_at": when[k], "total": sizes[k],
                      "state": "succeeded" if ends < now else "active",
                      "finished_at": ends if ends < now else None})
    return tasks


# One day's jobs: seq s of task t runs on host (t*7919 + s*104729) mod HOSTS (distinct hosts
# within a task), starts s/RATE seconds after the task, lasts 10-130 s; 2% fail, 3% failed
# an attempt first; jobs not started by now are pending.
JOBS_SQL = """
INSERT INTO jobs (id, task_id, seq, host, state, attempts, started_at, finished_at, worker,
                  token, exit_code, duration_ms, output_tail, error)
SELECT t.id || '.' || s, t.id, s,
       'host-' || lpad(((t.id::bigint * 7919 + s::bigint * 104729) % :hosts)::text, 6, '0'),
       CASE WHEN b.start > now() THEN 'pending' WHEN s % 50 = 7 THEN 'failed'
            ELSE 'succeeded' END,
       CASE WHEN b.start > now() THEN 0 WHEN s % 33 = 5 THEN 2 ELSE 1 END,
       CASE WHEN b.start <= now() THEN b.start END,
       CASE WHEN b.start <= now() THEN b.start + make_interval(secs => 10 + s % 120) END,
       'node-' || (s % 3), t.id::bigint * 1000000 + s,
       CASE WHEN b.start > now() THEN NULL WHEN s % 50 = 7 THEN 1 ELSE 0 END,
       CASE WHEN b.start <= now() THEN (10 + s % 120) * 1000 END,
       CASE WHEN b.start <= now() THEN 'up ' || (s % 400) || ' days' END,
       CASE WHEN b.start <= now() AND s % 50 = 7 THEN 'exit code 1' END
FROM tasks t, generate_series(0, t.total - 1) s,
     LATERAL (SELECT t.created_at + make_interval(secs => s::float8 / :rate) AS start) b
WHERE t.created_at >= :lo AND t.created_at < :hi
"""

EVENTS_SQL = """
INSERT INTO events (id, ts, kind, task_id, job_id, host, worker, operator, data)
SELECT (floor(extract(epoch FROM e.ts) * 1000))::bigint || '-' || e.n, e.ts, e.kind,
       e.task_id, e.job_id, e.host, e.worker, e.operator, e.data
FROM (
  SELECT j.started_at AS ts, 'claim' AS kind, j.task_id::text AS task_id, j.id AS job_id,
         j.host, j.worker, NULL AS operator, j.token * 4 AS n,
         json_build_object('attempt', j.attempts, 'token', j.token) AS data
  FROM jobs j WHERE j.task_id BETWEEN :first AND :last AND j.started_at IS NOT NULL
  UNION ALL
  SELECT j.finished_at, CASE WHEN j.state = 'failed' THEN 'fail' ELSE 'ack' END,
         j.task_id::text, j.id, j.host, j.worker, NULL, j.token * 4 + 1,
         json_build_object('attempt', j.attempts, 'token', j.token, 'exit_code', j.exit_code,
                           'duration_ms', j.duration_ms, 'error', j.error, 'output',
                           json_build_array(json_build_object(
                             'command', 'uptime', 'exit_code', j.exit_code,
                             'stdout_tail', j.output_tail)))
  FROM jobs j WHERE j.task_id BETWEEN :first AND :last AND j.started_at IS NOT NULL
  UNION ALL
  SELECT j.started_at - make_interval(secs => 60 - 10 * k.n), k.kind, j.task_id::text, j.id, j.host,
         j.worker, NULL, j.token * 4 + k.n,
         json_build_object('attempt', 1, 'token', j.token - 1, 'exit_code', 1,
                           'error', 'connection reset')
  FROM jobs j, (VALUES ('claim', 2), ('retry', 3)) k(kind, n)
  WHERE j.task_id BETWEEN :first AND :last AND j.attempts = 2
  UNION ALL
  SELECT t.created_at, k.kind, t.id::text, NULL, NULL, NULL, t.operator, t.id * 2 + k.n,
         json_build_object('count', t.total)
  FROM tasks t, (VALUES ('submit', 0), ('enqueue', 1)) k(kind, n)
  WHERE t.id BETWEEN :first AND :last
) e ORDER BY e.ts
"""


def load(url: str, events: int, now: datetime, say: Callable[[str], None]) -> dict[str, Any]:
    """Fill an empty database at revision 0006 (not timed); the big task's id, counts."""
    migrate.upgrade(url, "0006")
    engine = make_engine(url)
    tasks = plan_tasks(events, now)
    with engine.begin() as conn:
        conn.execute(sa.insert(Task), tasks)
        conn.execute(sa.text(
            "INSERT INTO hosts (name, port, vars, created_at, updated_at) SELECT 'host-' || "
            "lpad(h::text, 6, '0'), 22, '{}', now(), now() FROM generate_series(0, :n - 1) h"),
            {"n": hosts_for(events)})
    day = now - timedelta(days=DAYS + 1)
    while day < now:
        with engine.begin() as conn:
            ids = [t["id"] for t in tasks if day <= t["created_at"] < day + timedelta(days=1)]
            if ids:
                conn.execute(sa.text(JOBS_SQL), {"hosts": hosts_for(events), "rate": RATE, "lo": day,
                                                 "hi": day + timedelta(days=1)})
                conn.execute(sa.text(EVENTS_SQL), {"first": min(ids), "last": max(ids)})
        day += timedelta(days=1)
        say(f"loaded up to {day:%Y-%m-%d}")
    with engine.connect() as conn:
        counts = {t: conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar_one()
                  for t in ("events", "jobs", "tasks")}
    big = max(tasks, key=lambda t: t["total"])
    engine.dispose()
    return {"big_task": big["id"], "big_task_jobs": big["total"], "hosts": hosts_for(events),
            **counts}


def upgrade_timed(url: str) -> float:
    """Upgrade to the newest revision (the index builds of 0007), then VACUUM ANALYZE."""
    start = time.perf_counter()
    migrate.upgrade(url)
    took = time.perf_counter() - start
    engine = make_engine(url).execution_options(isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text("VACUUM ANALYZE"))
    engine.dispose()
    return took


def measure(fn: Callable[[int], Any], runs: int) -> dict[str, Any]:
    """Median, fastest and slowest of ``runs`` calls ``fn(i)`` (fewer past ``BUDGET_S``)."""
    samples: list[float] = []
    for i in range(runs):
        start = time.perf_counter()
        fn(i)
        samples.append(time.perf_counter() - start)
        if sum(samples) > BUDGET_S:
            break
    return {"median_ms": round(statistics.median(samples) * 1000, 1),
            "min_ms": round(min(samples) * 1000, 1), "max_ms": round(max(samples) * 1000, 1),
            "runs": len(samples)}


def queries(url: str, loaded: dict[str, Any], now: datetime, runs: int) -> dict[str, Any]:
    """Time each operator query (see the module docstring); rows each returned."""
    engine = make_engine(url)
    big, ntasks, hosts = loaded["big_task"], loaded["tasks"], loaded["hosts"]
    rows: dict[str, int] = {}

    def report(days: int) -> Callable[[int], Any]:
        def run(_i: int) -> None:
            rows[f"report_{days}d"] = len(build_report(
                engine, ReportFilter(since=now - timedelta(days=days))).jobs)
        return run

    def history(i: int) -> None:
        rows["hosts_history"] = len(event_trail(engine, host=f"host-{(i * 7717) % hosts:06d}",
                                                limit=HISTORY_LIMIT))

    def job(i: int) -> None:
        with engine.connect() as conn:
            job_id = conn.execute(sa.text("SELECT id FROM jobs WHERE task_id = :t AND seq = :s"),
                                  {"t": 1 + (i * 37) % ntasks, "s": 3}).scalar()
        rows["jobs_show_attempts"] = len(job_attempts(engine, job_id or f"{big}.{i}").attempts)

    def show(_i: int) -> None:
        with Session(engine) as session:
            rows["tasks_show_trail"] = len(show_task(session, big, None)["trail"])

    def show_events(_i: int) -> None:
        rows["tasks_show_events"] = len(event_trail(engine, task=big, limit=DEFAULT_LIMIT))

    def output_failed(_i: int) -> None:
        rows["tasks_output_failed"] = len(task_outputs(engine, big, failed=True))

    out = {name: measure(fn, runs) for name, fn in (
        ("report_since_1d", report(1)), ("report_since_7d", report(7)),
        ("hosts_history", history), ("jobs_show", job), ("tasks_show", show),
        ("tasks_show_events", show_events), ("tasks_output_failed", output_failed))}
    engine.dispose()
    return {"timings": out, "rows": rows}


def prune_day(url: str, now: datetime) -> dict[str, Any]:
    """One ``db prune`` that removes the oldest day of the record: time, rows, transactions."""
    engine = make_engine(url)
    older_than = timedelta(days=DAYS - 1)
    start = time.perf_counter()
    dry = prune(engine, older_than, dry_run=True, now=now)
    dry_s = time.perf_counter() - start
    start = time.perf_counter()
    done = prune(engine, older_than, now=now)
    took = time.perf_counter() - start
    engine.dispose()
    return {"dry_run_s": round(dry_s, 2), "s": round(took, 2), "events": done.events,
            "jobs": done.jobs, "tasks": done.tasks, "dry_run_events": dry.events,
            "transactions": getattr(done, "batches", None),
            "longest_transaction_ms": round(getattr(done, "longest_batch_s", 0) * 1000, 1)}


def table(result: dict[str, Any]) -> str:
    lines = [f"{result['events']:,} events, {result['jobs']:,} jobs, {result['tasks']:,} tasks "
             f"(the big task: {result['big_task_jobs']:,} jobs)",
             f"load {result['load_s']:.0f} s, upgrade to head (index builds) "
             f"{result['upgrade_s']:.1f} s", ""]
    lines.append(f"{'query':<22} {'median ms':>10} {'min':>9} {'max':>9} {'runs':>5} {'rows':>8}")
    for name, t in result["timings"].items():
        shown = {"report_since_1d": "report_1d", "report_since_7d": "report_7d",
                 "jobs_show": "jobs_show_attempts", "tasks_show": "tasks_show_trail"}.get(
                     name, name)
        lines.append(f"{name:<22} {t['median_ms']:>10.1f} {t['min_ms']:>9.1f} "
                     f"{t['max_ms']:>9.1f} {t['runs']:>5} {result['rows'].get(shown, ''):>8}")
    p = result["prune"]
    lines.append(f"\nprune the oldest day: {p['events']:,} events, {p['jobs']:,} jobs, "
                 f"{p['tasks']} tasks in {p['s']} s, {p['transactions']} transactions, the "
                 f"longest {p['longest_transaction_ms']} ms (dry run {p['dry_run_s']} s)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200,000 events, 3 runs each")
    parser.add_argument("--events", type=int, help="events to load (default 10,000,000)")
    parser.add_argument("--runs", type=int, help="runs of each query (default 5)")
    parser.add_argument("--database-url", help="an empty PostgreSQL database to fill instead "
                        "of a private server")
    args = parser.parse_args()
    events = args.events or (200_000 if args.quick else 10_000_000)
    runs = args.runs or (3 if args.quick else 5)
    now = datetime.now(timezone.utc).replace(microsecond=0)

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    with (contextlib.nullcontext(args.database_url) if args.database_url
          else private_postgres()) as url:
        start = time.perf_counter()
        loaded = load(url, events, now, say)
        result: dict[str, Any] = {"events_asked": events, **loaded,
                                  "load_s": round(time.perf_counter() - start, 1)}
        say(f"loaded {loaded['events']:,} events in {result['load_s']} s; upgrading")
        result["upgrade_s"] = round(upgrade_timed(url), 1)
        result["runs"] = runs
        result.update(queries(url, loaded, now, runs))
        result["prune"] = prune_day(url, now)
    print(table(result))
    print(json.dumps(result, indent=2))
    save_result("events_volume", result)


if __name__ == "__main__":
    main()
