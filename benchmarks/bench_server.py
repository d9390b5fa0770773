"""HTTP API benchmark: task list and task detail of a 10,000-host task, 100,000 jobs in the
record, 50 concurrent clients (issue 28, "Performance": p99 under 50 ms).

    .venv/bin/python benchmarks/bench_server.py                  # SQLite, then PostgreSQL
    .venv/bin/python benchmarks/bench_server.py --only sqlite
    .venv/bin/python benchmarks/bench_server.py --database-url postgresql+psycopg://...
    .venv/bin/python benchmarks/bench_server.py --smoke          # tiny sizes: proves it runs

Setup (not timed): a private redis-server; a fresh record (a SQLite file, or a database on a
private PostgreSQL cluster, or on the server of ``--database-url``) migrated to the newest
schema, then filled by bulk INSERTs straight into the tables (not through ``submit``, which
would take minutes for 100,000 jobs): one task of ``--hosts`` jobs (the one whose detail is
read; finished, 2% failed) and older finished tasks of 1,000 jobs up to ``--jobs`` in all;
an API token made by ``fleetsched tokens create``.

Timed: the real ``fleetsched server`` process with its defaults (loopback, its default log
format: JSON lines, to a file; its read cache of 1 s), and ``--clients`` clients (asyncio tasks
in this process, one keep-alive connection each, a minimal HTTP/1.1 client so that the clients'
CPU stays small beside the server's) calling one endpoint in a loop for ``--seconds``, back to
back (the worst case: 50 clients always waiting) or, with ``--think S``, one request every S
seconds each (dashboards polling):
``GET /api/v1/tasks`` (the first page, 100 tasks), ``GET /api/v1/tasks/{id}`` (the big task),
and ``GET /api/v1/tasks/{id}/jobs`` (its first page of jobs) where the server has it; each
twice: as a dashboard asks (answers may come from the server's read cache, at most 1 s old)
and with ``Cache-Control: no-cache`` (as the CLI asks: every answer computed). Latency is
each request's round trip seen by its client. Each endpoint runs ``--runs`` times; the table
shows the median of the runs' p50, p95 and p99, p99 over the 50 ms target, and the CPU time per
request of the server process and of the clients (from /proc and ``time.process_time``), and
the server's share of one core while it ran: what a request costs, whatever the load. The
clients share the machine's cores with the server: on 2 cores they are part of what is measured.
Writes benchmarks/results/bench_server.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from benchmarks._common import compile_bytecode, save_result  # noqa: E402
from scheduler.record.migrate import upgrade  # noqa: E402
from scheduler.record.models import Job, Task  # noqa: E402
from tests.servers import free_port, wait_for_port  # noqa: E402

TARGET_MS = 50.0
BIG_TASK = 1
START = datetime(2026, 11, 2, 8, 0, tzinfo=timezone.utc)
FLEETSCHED = [sys.executable, "-m", "scheduler"]


def fill(url: str, *, hosts: int, jobs: int) -> int:
    """Tasks and jobs by bulk INSERT: task 1 has ``hosts`` jobs, the others 1,000 each, ``jobs``
    in all. Returns the number of tasks."""
    engine = sa.create_engine(url)
    sizes = [hosts] + [1000] * max(0, (jobs - hosts) // 1000)
    task_rows, job_rows = [], []
    for t, size in enumerate(sizes, start=1):
        created = START + timedelta(minutes=15 * t)
        failed = size // 50
        task_rows.append({
            "id": t, "name": f"task {t}", "action": "command", "params": {"cmd": "uptime"},
            "target": "all", "operator": "bench", "priority": "normal", "state": "failed"
            if failed else "succeeded", "created_at": created, "started_at": created,
            "finished_at": created + timedelta(minutes=10), "total": size,
            "succeeded": size - failed, "failed": failed})
        for n in range(size):
            bad = n % 50 == 49
            job_rows.append({
                "id": f"{t}.{n}", "task_id": t, "seq": n, "host": f"host-{n:05d}",
                "state": "failed" if bad else "succeeded", "attempts": 1,
                "started_at": created, "finished_at": created + timedelta(seconds=3),
                "worker": "w1", "exit_code": 1 if bad else 0, "duration_ms": 3000,
                "error": "exit status 1" if bad else None,
                "output_tail": "load average: 0.10, 0.12, 0.09\n"})
    with engine.begin() as conn:
        conn.execute(sa.insert(Task.__table__), task_rows)
        for i in range(0, len(job_rows), 5000):
            conn.execute(sa.insert(Job.__table__), job_rows[i:i + 5000])
    if url.startswith("postgresql"):
        with engine.begin() as conn:
            conn.execute(sa.text("ANALYZE"))
    engine.dispose()
    return len(sizes)


class Server:
    """``fleetsched server`` with its defaults on a free loopback port."""

    def __init__(self, tmp: Path, redis_url: str, database_url: str) -> None:
        self.base_argv = [*FLEETSCHED, "--redis-url", redis_url, "--database-url", database_url]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
        self.env |= {"XDG_CONFIG_HOME": str(tmp / "config"), "XDG_STATE_HOME": str(tmp)}
        self.tmp = tmp
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def token(self) -> str:
        return subprocess.run([*self.base_argv, "--as", "bench-admin", "tokens", "create",
                               "bench", "--role", "viewer"], env=self.env, check=True,
                              capture_output=True, text=True).stdout.strip()

    def start(self) -> None:
        log = (self.tmp / "server.log").open("ab")
        self.proc = subprocess.Popen([*self.base_argv, "server", "--port", str(self.port)],
                                     env=self.env, stdout=log, stderr=log, cwd=self.tmp)
        wait_for_port("127.0.0.1", self.port, timeout=60)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far (Linux: /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Connection:
    """One keep-alive HTTP/1.1 connection that GETs and reads the whole answer: a client of a
    few lines, so the clients' CPU (they share the server's cores) stays a small part of
    what is measured (httpx spent 8-12 ms of CPU a request here)."""

    def __init__(self, host: str, port: int, headers: dict[str, str]) -> None:
        self.host, self.port = host, port
        self.head = "".join(f"{k}: {v}\r\n" for k, v in
                            {"Host": f"{host}:{port}", **headers}.items())
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def get(self, path: str) -> int:
        """The answer's status; the body is read whole (and thrown away)."""
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        assert self.reader is not None
        self.writer.write(f"GET {path} HTTP/1.1\r\n{self.head}\r\n".encode())
        try:
            status = int((await self.reader.readline()).split(b" ", 2)[1])
            length, closing = 0, False
            while (line := await self.reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
                elif name.lower() == "connection" and value.strip().lower() == "close":
                    closing = True
            await self.reader.readexactly(length)
        except (IndexError, ValueError, asyncio.IncompleteReadError, OSError):
            self.close()
            raise ConnectionResetError("the answer was cut") from None
        if closing:
            self.close()
        return status

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.reader = self.writer = None


async def hammer(base: str, token: str, path: str, clients: int, seconds: float,
                 think: float = 0.0, server_pid: int | None = None, fresh: bool = False
                 ) -> dict[str, Any]:
    """``clients`` loops of GET ``path`` for ``seconds``, each starting a request every
    ``think`` seconds at most (0: the next as soon as the last answered): every round trip's
    latency. ``fresh`` sends ``Cache-Control: no-cache`` (as the CLI does): every answer
    computed, none from the server's read cache."""
    latencies: list[float] = []
    errors: dict[str, int] = {}
    url = httpx.URL(base)
    headers = {"Authorization": f"Bearer {token}", **({"Cache-Control": "no-cache"}
                                                      if fresh else {})}
    conns = [Connection(url.host, url.port or 80, headers) for _ in range(clients)]
    target = f"{url.path.rstrip('/')}{path}"
    for _ in range(3):  # warm: connections, the server's first imports and plans
        await asyncio.gather(*(c.get(target) for c in conns), return_exceptions=True)
    stop = time.perf_counter() + seconds

    async def loop(n: int) -> None:
        await asyncio.sleep(think * n / clients)  # spread the pollers' starts
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            try:
                status = str(await conns[n].get(target))
            except OSError as exc:
                status = type(exc).__name__
            latencies.append(time.perf_counter() - t0)
            if status != "200":
                errors[status] = errors.get(status, 0) + 1
            await asyncio.sleep(max(0.0, think - (time.perf_counter() - t0)))

    start, client_cpu = time.perf_counter(), time.process_time()
    server_cpu = cpu_seconds(server_pid) if server_pid else 0.0
    await asyncio.gather(*(loop(n) for n in range(clients)))
    elapsed = time.perf_counter() - start
    client_cpu = time.process_time() - client_cpu
    server_cpu = (cpu_seconds(server_pid) - server_cpu) if server_pid else 0.0
    for c in conns:
        c.close()
    ms = sorted(x * 1000 for x in latencies)
    return {"requests": len(ms), "per_s": len(ms) / elapsed, "errors": errors,
            "server_cpu_ms": server_cpu * 1000 / len(ms), "client_cpu_ms":
            client_cpu * 1000 / len(ms), "server_cpu_share": server_cpu / elapsed,
            "p50": percentile(ms, 50), "p95": percentile(ms, 95), "p99": percentile(ms, 99),
            "max": ms[-1]}


def percentile(sorted_ms: list[float], p: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(len(sorted_ms) * p / 100))]


