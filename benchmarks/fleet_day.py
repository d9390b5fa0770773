"""A day of a large fleet's traffic, compressed into minutes, on three `fleetsched worker` nodes.

    .venv/bin/python benchmarks/fleet_day.py                   # 100,000 hosts (several minutes)
    .venv/bin/python benchmarks/fleet_day.py --quick           # 10,000 hosts (a minute or two)
    .venv/bin/python benchmarks/fleet_day.py --quick --smoke   # tiny: does it all still work?
    .venv/bin/python benchmarks/fleet_day.py --database-url postgresql+psycopg://...

What runs (every command as a user types it, with its defaults unless said):
1. A private redis-server (no persistence) and a private PostgreSQL cluster (initdb/pg_ctl, as
   tests/servers.py starts one), or the PostgreSQL server of ``--database-url``.
2. ``fleetsched db upgrade``; the demo's inventory (scheduler/demo/fleet.py: 30 customer groups
   in 3 regions) of N hosts through ``fleetsched hosts import``; one-off service windows opening
   during the run (``fleetsched windows add`` + ``windows assign --group``).
3. Three nodes: ``fleetsched worker`` with no options (50 slots, 2 warm children, a recorder
   process each, into PostgreSQL), the simulate executor doing the work.
4. The day: ``fleetsched schedules add --every`` schedules on a few hosts each; a fleet-wide
   change, ``fleetsched submit command -t all`` (one task of N hosts); small tasks of 4-50 random
   hosts arriving at random times throughout, and a few tasks ``--in-window`` on the windows'
   groups. The small tasks go through the library's ``submit`` (what ``fleetsched submit``
   calls: plan, SQL record, fan-out) from this process, as an API caller would: hundreds of
   CLI processes would measure Python start-ups on 2 cores. Durations are simulated: the big
   change 5 +- 5 ms per host, the rest 100 +- 50 ms.
5. It ends when every submitted task has finished in SQL; the schedules are removed, the
   recorders catch up, the nodes get SIGTERM.

Measured, from the SQL record (events, jobs, tasks) unless said:
- throughput: acks per second over the run, and the big change's jobs per second;
- claim latency (start lateness): a job's ``claim`` event time minus its due time, p50/p99,
  for the big change, the small tasks and the in-window tasks;
- fair share: the small tasks' completion time (finished minus created) while the big one runs;
- Redis memory: ``INFO memory`` used_memory_peak, and the largest used_memory sampled;
- SQL growth: rows and ``pg_total_relation_size`` of events, jobs and tasks, before and after,
  per job, and per day at an assumed traffic rate (printed with its assumption);
- recorder lag, sampled every 0.5 s: entries not yet in SQL (``scheduler.record.recorder.backlog``,
  the count ``fleetsched status`` prints) and the age of the oldest of them;
- the load average during the run (the machine is shared).
Prints a table and the JSON (also written to benchmarks/results/fleet_day.json).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import redis
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import save_result  # noqa: E402
from benchmarks._node import Nodes, fleetsched, node_env  # noqa: E402
from scheduler.demo.fleet import write_inventory  # noqa: E402
from scheduler.queue.keys import Keys  # noqa: E402
from scheduler.record.recorder import GROUP, backlog  # noqa: E402

KEYS = Keys()
NODES = 3
BIG_OPTIONS = {"duration_ms": 5, "jitter_ms": 5}
SMALL_OPTIONS = {"duration_ms": 100, "jitter_ms": 50}
SAMPLE_S = 0.5


@dataclass(frozen=True)
class Sizes:
    hosts: int
    small_tasks: int
    spread_s: float  # the small tasks arrive over this long from the big change's submission
    schedules: int
    every_s: int
    schedule_hosts: int
    windows: int
    window_open_s: float  # after the start of the day
    window_len_s: float
    window_tasks: int  # per window, each on window_hosts hosts of the window's group
    window_hosts: int
    timeout_s: float


SIZES = {
    "full": Sizes(hosts=100_000, small_tasks=300, spread_s=120, schedules=3, every_s=20,
                  schedule_hosts=10, windows=2, window_open_s=40, window_len_s=60,
                  window_tasks=3, window_hosts=20, timeout_s=1500),
    "quick": Sizes(hosts=10_000, small_tasks=60, spread_s=30, schedules=2, every_s=10,
                   schedule_hosts=5, windows=2, window_open_s=15, window_len_s=30,
                   window_tasks=2, window_hosts=10, timeout_s=400),
    "smoke": Sizes(hosts=300, small_tasks=6, spread_s=3, schedules=1, every_s=3,
                   schedule_hosts=3, windows=1, window_open_s=2, window_len_s=30,
                   window_tasks=1, window_hosts=4, timeout_s=120),
}


# ------------------------------------------------------------------------------ servers


class Servers:
    """The private redis-server and PostgreSQL (unless a database URL is given)."""

    def __init__(self, tmp: Path, database_url: str | None) -> None:
        from tests.servers import RedisServer, redis_server_binary, start_postgres

        binary = redis_server_binary()
        if binary is None:
            sys.exit("error: no redis-server found (install redis-server)")
        self.redis = RedisServer(binary=binary, dir=tmp / "redis")
        (tmp / "redis").mkdir()
        self.redis.start()
        self.pg = None
        if database_url is None:
            from tests.servers import pg_bindir

            if pg_bindir() is None:
                self.redis.stop()
                sys.exit("error: no PostgreSQL found (apt-get install postgresql), or pass "
                         "--database-url")
            self.pg = start_postgres(tmp)
            database_url = self.pg.create_database("fleetday")
        elif not database_url.startswith("postgresql"):
            self.redis.stop()
            sys.exit("error: --database-url must be a PostgreSQL URL (postgresql+psycopg://...)")
        self.database_url = database_url

    def stop(self) -> None:
        self.redis.stop()
        if self.pg is not None:
            self.pg.stop()


# ------------------------------------------------------------------------------ sampling


def oldest_unrecorded_ms(client: redis.Redis, now_ms: int) -> int:
    """Age of the oldest stream entry not yet recorded: the oldest pending one, else the first
    after the group's last delivered id; 0 when the recorders have everything."""
    try:
        groups = [g for g in client.xinfo_groups(KEYS.events) if g["name"] in (GROUP, GROUP.encode())]
    except redis.ResponseError:
        return 0
    if not groups:
        return 0
    pending = client.xpending(KEYS.events, GROUP)
    if pending["pending"]:
        oldest = pending["min"]
    else:
        last = groups[0]["last-delivered-id"]
        last = last.decode() if isinstance(last, bytes) else last
        after = client.xrange(KEYS.events, "(" + last, "+", count=1)
        if not after:
            return 0
        oldest = after[0][0]
    oldest = oldest.decode() if isinstance(oldest, bytes) else oldest
    return max(0, now_ms - int(oldest.split("-")[0]))


