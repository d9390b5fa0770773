"""Following a task by Server-Sent Events: what 1, 10 and 100 followers of one running task
cost Redis, the record and the server (issue: no more than one follower per task).

    .venv/bin/python benchmarks/bench_sse.py                    # SQLite record
    .venv/bin/python benchmarks/bench_sse.py --database-url postgresql+psycopg://...  # empty db
    .venv/bin/python benchmarks/bench_sse.py --smoke            # tiny sizes: proves it runs

Setup (not measured): a private redis-server; the record (a SQLite file, or the empty
PostgreSQL database given) migrated, ``--hosts`` hosts imported; the real ``fleetsched server``
with its defaults on a loopback port; one ``fleetsched worker`` node (``--slots``, its
recorder on); and one task on every host (``command`` on the simulate executor, 2% failing),
its job duration chosen so that it runs through every window.

Measured: windows of ``--seconds``, each level of ``--followers`` once per run (their order
rotated between runs), each between two windows without followers. For a level, the followers
open ``GET /api/v1/tasks/{id}/events`` (httpx streams in this process); once each has its first
event, the window is measured from outside the server: Redis commands (INFO commandstats
deltas, total and per command; the benchmark's own INFO and MONITOR left out), and those sent
on the server process' own connections (MONITOR, each command's client port matched to the
server's sockets in /proc); for PostgreSQL the record database's pg_stat_database deltas
(transactions committed and rolled back, rows returned and fetched; read from another
database); the server process' CPU time (/proc/PID/stat); the events each follower received.
And from inside, the server's own count of its pollers' reads and round trips to Redis and SQL
(``/status/followers``, read outside the window; the only SQL figure for SQLite, which has no
outside counter).

The worker node and its recorder use the same Redis and record all along, and their load
drifts over minutes, so a level's "share" of a shared figure is its value less the mean of the
0-follower windows either side. Figures are per second, medians of ``--runs``; ratios are N
followers over 1. Writes benchmarks/results/bench_sse.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
import redis  # noqa: E402

from benchmarks._common import compile_bytecode, save_result  # noqa: E402
from benchmarks._node import (  # noqa: E402
    FLEETSCHED,
    Nodes,
    ProcessGroup,
    fleetsched,
    node_env,
    record_with_hosts,
)
from tests.servers import free_port, start_redis, wait_for_port  # noqa: E402

FAILURE_RATE = 0.02
PG_FIELDS = ("xact_commit", "xact_rollback", "tup_returned", "tup_fetched")


class Deployment:
    """Redis, the record, the server and one worker node, on the hosts of one task."""

    def __init__(self, tmp: Path, redis_url: str, database_url: str, args: argparse.Namespace
                 ) -> None:
        self.env = node_env(tmp, redis_url, database_url)
        self.tmp, self.args = tmp, args
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}/api/v1"
        self.groups: list[ProcessGroup] = []

    def setup(self) -> None:
        self.token = record_with_hosts(self.env, self.tmp, self.args.hosts, token="bench-sse",
                                       role="viewer")

    def start(self, job_ms: int) -> int:
        """The server and the worker node up, the task submitted; its id."""
        server = ProcessGroup([[FLEETSCHED, "server", "--port", str(self.port)]],
                              self.tmp / "server.log", self.env, cwd=self.tmp)
        self.groups.append(server)
        self.server_pid = server.procs[0].pid
        wait_for_port("127.0.0.1", self.port, timeout=60)
        out = fleetsched(self.env, "submit", "command", "-t", "all", "-p", "cmd=true",
                         "--executor", "simulate", "--executor-option", f"duration_ms={job_ms}",
                         "--executor-option", f"failure_rate={FAILURE_RATE}", "--name",
                         "followed", "--yes", "--output", "json")
        self.groups.append(Nodes(self.env, [["--slots", str(self.args.slots), "--processes",
                                             "1", "--grace", "1s"]], self.tmp / "worker.log"))
        return int(json.loads(out)["task_id"])

    def check_alive(self) -> None:
        for group in self.groups:
            group.check_alive()

    def followers_stats(self) -> dict[str, int]:
        reply = httpx.get(f"{self.base}/status/followers", timeout=30,
                          headers={"Authorization": f"Bearer {self.token}"})
        reply.raise_for_status()
        stats: dict[str, int] = reply.json()
        return stats

    def stop(self) -> None:
        """The worker node, then the server (the task is left in this deployment's stores)."""
        for group in reversed(self.groups):
            group.stop()


class Followers:
    """``n`` followers of one task's event stream in this process, each counting the events
    (not the heartbeat comments) it received."""

    def __init__(self, base: str, token: str, task_id: int, n: int) -> None:
        self.url = f"{base}/tasks/{task_id}/events"
        self.headers = {"Authorization": f"Bearer {token}"}
        self.n = n
        self.events = [0] * n
        self.ended = False
        self.client = httpx.AsyncClient(timeout=httpx.Timeout(60, read=None),
                                        limits=httpx.Limits(max_connections=n + 1))
        self.tasks: list[asyncio.Task[None]] = []

    async def open(self, timeout_s: float = 120) -> None:
        """All streams open, each past its first event."""
        self.tasks = [asyncio.create_task(self._follow(i)) for i in range(self.n)]
        deadline = time.monotonic() + timeout_s
        while min(self.events, default=1) == 0:
            if any(t.done() for t in self.tasks):
                await asyncio.gather(*self.tasks)  # raises the stream's error
            if time.monotonic() > deadline:
                raise SystemExit(f"error: {self.events.count(0)} of {self.n} followers had "
                                 f"no event after {timeout_s:.0f} s")
            await asyncio.sleep(0.05)

    async def _follow(self, i: int) -> None:
        async with self.client.stream("GET", self.url, headers=self.headers) as reply:
            if reply.status_code != 200:
                raise SystemExit(f"error: follower {i}: HTTP {reply.status_code}")
            async for line in reply.aiter_lines():
                if line.startswith("event: "):
                    self.events[i] += 1
                    self.ended = self.ended or line == "event: end"

    async def close(self) -> None:
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        await self.client.aclose()


def redis_ports(pid: int, redis_port: int) -> set[int]:
    """The local ports of process ``pid``'s TCP connections to ``redis_port`` (Linux: its
    sockets' inodes in /proc/PID/fd, found in /proc/net/tcp)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes and int(fields[2].rsplit(":", 1)[1], 16) == redis_port:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` so far (Linux: /proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Meters:
    """The outside counters read at each end of a window, and the Redis commands the server
    process sent during one (MONITOR, by connection)."""

    def __init__(self, redis_url: str, database_url: str, server_pid: int) -> None:
        self.redis = redis.Redis.from_url(redis_url)
        self.redis_port = self.redis.connection_pool.connection_kwargs["port"]
        self.server_pid = server_pid
        self.pg, self.datname = None, None
        self.settle_s = 1.0
        if database_url.startswith("postgresql"):
            # A backend reports its transactions up to 10 s late (PostgreSQL's
            # PGSTAT_IDLE_INTERVAL): the joins' token checks must land before a window opens.
            self.settle_s = 11.0
            import psycopg
            from sqlalchemy.engine import make_url

            url = make_url(database_url)
            self.datname = url.database
            # pg_stat_database read from another database, so the reads are not counted
            self.pg = psycopg.connect(
                host=url.host, port=url.port or 5432, user=url.username,
                password=url.password, dbname="postgres", autocommit=True)

    def read(self) -> dict[str, Any]:
        stats = self.redis.info("commandstats")
        out: dict[str, Any] = {
            "t": time.monotonic(), "cpu": cpu_seconds(self.server_pid),
            "redis": {name.removeprefix("cmdstat_"): v["calls"] for name, v in stats.items()
                      if name not in ("cmdstat_info", "cmdstat_monitor")}}
        if self.pg is not None:
            row = self.pg.execute(f"SELECT {', '.join(PG_FIELDS)} FROM pg_stat_database "
                                  "WHERE datname = %s", (self.datname,)).fetchone()
            out["pg"] = dict(zip(PG_FIELDS, row))
        return out

    def server_commands(self, seconds: float) -> dict[str, int]:
        """For ``seconds``, the commands sent on the server process' connections to Redis."""
        ports = redis_ports(self.server_pid, self.redis_port)
        counts: dict[tuple[int, str], int] = {}
        deadline = time.monotonic() + seconds
        with self.redis.monitor() as feed:
            while time.monotonic() < deadline:
                sent = feed.next_command()  # the worker node sends several a second
                port = sent["client_port"]
                if port.isdigit():
                    key = (int(port), sent["command"].split(" ", 1)[0].strip('"').lower())
                    counts[key] = counts.get(key, 0) + 1
        ports |= redis_ports(self.server_pid, self.redis_port)
        out: dict[str, int] = {}
        for (port, name), n in counts.items():
            if port in ports:
                out[name] = out.get(name, 0) + n
        return out

    def close(self) -> None:
        self.redis.close()
        if self.pg is not None:
            self.pg.close()


def window(before: dict[str, Any], after: dict[str, Any], sent: dict[str, int],
           inside: tuple[dict[str, int], ...], events: tuple[list[int], list[int]]
           ) -> dict[str, Any]:
    """One window's figures, per second."""
    s = after["t"] - before["t"]
    commands = {c: (n - before["redis"].get(c, 0)) / s for c, n in after["redis"].items()
                if n != before["redis"].get(c, 0)}
    got = [(b - a) / s for a, b in zip(*events)]
    out = {"seconds": s, "redis": sum(commands.values()), "commands": commands,
           "server_redis": sum(sent.values()) / s,
           "server_commands": {c: n / s for c, n in sent.items()}, "cpu_ms": (after["cpu"] - before["cpu"]) * 1000 / s,
           "polls": (inside[1]["polls"] - inside[0]["polls"]) / s,
           "queries": (inside[1]["queries"] - inside[0]["queries"]) / s,
           "events_each": statistics.median(got) if got else 0.0,
           "events_min": min(got, default=0.0), "feeds": inside[0]["feeds"]}
    if "pg" in after:
        out |= {f: (after["pg"][f] - before["pg"][f]) / s for f in PG_FIELDS}
        out["xact"] = out["xact_commit"] + out["xact_rollback"]
    return out


async def measure_level(dep: Deployment, meters: Meters, task_id: int, n: int,
                        seconds: float, pause: bool = True) -> dict[str, Any]:
    """One window with ``n`` followers of the task, after the settling pause unless not
    ``pause``."""
    followers = Followers(dep.base, dep.token, task_id, n)
    try:
        await followers.open()
        if pause:
            await asyncio.sleep(meters.settle_s)  # the joins' own requests counted before
        inside_before = dep.followers_stats()
        first, before = list(followers.events), meters.read()
        sent = await asyncio.to_thread(meters.server_commands, seconds)
        after, last = meters.read(), list(followers.events)
        inside_after = dep.followers_stats()
    finally:
        await followers.close()
    dep.check_alive()
    if followers.ended:
        raise SystemExit("error: the task ended during a window: raise --hosts (or lower "
                         "--slots)")
    await settle(dep)
    return window(before, after, sent, (inside_before, inside_after), (first, last))


async def settle(dep: Deployment, timeout_s: float = 30) -> None:
    """Until the server has no follower and no poller left."""
    deadline = time.monotonic() + timeout_s
    while (stats := dep.followers_stats())["feeds"] or stats["followers"]:
        if time.monotonic() > deadline:
            raise SystemExit(f"error: the server still holds {stats} after {timeout_s:.0f} s")
        await asyncio.sleep(0.1)


def sequence(levels: list[int], runs: int) -> list[int]:
    """The windows' follower counts: each level once per run (their order rotated between
    runs), each between two 0-follower windows, so that a level's baseline is the mean of the
    windows either side of it and a drift of the worker's load over the minutes cancels."""
    shown = [n for n in levels if n > 0]
    out = [0]
    for r in range(runs):
        turn = r % len(shown)
        for n in shown[turn:] + shown[:turn]:
            out += [n, 0]
    return out


async def measure(dep: Deployment, meters: Meters, task_id: int, args: argparse.Namespace
                  ) -> list[dict[str, Any]]:
    windows = []
    for i, n in enumerate(sequence(args.followers, args.runs)):
        # --smoke: a 0-follower window right after a level's has nothing of its own to wait out
        # (no joins; the level's last reads are little); the first waits out the setup's
        pause = not args.smoke or n > 0 or i == 0
        figures = await measure_level(dep, meters, task_id, n, args.seconds, pause)
        windows.append({"followers": n, **figures})
        print(f"window {i + 1}, {n} followers: {figures['redis']:.1f} Redis commands/s, "
              f"{figures['polls']:.2f} polls/s, {figures['cpu_ms']:.1f} server CPU ms/s",
              file=sys.stderr)
    return windows


SHARED = ("redis", "cpu_ms", "xact", *PG_FIELDS)  # the figures the worker node's load is part of


def summary(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians by level: each figure, the followers' share of the shared ones (less the mean
    of the 0-follower windows either side), each command's rate, and the ratios to 1
    follower."""
    for i, w in enumerate(windows):
        if w["followers"] > 0:
            w |= {f"{k}_share": w[k] - (windows[i - 1][k] + windows[i + 1][k]) / 2
                  for k in SHARED if k in w}
    levels: dict[str, Any] = {}
    for n in sorted({w["followers"] for w in windows}):
        mine = [w for w in windows if w["followers"] == n]
        med = {k: statistics.median(w[k] for w in mine) for k, v in mine[0].items()
               if isinstance(v, float)}
        for field in ("commands", "server_commands"):
            names = sorted({c for w in mine for c in w[field]})
            med[field] = {c: round(statistics.median(w[field].get(c, 0.0) for w in mine), 2)
                          for c in names}
        levels[str(n)] = med
    one = levels.get("1")
    for n, med in levels.items():
        if one is not None and int(n) > 1:
            med["ratio"] = {k: round(med[k] / one[k], 2) for k in
                            ("redis", "server_redis", "polls", "queries", "cpu_ms",
                             *(f"{k}_share" for k in SHARED)) if k in med and one[k] > 0}
    return levels


def table(result: dict[str, Any]) -> str:
    levels = result["levels"]
    title = (f"{result['database']}, task of {result['hosts']} hosts ({result['job_ms']} ms "
             f"jobs, {result['slots']} slots), {result['seconds']:g} s windows, medians of "
             f"{result['runs']} runs; per second; redis: all commands, share: less the 0-follower "
             "windows either side, server: sent by the server process")
    head = (f"{'followers':>9} {'redis':>7} {'share':>6} {'server':>6} {'polls':>5} "
            f"{'queries':>7} {'cpu ms':>6} {'share':>5} {'events each':>11} {'fewest':>6}")
    lines = [title, head]
    for n, m in levels.items():
        lines.append(f"{n:>9} {m['redis']:>7.1f} {m.get('redis_share', 0):>6.1f} "
                     f"{m['server_redis']:>6.2f} {m['polls']:>5.2f} {m['queries']:>7.2f} "
                     f"{m['cpu_ms']:>6.1f} {m.get('cpu_ms_share', 0):>5.1f} "
                     f"{m['events_each']:>11.2f} {m['events_min']:>6.2f}")
    if "xact" in levels["0"]:
        names = {"xact": "transactions", "xact_commit": "committed", "xact_rollback":
                 "rolled back", "tup_returned": "rows returned", "tup_fetched": "rows fetched"}
        lines += ["the record (pg_stat_database), per second, followers' share in brackets",
                  f"{'followers':>9} " + " ".join(f"{v:>20}" for v in names.values())]
        for n, m in levels.items():
            lines.append(f"{n:>9} " + " ".join(
                f"{m[f]:>11.1f} ({m.get(f + '_share', 0):>6.1f})" for f in names))
    for n, m in levels.items():
        if "ratio" in m:
            lines.append(f"ratios {n} followers / 1: " + ", ".join(
                f"{k} {v:g}" for k, v in m["ratio"].items()))
    return "\n".join(lines)


def job_ms(args: argparse.Namespace) -> int:
    """A job duration that keeps the task running through every window, with room to spare."""
    windows = len(sequence(args.followers, args.runs))
    needed_s = 30 + windows * (args.seconds + 4) * 1.5
    return max(100, int(needed_s * args.slots * 1000 / args.hosts))


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="fs-bench-sse-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "redis").mkdir()
        redis_server = start_redis(tmp / "redis")
        database_url = args.database_url or f"sqlite:///{tmp}/record.db"
        dep = Deployment(tmp / "deployment", redis_server.url, database_url, args)
        meters = None
        try:
            dep.setup()
            duration = job_ms(args)
            task_id = dep.start(duration)
            meters = Meters(redis_server.url, database_url, dep.server_pid)
            windows = asyncio.run(measure(dep, meters, task_id, args))
        finally:
            if meters is not None:
                meters.close()
            dep.stop()
            redis_server.stop()
    return {"database": "postgresql" if args.database_url else "sqlite", "hosts": args.hosts,
            "job_ms": duration, "slots": args.slots, "seconds": args.seconds, "runs": args.runs,
            "levels": summary(windows), "windows": windows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=2000, help="hosts of the followed task")
    parser.add_argument("--slots", type=int, default=8, help="the worker node's slots")
    parser.add_argument("--followers", default="0,1,10,100",
                        help="followers at each level (0: the baseline)")
    parser.add_argument("--seconds", type=float, default=15.0, help="per window")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--database-url", help="an empty PostgreSQL database (default: a "
                        "SQLite file)")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one short run, "
                        "and no settling pause before a window without followers that follows "
                        "one with (the pause waits out the record's late count of the "
                        "followers' joins)")
    args = parser.parse_args()
    if args.smoke:
        args.hosts, args.slots, args.followers, args.seconds, args.runs = 60, 2, "0,1,10", 4, 1
    try:
        args.followers = sorted({0} | {int(n) for n in args.followers.split(",")})
    except ValueError:
        args.followers = []
    if not args.followers or args.followers[0] < 0 or len(args.followers) < 2:
        parser.error("--followers: follower counts separated by commas (0, the baseline, is "
                     "always measured)")
    if min(args.hosts, args.slots, args.runs) < 1 or args.seconds <= 0:
        parser.error("--hosts, --slots, --runs and --seconds: more than 0")
    if args.database_url and not args.database_url.startswith("postgresql"):
        parser.error("--database-url: a postgresql+psycopg:// URL (SQLite is the default)")
    compile_bytecode()
    result = run(args)
    shown = {k: v for k, v in result.items() if k != "windows"}
    print(table(result))
    print(json.dumps(shown, indent=2))
    save_result("bench_sse", result)


if __name__ == "__main__":
    main()