def endpoints(base: str, token: str) -> dict[str, str]:
    """The endpoints to time; the big task's job pages where this server has them."""
    found = {"tasks list": "/tasks", "task detail": f"/tasks/{BIG_TASK}"}
    answer = httpx.get(f"{base}/tasks/{BIG_TASK}/jobs", timeout=60,
                       headers={"Authorization": f"Bearer {token}"})
    if answer.status_code == 200:
        found["task jobs page"] = f"/tasks/{BIG_TASK}/jobs"
    return found


def detail_size(base: str, token: str) -> int:
    return len(httpx.get(f"{base}/tasks/{BIG_TASK}", timeout=60,
                         headers={"Authorization": f"Bearer {token}"}).content)


def bench_database(kind: str, database_url: str, redis_url: str, args: argparse.Namespace
                   ) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fs-bench-server-") as tmp_name:
        tmp = Path(tmp_name)
        upgrade(database_url)
        t0 = time.perf_counter()
        tasks = fill(database_url, hosts=args.hosts, jobs=args.jobs)
        filled_s = time.perf_counter() - t0
        server = Server(tmp, redis_url, database_url)
        token = server.token()
        server.start()
        try:
            base = f"http://127.0.0.1:{server.port}/api/v1"
            paths = endpoints(base, token)
            runs: dict[str, list[dict[str, Any]]] = {}
            for _ in range(args.runs):
                for name, path in paths.items():
                    for fresh in (False, True):
                        key = f"{name}{', no-cache' if fresh else ''}"
                        runs.setdefault(key, []).append(asyncio.run(
                            hammer(base, token, path, args.clients, args.seconds,
                                   args.think, server.proc.pid if server.proc else None,
                                   fresh)))
            size = detail_size(base, token)
        finally:
            server.stop()
        return {"database": kind, "tasks": tasks, "jobs": args.jobs, "big_task_hosts":
                args.hosts, "fill_s": round(filled_s, 1), "detail_bytes": size,
                "endpoints": {name: summary(rs) for name, rs in runs.items()}}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    med = {k: statistics.median(r[k] for r in runs)
           for k in ("p50", "p95", "p99", "per_s", "server_cpu_ms", "client_cpu_ms",
                     "server_cpu_share")}
    return {**{k: round(v, 2) for k, v in med.items()},
            "p99_over_target": round(med["p99"] / TARGET_MS, 2),
            "runs_p99": [round(r["p99"], 1) for r in runs],
            "requests": sum(r["requests"] for r in runs),
            "errors": {k: sum(r["errors"].get(k, 0) for r in runs)
                       for k in {k for r in runs for k in r["errors"]}}}


