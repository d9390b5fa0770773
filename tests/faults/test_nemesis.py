"""The nemesis: a mixed workload on real worker nodes while a seeded random schedule of faults
hits every part at once, then the history checker's verdict (tests/faults/history.py).

Workload (an operator thread, seeded): idempotent and non-idempotent tasks, concurrency limits,
a failure threshold (a task whose jobs fail often), a schedule firing every second, a one-off
service window opening and closing with in-window jobs, and operator cancel, pause, resume,
retry-failed and reprioritize at random moments.

Faults (seeded): kill -9 of a node master (restarted a moment later) and of a child process,
SIGSTOP of a master past its lease then SIGCONT, kill -9 of Redis and its restart (AOF
always), a PostgreSQL cut through the TCP proxy the recorders use, and a reconcile run (on a
direct connection) during such a cut, while the recorders hold entries they could not commit.
The network class: every node reaches Redis through a TCP proxy of its own, which resets its
connections, stalls them, or forwards a verb's request (claim, ack, fail, release, defer,
extend) and drops its reply, so the verb ran and the node cannot know; the database proxy
stalls, and drops the reply of a COMMIT (docs/reliability.md, "Ambiguous replies"). And a
Redis that loses its data (killed, its files removed, started empty) followed by a reconcile
while the nodes run: reconcile asks them what they run before it rebuilds anything.

Then the faults stop, paused tasks are resumed, what still waits for a window that closed is
cancelled, every node finishes, the stream is drained into SQL, and the checker judges the
whole history. The seed is printed (and taken from ``FLEETSCHED_NEMESIS_SEED``) so a failure can
be replayed; ``--soak`` runs the long variant (``FLEETSCHED_SOAK_SECONDS``, default 1200).
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import threading
import time
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from scheduler.queue.client import Queue
from scheduler.queue.scripts import script_source
from scheduler.record.migrate import upgrade
from scheduler.submission.reconcile import reconcile
from tests.faults.history import check
from tests.servers import RedisServer, start_redis
from tests.submit_support import KEYS, Cli, drain
from tests.tcp_proxy import TcpProxy
from tests.worker_support import WorkerProcess, alive, wait_until

HOSTS = 24
LEASE = "2s"
LEASE_MS = 2_000
# The verbs whose replies the network faults lose, by the SHA their EVALSHA carries.
VERB_MARKERS = {verb: hashlib.sha1(script_source(verb).encode()).hexdigest().encode()
                for verb in ("claim", "ack", "fail", "release", "defer", "extend")}


def fleet() -> str:
    rows = [f"n{i:02d} ansible_host=127.0.0.1" for i in range(HOSTS)]
    return ("[web]\n" + "\n".join(rows[:12]) + "\n[db]\n" + "\n".join(rows[12:20])
            + "\n[edge]\n" + "\n".join(rows[20:]) + "\n")


class Nemesis:
    """The run: servers, nodes, the operator's workload and the faults, all seeded."""

    def __init__(self, tmp: Path, redis_server: RedisServer, db_url: str, seed: int,
                 seconds: float) -> None:
        self.tmp, self.redis, self.db, self.seconds = tmp, redis_server, db_url, seconds
        self.rng = random.Random(seed)
        self.op_rng = random.Random(seed + 1)
        url = sa.engine.make_url(db_url)
        self.proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
        self.proxied = url.set(host=self.proxy.host, port=self.proxy.port).render_as_string(
            hide_password=False)
        self.cli = Cli(tmp, redis_server.url, db_url)
        self.redis_proxies: dict[int, TcpProxy] = {}  # node slot -> its path to Redis
        self.nodes: list[WorkerProcess] = []
        self.generation = 0
        self.tasks: list[int] = []
        self.faults: Counter[str] = Counter()
        self.actions: Counter[str] = Counter()
        self.stop = threading.Event()
        self.lock = threading.Lock()

    # ------------------------------------------------------------------------------ nodes

    def start_node(self, slot: int) -> WorkerProcess:
        self.generation += 1
        wid = f"node{slot}-{self.generation}"
        args = ["--id", wid, "--slots", "4", "--processes", "1", "--lease", LEASE,
                "--grace", "1s"]
        proxy = self.redis_proxies.get(slot)
        if proxy is None:
            target = redis.connection.parse_url(self.redis.url)
            proxy = self.redis_proxies[slot] = TcpProxy(target.get("host", "127.0.0.1"),
                                                        int(target.get("port", 6379)))
        url = redis.connection.parse_url(self.redis.url)
        via = f"redis://{proxy.host}:{proxy.port}/{url.get('db', 0)}"
        node = WorkerProcess(via, self.tmp / wid, args,
                             env={"FLEETSCHED_DATABASE_URL": self.proxied}).start()
        return node

    def logs(self) -> list[Path]:
        return [n.log for n in self.all_nodes]

    # --------------------------------------------------------------------------- workload

    def setup(self) -> None:
        (self.tmp / "inventory.ini").write_text(fleet())
        self.cli.ok("hosts", "import", str(self.tmp / "inventory.ini"))
        self.cli.ok("schedules", "add", "beat", "--every", "1s", "--catch-up", "all",
                    "--catch-up-window", "1h", "--overlap", "allow", "command", "-t",
                    "group:edge", "-p", "cmd=true", "--executor", "simulate",
                    "--executor-option", "duration_ms=30")
        # One-off windows 14 s long every 20 s (the command action expects 10 s), two ahead at
        # any time; the operator adds the next and removes the oldest as they pass (a host may
        # have only a few): in-window jobs wait, run inside one, or are deferred at its close
        self.first_window = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=3)
        self.windows_added = 0
        for _ in range(3):
            self.roll_windows()

    def roll_windows(self) -> None:
        """Add the next one-off window; remove the oldest once four exist (it has closed)."""
        k = self.windows_added
        start = self.first_window + timedelta(seconds=20 * k)
        self.cli.ok("windows", "add", f"slot{k}", "--start", start.isoformat(), "--duration", "14s")
        self.cli.ok("windows", "assign", f"slot{k}", "--group", "db")
        self.windows_added += 1
        if k >= 3:
            self.cli("windows", "remove", f"slot{k - 3}")

    def windows_due(self) -> bool:
        """True when the newest window opens within 40 s: time to add the next."""
        newest = self.first_window + timedelta(seconds=20 * (self.windows_added - 1))
        return newest - datetime.now(timezone.utc) < timedelta(seconds=40)

    def submit(self) -> None:
        r = self.op_rng
        kind = r.choice(["idempotent", "once", "limited", "failing", "window"])
        args = ["command", "-t", r.choice(["group:web", "group:db", "all", "n0*,n1*"]),
                "-p", "cmd=true", "--executor", "simulate",
                "--executor-option", f"duration_ms={r.choice([50, 200, 600, 1500])}",
                "--retries", "2", "--backoff", "200ms", "--priority",
                r.choice(["urgent", "normal", "normal", "bulk"])]
        if kind == "once":
            args += ["--not-idempotent"]
        elif kind == "idempotent":
            args += ["--idempotent"]
        elif kind == "limited":
            args += ["--max-concurrency", str(r.choice([1, 2, 3]))]
        elif kind == "failing":
            args += ["--executor-option", "failure_rate=0.4", "--max-failures", "3"]
        elif kind == "window":
            args = ["command", "-t", "group:db", "-p", "cmd=true", "--executor", "simulate",
                    "--executor-option", "duration_ms=100", "--in-window", "--not-idempotent"]
        code, out, err = self.cli("submit", *args, "--yes")
        if code == 0 and out.strip().isdigit():
            with self.lock:
                self.tasks.append(int(out.strip()))
            self.actions[f"submit:{kind}"] += 1
        else:
            first = (err.strip().splitlines() or ["?"])[0][:60]
            self.actions[f"submit:{kind} refused ({first})"] += 1

    def operate(self) -> None:
        r = self.op_rng
        if not self.tasks or r.random() < 0.35:
            self.submit()
            return
        with self.lock:
            task = r.choice(self.tasks)
        verb = r.choice(["pause", "resume", "cancel", "retry-failed", "reprioritize"])
        extra = [r.choice(["urgent", "normal", "bulk"])] if verb == "reprioritize" else []
        code, _, _ = self.cli("tasks", verb, str(task), *extra)
        self.actions[f"{verb}:{'ok' if code == 0 else 'refused'}"] += 1

    def operator(self) -> None:
        while not self.stop.wait(self.op_rng.uniform(0.3, 1.2)):
            try:
                if self.windows_due():
                    self.roll_windows()
                    self.actions["window rolled"] += 1
                self.operate()
            except Exception as exc:  # noqa: BLE001 - an outage makes commands fail; go on
                self.actions[f"error:{type(exc).__name__}"] += 1

    # ------------------------------------------------------------------------------ faults

    def fault(self) -> None:
        r = self.rng
        what = r.choice(["kill-master", "kill-child", "stop-master", "redis", "postgres",
                         "reconcile", "kill-master", "kill-child", "reply-lost", "reply-lost",
                         "redis-reset", "redis-stall", "db-stall", "db-reply-lost",
                         "redis-lost-data"])
        slot = r.randrange(len(self.nodes))
        node = self.nodes[slot]
        path = self.redis_proxies[slot]
        if what == "reply-lost":
            # The next replies of a verb on this node's path: the verb ran, the node cannot know
            verb = r.choice(sorted(VERB_MARKERS))
            path.drop_reply_to(VERB_MARKERS[verb], times=r.randint(1, 3))
            what = f"reply-lost:{verb}"
        elif what == "redis-reset":
            path.cut()
            time.sleep(r.uniform(0.1, 1.0))
            path.restore()
        elif what == "redis-stall":  # shorter than the socket timeout: a slow path, not a dead one
            path.freeze()
            time.sleep(r.uniform(0.3, 1.5))
            path.thaw()
        elif what == "db-stall":
            self.proxy.freeze()
            time.sleep(r.uniform(0.3, 2.0))
            self.proxy.thaw()
        elif what == "db-reply-lost":  # a recorder's commit ran and its reply never came
            self.proxy.drop_reply_to(b"COMMIT", times=r.randint(1, 2))
        elif what == "redis-lost-data":
            # Redis comes back empty (no AOF, a replaced server); the operator reconciles a
            # moment later while every node runs
            self.redis.kill()
            for path in self.redis.dir.iterdir():
                if path.name != "redis.log":
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
            self.redis.start()
            time.sleep(r.uniform(0.5, 2.0))
            self.reconcile()
        elif what == "kill-master":
            node.kill9()
            time.sleep(r.uniform(0.2, 1.5))
            self.replace(slot)
        elif what == "kill-child":
            children = [p for p in node.children() if alive(p)]
            if not children:
                return
            try:
                os.kill(children[0], signal.SIGKILL)
            except ProcessLookupError:
                return
        elif what == "stop-master":
            node.signal(signal.SIGSTOP)
            time.sleep(r.uniform(2.5, 4.5))  # past the 2 s lease
            node.signal(signal.SIGCONT)
        elif what == "redis":
            self.redis.kill()
            time.sleep(r.uniform(0.2, 1.0))
            self.redis.start()
        elif what == "postgres":
            self.proxy.cut()
            time.sleep(r.uniform(1.0, 3.0))
            self.proxy.restore()
        elif what == "reconcile":
            # While the recorders cannot reach the database they hold the entries they read
            # (jobs finished in Redis, not yet in SQL): reconcile, on a direct connection, must
            # not queue those jobs again.
            self.proxy.cut()
            time.sleep(r.uniform(1.0, 2.5))
            try:
                self.reconcile()
            finally:
                self.proxy.restore()
        self.faults[what] += 1

    def reconcile(self) -> None:
        """The operator's reconcile, on a direct connection, asking the live nodes first."""
        client = redis.Redis.from_url(self.redis.url, decode_responses=True)
        engine = sa.create_engine(self.db)
        try:
            reconcile(engine, Queue(client, KEYS, lease_ms=LEASE_MS), operator="nemesis")
        except Exception as exc:  # noqa: BLE001 - Redis may be restarting
            self.faults[f"reconcile failed:{type(exc).__name__}"] += 1
        finally:
            engine.dispose()
            client.close()

    def unended(self, engine: sa.Engine, client: redis.Redis) -> str:
        """What a failed settle shows: each job not ended, its SQL row, Redis hash and events."""
        lines = []
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT id, state, attempts, token, worker FROM jobs WHERE state NOT IN "
                "('succeeded', 'failed', 'lost', 'cancelled') ORDER BY id LIMIT 10")).all()
            for row in rows:
                evs = conn.execute(sa.text(
                    "SELECT id, kind, data FROM events WHERE job_id = :j ORDER BY id"),
                    {"j": row.id}).all()
                lines.append(f"{row}: redis {client.hgetall(KEYS.job(row.id))}")
                lines += [f"    {e.id} {e.kind} {str(e.data)[:160]}" for e in evs]
        return "\n".join(lines)

    def replace(self, slot: int) -> None:
        self.nodes[slot] = self.start_node(slot)
        self.all_nodes.append(self.nodes[slot])

    # --------------------------------------------------------------------------------- run

    def run(self, seconds: float) -> None:
        self.setup()
        self.nodes = [self.start_node(i) for i in range(3)]
        self.all_nodes = list(self.nodes)
        operator = threading.Thread(target=self.operator, name="operator", daemon=True)
        operator.start()
        started = time.monotonic()
        try:
            while time.monotonic() - started < seconds:
                time.sleep(self.rng.uniform(1.0, 3.0))
                self.fault()
                for slot, node in enumerate(self.nodes):  # a node that stopped on its own
                    if node.proc is not None and node.proc.poll() is not None:
                        self.faults["node exited by itself"] += 1
                        self.replace(slot)
            self.stop.set()
            operator.join(30)
            self.settle()
        finally:
            self.stop.set()
            for node in self.nodes:
                node.stop()
            self.proxy.close()
            for proxy in self.redis_proxies.values():
                proxy.close()

    def settle(self) -> None:
        """No more faults: resume what is paused, let everything end, cancel what cannot."""
        self.proxy.restore()
        self.proxy.thaw()
        for proxy in self.redis_proxies.values():
            proxy.restore()
            proxy.thaw()
        client = redis.Redis.from_url(self.redis.url, decode_responses=True)
        engine = sa.create_engine(self.db)
        try:
            reconcile(engine, Queue(client, KEYS, lease_ms=LEASE_MS), operator="nemesis")
            for task in self.tasks:
                self.cli("tasks", "resume", str(task))
            self.cli("schedules", "pause", "beat")

            def unfinished() -> list[int]:
                drain(client, engine)
                with engine.connect() as conn:
                    return list(conn.scalars(sa.text(
                        "SELECT DISTINCT task_id FROM jobs WHERE state NOT IN "
                        "('succeeded', 'failed', 'lost', 'cancelled')")))

            try:
                wait_until(lambda: not unfinished(), 45, "every job to end")
            except AssertionError:
                for task in unfinished():  # waiting for a window that has closed
                    self.cli("tasks", "cancel", str(task))
                    self.actions["cancel at the end"] += 1
                wait_until(lambda: not unfinished(), 45, "every job to end after the cancels",
                           lambda: self.unended(engine, client))
            for node in self.nodes:
                node.stop()
            drain(client, engine)
        finally:
            engine.dispose()
            client.close()


