"""What the HTTP API's tests share: ``fleetsched server`` as a real process (uvicorn on a
loopback port) on real Redis and a SQLite record with five hosts in group ``web``, driven over
HTTP with ``httpx`` (``Api``), beside a CLI on the same deployment, and a worker node on it
(``worker``) for the tests that run their tasks.

The record of ``api`` (and of ``shared_api``) is a copy of ``api_record``: one SQLite file that
the CLI migrated (``db upgrade``) and filled with the five hosts (``hosts import``) once per
test process, which is the record those two commands make in each test, less their second.

``shared_api(tmp, record)`` is a server for a whole module, on a redis-server of its own (so no
test's flush of the session's Redis reaches it); a module that shares one gives its tests names,
tokens and tasks of their own and judges what each wrote against what was there when it began.
``CLIENT_TLS`` is the one TLS context of the tests' HTTP clients: httpx would load the CA bundle
again for every request (30 ms each) without it."""

from __future__ import annotations

import itertools
import os
import sqlite3
import ssl
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.servers import RedisServer, free_port, start_redis, stop_process, wait_for_port
from tests.submit_support import Cli

__all__ = ["CLIENT_TLS", "HOSTS", "Api", "api", "api_record", "serve_api", "server_process",
           "shared_api", "worker", "worker_nodes"]

HOSTS = [f"web-{n:02}" for n in range(1, 6)]
CLIENT_TLS = ssl.create_default_context()


TOKEN_NAMES = itertools.count(1)


class Api:
    """A running ``fleetsched server``, its record and a CLI on the same deployment."""

    def __init__(self, base: str, cli: Cli, database_url: str,
                 process: subprocess.Popen[bytes] | None = None) -> None:
        self.base = base
        self.cli = cli
        self.database_url = database_url
        self.process = process  # the server's, to stop it

    def token(self, *args: str) -> str:
        return self.cli.ok("tokens", "create", *args, operator="admin-at-shell").strip()

    def token_named(self, name: str, *args: str) -> str:
        """A token of a name of its own (``name-N``): a server shared by a module holds many,
        and a live token's name is its creator's once."""
        return self.token(f"{name}-{next(TOKEN_NAMES)}", *args)

    def __call__(self, method: str, path: str, token: str | None = None,
                 headers: dict[str, str] | None = None, **kwargs: object) -> httpx.Response:
        sent = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token else {})}
        return httpx.request(method, f"{self.base}{path}", headers=sent, timeout=30,
                             verify=CLIENT_TLS, **kwargs)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def api_record(tmp_path_factory: pytest.TempPathFactory,
               redis_server: RedisServer | str) -> Path:
    """The record each ``api`` server starts from a copy of: ``fleetsched db upgrade`` and the
    five web hosts imported, through the CLI (which writes nothing to Redis)."""
    tmp = tmp_path_factory.mktemp("api-record")
    url = redis_server if isinstance(redis_server, str) else redis_server.url
    cli = Cli(tmp, url, f"sqlite:///{tmp / 'record.db'}")
    cli.ok("db", "upgrade")
    (tmp / "hosts.ini").write_text("[web]\n" + "\n".join(HOSTS) + "\n")
    cli.ok("hosts", "import", str(tmp / "hosts.ini"))
    return tmp / "record.db"


def copy_record(record: Path, tmp: Path) -> str:
    """A copy of the SQLite ``record`` as ``tmp/record.db`` (SQLite's backup: whole and
    consistent); its URL."""
    copy = tmp / "record.db"
    source, target = sqlite3.connect(record), sqlite3.connect(copy)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    return f"sqlite:///{copy}"


@pytest.fixture
def own_api(tmp_path: Path, redis_url: str, api_record: Path) -> Iterator[Api]:
    """A server of the test's own, on a copy of ``api_record``."""
    with serve_api(tmp_path, redis_url, copy_record(api_record, tmp_path),
                   ready=True) as served:
        yield served


@pytest.fixture
def api(own_api: Api) -> Api:
    """The test's server: its own here; a module that shares one overrides this."""
    return own_api


@contextmanager
def serve_api(tmp_path: Path, redis_url: str, database_url: str, *, ready: bool = False,
              env: dict[str, str] | None = None) -> Iterator[Api]:
    """A server on ``database_url``: empty (migrated here, the five hosts imported), or with
    ``ready`` a copy of ``api_record`` already; ``env``: settings of the server's own
    (``FLEETSCHED_...``)."""
    cli = Cli(tmp_path, redis_url, database_url)
    if not ready:
        cli.ok("db", "upgrade")
        (tmp_path / "hosts.ini").write_text("[web]\n" + "\n".join(HOSTS) + "\n")
        cli.ok("hosts", "import", str(tmp_path / "hosts.ini"))
    with server_process(tmp_path, redis_url, database_url, env) as (base, proc):
        yield Api(base, cli, database_url, proc)


@contextmanager
def shared_api(tmp: Path, record: Path, *, database_url: str | None = None,
               env: dict[str, str] | None = None) -> Iterator[Api]:
    """A server for a module (see the module docstring): on a copy of ``record`` in ``tmp``
    (or on ``database_url``, an empty database the CLI migrates and fills) and a redis-server
    of its own; ``env`` as ``serve_api``'s."""
    (tmp / "redis").mkdir()
    redis = start_redis(tmp / "redis")
    try:
        with (serve_api(tmp, redis.url, database_url, env=env) if database_url else
              serve_api(tmp, redis.url, copy_record(record, tmp), ready=True,
                        env=env)) as served:
            yield served
    finally:
        redis.stop()


@contextmanager
def server_process(tmp_path: Path, redis_url: str, database_url: str,
                   env: dict[str, str] | None = None,
                   ) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``fleetsched server`` on a deployment that exists, with ``env``'s settings beside the
    two URLs: (its API's base URL, the process); its log is ``server.log``."""
    port = free_port()
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    inherited |= {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_STATE_HOME": str(tmp_path),
                  **(env or {})}
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-P", "-m", "scheduler", "--redis-url", redis_url, "--database-url",
         database_url, "server", "--port", str(port)],
        cwd=tmp_path, env=inherited, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port("127.0.0.1", port, timeout=30)
        yield f"http://127.0.0.1:{port}/api/v1", proc
    finally:
        proc.terminate()
        proc.wait(timeout=15)
        log.close()


@pytest.fixture
def worker(api: Api, tmp_path: Path, redis_url: str) -> Iterator[Callable[[], None]]:
    """``start()`` starts a worker node on the API's deployment; it is stopped afterwards."""
    with worker_nodes(tmp_path, redis_url, api.database_url) as start:
        yield start


@contextmanager
def worker_nodes(tmp_path: Path, redis_url: str,
                 database_url: str) -> Iterator[Callable[[], None]]:
    """``start()`` starts a worker node (4 slots, its recorder and wave controller) on the
    deployment; every node started is stopped on leaving. Its log is ``worker.log``."""
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
        env |= {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_STATE_HOME": str(tmp_path)}
        with (tmp_path / "worker.log").open("wb") as log:
            procs.append(subprocess.Popen(
                [sys.executable, "-P", "-m", "scheduler", "--redis-url", redis_url,
                 "--database-url", database_url, "worker", "--slots", "4", "--processes",
                 "1", "--grace", "2s"], cwd=tmp_path, env=env, stdout=log,
                stderr=subprocess.STDOUT))

    try:
        yield start
    finally:
        for proc in procs:
            stop_process(proc)