class Sampler:
    """Every SAMPLE_S: recorder lag (count, oldest age), Redis used_memory, load average."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self.samples: list[dict[str, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(SAMPLE_S):
            sec, usec = self.client.time()
            now_ms = int(sec) * 1000 + int(usec) // 1000
            lag, pending = backlog(self.client, KEYS.events)
            self.samples.append({
                "t": time.time(), "lag": lag, "pending": pending,
                "oldest_ms": oldest_unrecorded_ms(self.client, now_ms),
                "used_memory": int(self.client.info("memory")["used_memory"]),
                "load": os.getloadavg()[0]})

    def summary(self) -> dict[str, Any]:
        s = self.samples or [{"lag": 0, "oldest_ms": 0, "used_memory": 0, "load": 0.0}]
        lags = [x["lag"] for x in s]
        ages = [x["oldest_ms"] for x in s]
        return {"samples": len(self.samples), "lag_max": max(lags),
                "lag_p50": statistics.median(lags), "oldest_ms_max": max(ages),
                "oldest_ms_p50": statistics.median(ages),
                "used_memory_max": max(x["used_memory"] for x in s),
                "load_min": round(min(x["load"] for x in s), 2),
                "load_mean": round(statistics.fmean(x["load"] for x in s), 2),
                "load_max": round(max(x["load"] for x in s), 2)}


# ------------------------------------------------------------------------------ the day


def groups_of(inventory: Path) -> dict[str, list[str]]:
    """The customer groups of the generated inventory and their hosts."""
    out: dict[str, list[str]] = {}
    group = None
    for line in inventory.read_text().splitlines():
        if line.startswith("["):
            group = line.strip("[]") if ":" not in line else None
            if group is not None:
                out[group] = []
        elif group is not None and line.strip():
            out[group].append(line.split()[0])
    return out


def small_request(name: str, hosts: list[str], in_window: bool = False) -> Any:
    from scheduler.submission.submit import TaskRequest

    return TaskRequest("command", ",".join(hosts), {"cmd": "true"}, executor="simulate",
                       executor_options=SMALL_OPTIONS, name=name, in_window=in_window)


class Traffic:
    """The small and in-window tasks, submitted from a thread at their arrival times."""

    def __init__(self, database_url: str, redis_url: str, sizes: Sizes,
                 groups: dict[str, list[str]], windowed: list[str], rng: random.Random) -> None:
        self.database_url, self.redis_url, self.sizes = database_url, redis_url, sizes
        hosts = [h for g in groups.values() for h in g]
        self.plan: list[tuple[float, str, Any]] = []
        for i in range(sizes.small_tasks):
            at = rng.uniform(0, sizes.spread_s)
            pick = rng.sample(hosts, rng.randint(4, min(50, len(hosts))))
            self.plan.append((at, "small", small_request(f"small-{i:03d}", pick)))
        for w, group in enumerate(windowed):
            for k in range(sizes.window_tasks):
                pick = rng.sample(groups[group], min(sizes.window_hosts, len(groups[group])))
                self.plan.append((0.1 * k, "window",
                                  small_request(f"window-{w}-{k}", pick, in_window=True)))
        self.plan.sort(key=lambda p: p[0])
        self.submitted: list[dict[str, Any]] = []
        self.error: str | None = None
        self.thread = threading.Thread(target=self._run, name="traffic", daemon=True)

    def _run(self) -> None:
        from scheduler.record import make_engine
        from scheduler.redisdb.connect import connect
        from scheduler.submission.submit import submit

        os.environ["FLEETSCHED_REDIS_URL"] = self.redis_url
        from scheduler.config import load_settings

        engine = make_engine(self.database_url)
        client = connect(load_settings())
        start = time.monotonic()
        try:
            for at, kind, request in self.plan:
                delay = start + at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                t0 = time.monotonic()
                done = submit(engine, lambda: client, request, operator="bench")
                self.submitted.append({"task": done.task_id, "kind": kind, "jobs": done.jobs,
                                       "submit_ms": (time.monotonic() - t0) * 1000})
        except Exception as exc:  # noqa: BLE001 - reported by the main thread
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            client.close()
            engine.dispose()


def add_windows(env: dict[str, str], groups: list[str], sizes: Sizes, day_start: datetime) -> None:
    for i, group in enumerate(groups):
        opens = day_start + timedelta(seconds=sizes.window_open_s + i * sizes.window_len_s / 2)
        closes = opens + timedelta(seconds=sizes.window_len_s)
        fleetsched(env, "windows", "add", f"day-{i}", "--start",
                   opens.strftime("%Y-%m-%dT%H:%M:%S"), "--end",
                   closes.strftime("%Y-%m-%dT%H:%M:%S"), "--tz", "UTC")
        fleetsched(env, "windows", "assign", f"day-{i}", "--group", group)


def add_schedules(env: dict[str, str], groups: dict[str, list[str]], sizes: Sizes) -> list[str]:
    names = []
    for i, group in enumerate(list(groups)[-sizes.schedules:]):
        name = f"probe-{i}"
        fleetsched(env, "schedules", "add", name, "command", "--every", f"{sizes.every_s}s",
                   "-t", ",".join(groups[group][:sizes.schedule_hosts]), "-p", "cmd=true",
                   "--executor", "simulate", "--executor-option", "duration_ms=100")
        names.append(name)
    return names


def wait_workers(client: redis.Redis, nodes: Nodes, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while client.hlen(KEYS.workers) < n:
        nodes.check_alive()
        if time.monotonic() > deadline:
            sys.exit(f"error: {client.hlen(KEYS.workers)} of {n} workers up after {timeout:.0f} s")
        time.sleep(0.05)


def wait_finished(engine: sa.Engine, tasks: list[int], nodes: Nodes, timeout: float,
                  traffic: Traffic) -> None:
    deadline = time.monotonic() + timeout
    while True:
        nodes.check_alive()
        if traffic.error:
            sys.exit(f"error: a small task could not be submitted: {traffic.error}")
        if not traffic.thread.is_alive():
            ids = tasks + [s["task"] for s in traffic.submitted]
            with engine.connect() as conn:
                left = conn.execute(sa.text("SELECT count(*) FROM tasks WHERE id = ANY(:ids) "
                                            "AND finished_at IS NULL"), {"ids": ids}).scalar()
            if left == 0:
                return
        if time.monotonic() > deadline:
            sys.exit(f"error: the day's tasks did not finish in {timeout:.0f} s")
        time.sleep(0.2)


# ------------------------------------------------------------------------------ measuring


TABLES = ("events", "jobs", "tasks")


def sql_sizes(engine: sa.Engine) -> dict[str, dict[str, int]]:
    out = {}
    with engine.connect() as conn:
        for t in TABLES:
            rows = conn.execute(sa.text(f"SELECT count(*) FROM {t}")).scalar()
            size = conn.execute(sa.text(f"SELECT pg_total_relation_size('{t}')")).scalar()
            out[t] = {"rows": int(rows), "bytes": int(size)}
    return out


def percentiles(conn: sa.Connection, sql: str, params: dict[str, Any]) -> dict[str, float | None]:
    row = conn.execute(sa.text(
        f"SELECT count(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY v), "
        f"percentile_cont(0.99) WITHIN GROUP (ORDER BY v), max(v) FROM ({sql}) AS s"),
        params).one()
    return {"n": int(row[0]), "p50": _r(row[1]), "p99": _r(row[2]), "max": _r(row[3])}


def _r(v: Any) -> float | None:
    return None if v is None else round(float(v), 3)


def measure(engine: sa.Engine, big: int, submitted: list[dict[str, Any]]) -> dict[str, Any]:
    small = [s["task"] for s in submitted if s["kind"] == "small"]
    windowed = [s["task"] for s in submitted if s["kind"] == "window"]
    ms = "extract(epoch from ({a} - {b})) * 1000"
    out: dict[str, Any] = {}
    with engine.connect() as conn:
        acks = conn.execute(sa.text(
            "SELECT count(*), extract(epoch from min(ts)), extract(epoch from max(ts)) "
            "FROM events WHERE kind = 'ack'")).one()
        out["acks"] = int(acks[0])
        out["ack_span_s"] = _r(float(acks[2]) - float(acks[1])) if acks[0] else None
        out["throughput_jobs_per_s"] = _r(acks[0] / max(0.001, float(acks[2]) - float(acks[1]))) \
            if acks[0] else None
        out["peak_acks_in_a_second"] = int(conn.execute(sa.text(
            "SELECT coalesce(max(c), 0) FROM (SELECT date_trunc('second', ts), count(*) AS c "
            "FROM events WHERE kind = 'ack' GROUP BY 1) AS s")).scalar())
        b = conn.execute(sa.text(
            "SELECT total, extract(epoch from created_at), extract(epoch from started_at), "
            "extract(epoch from finished_at) FROM tasks WHERE id = :id"), {"id": big}).one()
        out["big"] = {"jobs": int(b[0]), "created_to_finished_s": _r(float(b[3]) - float(b[1])),
                      "started_to_finished_s": _r(float(b[3]) - float(b[2])),
                      "jobs_per_s": _r(b[0] / max(0.001, float(b[3]) - float(b[2])))}
        lateness = ("SELECT " + ms.format(a="e.ts", b="j.due_at") + " AS v FROM events e "
                    "JOIN jobs j ON j.id = e.job_id WHERE e.kind = 'claim' AND j.task_id = ANY(:ids)")
        out["claim_latency_ms"] = {
            "big": percentiles(conn, lateness, {"ids": [big]}),
            "small": percentiles(conn, lateness, {"ids": small or [-1]}),
            "in_window": percentiles(conn, lateness, {"ids": windowed or [-1]})}
        done = ("SELECT " + ms.format(a="t.finished_at", b="t.created_at") + " / 1000 AS v "
                "FROM tasks t, tasks big WHERE big.id = :big AND t.id = ANY(:ids) "
                "AND t.created_at < big.finished_at")
        out["small_done_s_while_big_runs"] = percentiles(conn, done, {"big": big, "ids": small or [-1]})
        out["small_done_s_all"] = percentiles(
            conn, "SELECT " + ms.format(a="finished_at", b="created_at") + " / 1000 AS v FROM tasks "
            "WHERE id = ANY(:ids)", {"ids": small or [-1]})
        out["window_tasks_done_s"] = percentiles(
            conn, "SELECT " + ms.format(a="finished_at", b="created_at") + " / 1000 AS v FROM tasks "
            "WHERE id = ANY(:ids)", {"ids": windowed or [-1]})
        out["reorders"] = reorders(conn)
        out["schedule_occurrences"] = int(conn.execute(sa.text(
            "SELECT count(*) FROM events WHERE kind = 'fire'")).scalar())
        out["failed_jobs"] = int(conn.execute(sa.text(
            "SELECT count(*) FROM jobs WHERE state <> 'succeeded'")).scalar())
        out["acks_by_worker"] = dict(conn.execute(sa.text(
            "SELECT worker, count(*) FROM events WHERE kind = 'ack' GROUP BY worker "
            "ORDER BY worker")).all())
    return out


def reorders(conn: sa.Connection) -> dict[str, Any]:
    """Fair share's reorders (``reorder`` events): how many, jobs moved, their durations."""
    details = []
    for (data,) in conn.execute(sa.text("SELECT data FROM events WHERE kind = 'reorder'")):
        data = json.loads(data) if isinstance(data, str) else data
        detail = data.get("detail", {})
        details.append(json.loads(detail) if isinstance(detail, str) else detail)
    durations = [int(d.get("duration_ms", 0)) for d in details]
    return {"count": len(details), "jobs_moved": sum(int(d.get("jobs", 0)) for d in details),
            "duration_ms_max": max(durations, default=0),
            "duration_ms_mean": round(statistics.fmean(durations), 1) if durations else 0}