def run_nemesis(tmp_path: Path, db: str, seconds: float) -> None:
    seed = int(os.environ.get("FLEETSCHED_NEMESIS_SEED") or random.SystemRandom().randrange(10**6))
    print(f"nemesis seed {seed} (replay: FLEETSCHED_NEMESIS_SEED={seed})")
    upgrade(db)
    (tmp_path / "redis").mkdir()
    server = start_redis(tmp_path / "redis", appendonly=True, appendfsync="always")
    nemesis = Nemesis(tmp_path, server, db, seed, seconds)
    try:
        nemesis.run(seconds)
        client = redis.Redis.from_url(server.url, decode_responses=True)
        lost_replies = sum(p.dropped for p in nemesis.redis_proxies.values()) + nemesis.proxy.dropped
        print(f"faults: {dict(nemesis.faults)} (replies lost: {lost_replies})")
        print(f"operator: {dict(nemesis.actions)}")
        verdict = check(db, client, logs=nemesis.logs())
        assert sum(nemesis.faults.values()) >= seconds // 4, nemesis.faults
        assert verdict.counts["jobs"] > 0
        client.close()
    finally:
        server.kill()


@pytest.mark.timeout(900)
def test_nemesis_short_seed(tmp_path: Path, fresh_postgres_url: str) -> None:
    run_nemesis(tmp_path, fresh_postgres_url, float(os.environ.get("FLEETSCHED_NEMESIS_SECONDS")
                                                     or 30))


@pytest.mark.soak
@pytest.mark.timeout(int(os.environ.get("FLEETSCHED_SOAK_SECONDS") or 1200) + 900)
def test_nemesis_soak(tmp_path: Path, fresh_postgres_url: str) -> None:
    run_nemesis(tmp_path, fresh_postgres_url, float(os.environ.get("FLEETSCHED_SOAK_SECONDS")
                                                     or 1200))
