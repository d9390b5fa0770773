"""What the HTTP API's tests share: ``fleetsched server`` as a real process (uvicorn on a
loopback port) on real Redis and a SQLite record with five hosts in group ``web``, driven over
HTTP with ``httpx`` (``Api``), beside a CLI on the same deployment, and a worker node on it
(``worker``) for the tests that run their tasks."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.servers import free_port, stop_process, wait_for_port
from tests.submit_support import Cli

__all__ = ["HOSTS", "Api", "api", "serve_api", "server_process", "worker", "worker_nodes"]

HOSTS = [f"web-{n:02}" for n in range(1, 6)]


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

    def __call__(self, method: str, path: str, token: str | None = None,
                 headers: dict[str, str] | None = None, **kwargs: object) -> httpx.Response:
        sent = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token else {})}
        return httpx.request(method, f"{self.base}{path}", headers=sent, timeout=30,
                             **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def api(tmp_path: Path, redis_url: str) -> Iterator[Api]:
    with serve_api(tmp_path, redis_url, f"sqlite:///{tmp_path / 'record.db'}") as served:
        yield served


@contextmanager
def serve_api(tmp_path: Path, redis_url: str, database_url: str) -> Iterator[Api]:
    """A server on ``database_url`` (empty: migrated here, the five hosts imported)."""
    cli = Cli(tmp_path, redis_url, database_url)
    cli.ok("db", "upgrade")
    (tmp_path / "hosts.ini").write_text("[web]\n" + "\n".join(HOSTS) + "\n")
    cli.ok("hosts", "import", str(tmp_path / "hosts.ini"))
    with server_process(tmp_path, redis_url, database_url) as (base, proc):
        yield Api(base, cli, database_url, proc)


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