PER_DAY_ASSUMED_JOBS = 150_000
"""The real day the growth figures are scaled to: one fleet-wide change of 100,000 hosts plus
about 50,000 jobs of small tasks, schedules and windowed work (a busy operations day)."""


def growth(before: dict[str, Any], after: dict[str, Any], jobs: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for t in TABLES:
        rows = after[t]["rows"] - before[t]["rows"]
        size = after[t]["bytes"] - before[t]["bytes"]
        out[t] = {"rows": rows, "bytes": size, "bytes_per_job": round(size / max(1, jobs), 1),
                  "rows_per_job": round(rows / max(1, jobs), 2)}
    per_job = sum(out[t]["bytes"] for t in TABLES) / max(1, jobs)
    out["bytes_per_job"] = round(per_job, 1)
    out["per_day"] = {"assumed_jobs": PER_DAY_ASSUMED_JOBS,
                      "mib": round(per_job * PER_DAY_ASSUMED_JOBS / 2**20, 1),
                      "events_rows": round(out["events"]["rows_per_job"] * PER_DAY_ASSUMED_JOBS)}
    return out


# ------------------------------------------------------------------------------ the run


def run(mode: str, database_url: str | None, seed: int) -> dict[str, Any]:
    sizes = SIZES[mode]
    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="fs-fleetday-"))
    started = time.time()
    servers = Servers(tmp, database_url)
    client = redis.Redis.from_url(servers.redis.url)
    engine = sa.create_engine(servers.database_url.replace("postgresql://", "postgresql+psycopg://"))
    try:
        env = node_env(tmp, servers.redis.url, servers.database_url)
        fleetsched(env, "db", "upgrade")
        inventory = tmp / "fleet.ini"
        write_inventory(inventory, sizes.hosts)
        t0 = time.monotonic()
        fleetsched(env, "hosts", "import", str(inventory))
        import_s = time.monotonic() - t0
        groups = groups_of(inventory)
        windowed = list(groups)[:sizes.windows]
        sampler = Sampler(redis.Redis.from_url(servers.redis.url))
        before = sql_sizes(engine)
        with Nodes(env, [[] for _ in range(NODES)], tmp / "workers.log") as nodes:
            wait_workers(client, nodes, NODES, 120)
            schedules = add_schedules(env, groups, sizes)
            add_windows(env, windowed, sizes, datetime.now(UTC))
            traffic = Traffic(servers.database_url, servers.redis.url, sizes, groups, windowed, rng)
            sampler.thread.start()
            load_start = os.getloadavg()
            t0 = time.monotonic()
            traffic.thread.start()
            out = fleetsched(env, "submit", "command", "-t", "all", "-p", "cmd=true",
                             "--executor", "simulate", "--executor-option",
                             f"duration_ms={BIG_OPTIONS['duration_ms']}", "--executor-option",
                             f"jitter_ms={BIG_OPTIONS['jitter_ms']}", "--name", "fleet-change",
                             "--yes", "--output", "json")
            big_submit_s = time.monotonic() - t0
            big = int(json.loads(out)["task_id"])
            wait_finished(engine, [big], nodes, sizes.timeout_s, traffic)
            day_s = time.monotonic() - t0
            for name in schedules:
                fleetsched(env, "schedules", "remove", name)
            deadline = time.monotonic() + 120
            while backlog(client, KEYS.events)[0] > 0 and time.monotonic() < deadline:
                time.sleep(0.2)
            sampler.stop.set()
            sampler.thread.join(5)
        redis_mem = client.info("memory")
        after = sql_sizes(engine)
        result = measure(engine, big, traffic.submitted)
    finally:
        client.close()
        engine.dispose()
        servers.stop()
    jobs = after["jobs"]["rows"] - before["jobs"]["rows"]
    return {
        "mode": mode, "sizes": asdict(sizes), "seed": seed, "nodes": NODES,
        "machine": {"cores": os.cpu_count(), "python": sys.version.split()[0],
                    "load_at_start": [round(x, 2) for x in load_start]},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
        "import_s": round(import_s, 2), "big_submit_s": round(big_submit_s, 2),
        "day_s": round(day_s, 1), "total_s": round(time.time() - started, 1),
        "tasks": {"small": sum(1 for s in traffic.submitted if s["kind"] == "small"),
                  "in_window": sum(1 for s in traffic.submitted if s["kind"] == "window"),
                  "small_submit_ms_p50": round(statistics.median(
                      [s["submit_ms"] for s in traffic.submitted] or [0]), 1)},
        "jobs": jobs, **result,
        "redis": {"used_memory_peak": int(redis_mem["used_memory_peak"]),
                  "used_memory_end": int(redis_mem["used_memory"])},
        "recorder": sampler.summary(),
        "sql": {"before": before, "after": after, "growth": growth(before, after, jobs)},
    }