def table(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    pace = f"one request every {args.think:g} s each" if args.think else "back to back"
    lines = [f"{args.clients} clients ({pace}), {args.seconds:g} s per endpoint and run, median of "
             f"{args.runs} runs; target p99 < {TARGET_MS:g} ms",
             f"{'database':<10} {'endpoint':<26} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} "
             f"{'p99/50ms':>9} {'req/s':>7} {'srv cpu':>8} {'cli cpu':>8} {'srv %cpu':>8}  "
             "runs' p99"]
    for r in results:
        for name, e in r["endpoints"].items():
            lines.append(f"{r['database']:<10} {name:<26} {e['p50']:>8.1f} {e['p95']:>8.1f} "
                         f"{e['p99']:>8.1f} {e['p99_over_target']:>9.2f} {e['per_s']:>7.0f} "
                         f"{e['server_cpu_ms']:>6.1f}ms {e['client_cpu_ms']:>6.1f}ms "
                         f"{e['server_cpu_share'] * 100:>7.0f}%  "
                         f"{e['runs_p99']}" + (f"  errors {e['errors']}" if e["errors"] else ""))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=10_000, help="jobs of the big task")
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs in the record")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=10.0, help="per endpoint and run")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--think", type=float, default=0.0,
                        help="seconds between a client's requests (0: back to back)")
    parser.add_argument("--only", choices=("sqlite", "postgresql"))
    parser.add_argument("--database-url", help="an empty PostgreSQL database to fill (default: "
                        "a private cluster when PostgreSQL is installed)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one short run")
    args = parser.parse_args()
    if args.smoke:
        args.hosts, args.jobs, args.clients, args.seconds, args.runs = 200, 1200, 5, 0.2, 1
    compile_bytecode()
    from tests.servers import pg_bindir, start_postgres, start_redis

    results = []
    with tempfile.TemporaryDirectory(prefix="fs-bench-redis-") as redis_dir:
        redis_server = start_redis(Path(redis_dir))
        try:
            if args.only != "postgresql":
                with tempfile.TemporaryDirectory(prefix="fs-bench-sqlite-") as d:
                    results.append(bench_database("sqlite", f"sqlite:///{d}/record.db",
                                                  redis_server.url, args))
            if args.database_url and args.only != "sqlite":
                results.append(bench_database("postgresql", args.database_url,
                                              redis_server.url, args))
            elif args.only != "sqlite" and pg_bindir() is not None:
                pg = start_postgres(Path(redis_dir))
                try:
                    results.append(bench_database("postgresql", pg.create_database("bench"),
                                                  redis_server.url, args))
                finally:
                    pg.stop()
            elif args.only != "sqlite":
                print("no PostgreSQL here (apt-get install postgresql, or --database-url): "
                      "SQLite only", file=sys.stderr)
        finally:
            redis_server.stop()
    print(table(results, args))
    print(json.dumps(results, indent=2))
    save_result("bench_server", {"clients": args.clients, "seconds": args.seconds,
                                 "think": args.think, "runs": args.runs, "results": results})


if __name__ == "__main__":
    main()