def table(r: dict[str, Any]) -> str:
    lat, g, rec = r["claim_latency_ms"], r["sql"]["growth"], r["recorder"]

    def p(d: dict[str, Any], unit: str) -> str:
        return f"p50 {d['p50']} / p99 {d['p99']} / max {d['max']} {unit} (n={d['n']:,})"

    lines = [
        f"fleet day ({r['mode']}): {r['sizes']['hosts']:,} hosts, {r['nodes']} x `fleetsched "
        f"worker` (defaults), {r['jobs']:,} jobs; {r['date']}; load average during the run "
        f"{rec['load_min']}-{rec['load_max']} (mean {rec['load_mean']}) on {r['machine']['cores']} cores",
        f"hosts import {r['import_s']} s; big change accepted by `fleetsched submit` in "
        f"{r['big_submit_s']} s; the day took {r['day_s']} s",
        f"throughput: big change {r['big']['jobs']:,} jobs at {r['big']['jobs_per_s']:,.0f} "
        f"jobs/s (its first start to its last finish, {r['big']['started_to_finished_s']} s); "
        f"peak {r['peak_acks_in_a_second']:,} acks in one second; all {r['acks']:,} acks over "
        f"{r['ack_span_s']:.1f} s = {r['throughput_jobs_per_s']:,.0f} jobs/s (idle waits for "
        "windows and schedules included)",
        f"acks by worker: {r['acks_by_worker']}",
        f"claim latency, big change: {p(lat['big'], 'ms')}",
        f"claim latency, small tasks: {p(lat['small'], 'ms')}",
        f"claim latency, in-window tasks (from the window's opening): {p(lat['in_window'], 'ms')}",
        f"small tasks' completion, those created before the big one finished: "
        f"{p(r['small_done_s_while_big_runs'], 's')}",
        f"small tasks' completion, all: {p(r['small_done_s_all'], 's')}",
        f"in-window tasks' completion (created to finished): {p(r['window_tasks_done_s'], 's')}",
        f"fair share: {r['reorders']['count']} reorders moved {r['reorders']['jobs_moved']:,} "
        f"jobs, longest {r['reorders']['duration_ms_max']:,} ms, mean "
        f"{r['reorders']['duration_ms_mean']:,} ms",
        f"schedule occurrences fired: {r['schedule_occurrences']}; jobs not succeeded: "
        f"{r['failed_jobs']}",
        f"Redis: used_memory_peak {r['redis']['used_memory_peak'] / 2**20:,.1f} MiB, at the end "
        f"{r['redis']['used_memory_end'] / 2**20:,.1f} MiB",
        f"recorder lag (sampled {rec['samples']}x): entries p50 {rec['lag_p50']:,} / max "
        f"{rec['lag_max']:,}; oldest unrecorded p50 {rec['oldest_ms_p50'] / 1000:.1f} s / max "
        f"{rec['oldest_ms_max'] / 1000:.1f} s",
    ]
    for t in TABLES:
        lines.append(f"SQL {t}: +{g[t]['rows']:,} rows, +{g[t]['bytes'] / 2**20:,.1f} MiB "
                     f"({g[t]['rows_per_job']} rows, {g[t]['bytes_per_job']} B per job)")
    lines.append(f"SQL per day at {g['per_day']['assumed_jobs']:,} jobs a day (assumed): "
                 f"{g['per_day']['mib']:,} MiB, {g['per_day']['events_rows']:,} event rows "
                 f"({g['bytes_per_job']} B per job)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10,000 hosts, fewer tasks")
    parser.add_argument("--smoke", action="store_true", help="with --quick: tiny sizes")
    parser.add_argument("--database-url", help="a PostgreSQL server to record into")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    result = run(mode, args.database_url, args.seed)
    print(table(result))
    print(json.dumps({k: v for k, v in result.items() if k != "sql"}, indent=2, default=str))
    save_result("fleet_day" if mode == "full" else f"fleet_day-{mode}", result)


if __name__ == "__main__":
    main()
