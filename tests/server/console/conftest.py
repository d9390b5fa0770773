"""What the web console's tests share: a real ``fleetsched server`` and ``Browsing``, an HTTP
client signed in to the console with a token of a given role, as a browser is (the session
cookie and its CSRF token, forms posted as forms). The browser tests drive a real Chromium
instead (``tests/server/console/browser.py``).

The ``console`` fixture is one server per test module (``shared_console``): starting one
costs seconds on a loaded machine, and the console's tests mostly read pages. Its tests
therefore use names, tenants and tokens of their own, and judge what they wrote against what
was there when they began, never an empty world. A test that needs a server of its own (one it
kills, reconfigures, or whose whole record it lists) is marked ``own_server``; with
``heartbeat_ms`` that server's live streams send a heartbeat and check their session that often
(the setting ``server_stream_heartbeat_ms``) instead of every 15 s.

Every server here runs on a redis-server of its own (so no other test's flush of the session's
Redis reaches a server that outlives a test) and on a copy of ``api_record``, the SQLite record
with the five hosts of group ``web`` that the API's tests start from
(``tests/server/conftest.py``)."""

from __future__ import annotations

import itertools
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.server.conftest import Api, copy_record
from tests.servers import free_port, start_redis
from tests.submit_support import Cli

__all__ = ["Browsing", "Console", "console", "serve_console", "shared_console", "sign_in"]

# A number for each token's name: a live token's name is its creator's once, and the tests of
# a module create theirs on one server.
NAMES = itertools.count(1)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "own_server(heartbeat_ms=None): the test's ``console`` is a server of "
        "its own, not its module's (tests/server/console/conftest.py)")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``-n``, the tests of a module that share its server run on one process: one
    server per module, not one per process that draws some of its tests."""
    here = Path(__file__).parent
    for item in items:
        if (item.path.parent == here and "console" in getattr(item, "fixturenames", ())
                and item.get_closest_marker("own_server") is None):
            item.add_marker(pytest.mark.xdist_group(f"console-{item.path.stem}"))


class Browsing:
    """An HTTP client signed in to the console of ``root`` (``http://127.0.0.1:PORT``)."""

    def __init__(self, root: str, client: httpx.Client) -> None:
        self.root = root
        self.client = client

    @property
    def csrf(self) -> str:
        return self.client.cookies.get("fleetsched_csrf") or ""

    def get(self, path: str, **kwargs: object) -> httpx.Response:
        return self.client.get(f"{self.root}{path}", **kwargs)  # type: ignore[arg-type]

    def post(self, path: str, data: dict[str, str] | None = None, *, csrf: bool = True,
             **kwargs: object) -> httpx.Response:
        """Post ``data`` as a form, with the session's CSRF token unless ``csrf`` is False."""
        fields = {**({"csrf_token": self.csrf} if csrf else {}), **(data or {})}
        return self.client.post(f"{self.root}{path}", data=fields,  # type: ignore[arg-type]
                                **kwargs)


def sign_in(root: str, token: str) -> Browsing:
    """A new client signed in with ``token`` through the sign-in form."""
    client = httpx.Client(timeout=30, follow_redirects=False)
    page = client.get(f"{root}/ui/login")
    check = re.search(r'name="check" value="([^"]+)"', page.text)
    assert check, page.text[:500]
    reply = client.post(f"{root}/ui/login", data={"check": check.group(1), "next": "/ui/",
                                                   "token": token})
    assert reply.status_code == 303, reply.text[:500]
    return Browsing(root, client)


class Console:
    """A running server (``api``, its log ``log``) and a way to sign in with a token of any
    role, for one test: the clients it signs in are closed after it."""

    def __init__(self, api: Api, log: Path) -> None:
        self.api = api
        self.root = api.base.removesuffix("/api/v1")
        self.log = log
        self.log_from = log.stat().st_size if log.exists() else 0
        self.clients: list[httpx.Client] = []

    @property
    def redis_url(self) -> str:
        """The server's own Redis (a worker node or a CLI of the test's joins it there)."""
        return self.api.cli.redis_url

    def server_log(self) -> str:
        """What the server logged since this test began."""
        with self.log.open("rb") as log:
            log.seek(self.log_from)
            return log.read().decode(errors="replace")

    def token(self, name: str, *args: str) -> str:
        """A new token named ``name`` and a number (``fleetsched tokens create``'s ARGS)."""
        return self.api.token(f"{name}-{next(NAMES)}", *args)

    def as_role(self, role: str, *, tenant: str | None = None, owner: str | None = None,
                name: str | None = None) -> Browsing:
        args = ["--role", role]
        args += ["--tenant", tenant] if tenant else []
        args += ["--owner", owner] if owner else []
        return self.signed(self.token(name or f"{role}-{tenant or 'team'}", *args))

    def signed(self, token: str) -> Browsing:
        """A client signed in with ``token``, closed with the fixture."""
        browsing = sign_in(self.root, token)
        self.clients.append(browsing.client)
        return browsing

    def close(self) -> None:
        for client in self.clients:
            client.close()
        self.clients.clear()


@contextmanager
def serve_console(tmp: Path, record: Path, *,
                  heartbeat_ms: int | None = None) -> Iterator[tuple[Api, Path]]:
    """A server in ``tmp`` on a copy of ``record`` and a redis-server of its own: the server
    and its log."""
    database_url = copy_record(record, tmp)
    (tmp / "redis").mkdir()
    redis = start_redis(tmp / "redis")
    env: dict[str, str] = {}
    if heartbeat_ms is not None:
        env["FLEETSCHED_SERVER_STREAM_HEARTBEAT_MS"] = str(heartbeat_ms)
    try:
        with _server_process(tmp, redis.url, database_url, env) as (base, proc):
            yield Api(base, Cli(tmp, redis.url, database_url), database_url, proc), \
                tmp / "server.log"
    finally:
        redis.stop()


@contextmanager
def _server_process(tmp: Path, redis_url: str, database_url: str,
                    env: dict[str, str]) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``fleetsched server`` as ``tests.server.conftest.server_process`` starts it, but one
    that exits before it listens fails at once with its log, or starts again on another port
    if its own was taken meanwhile (``free_port``'s port is free when asked, not when the
    server binds it, seconds later on a loaded machine: a failed start of a module's server
    fails each of its tests)."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    inherited |= {"XDG_CONFIG_HOME": str(tmp / "config"), "XDG_STATE_HOME": str(tmp), **env}
    for attempt in range(1, 4):
        port = free_port()
        with (tmp / "server.log").open("w") as log:
            proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "scheduler", "--redis-url", redis_url,
                 "--database-url", database_url, "server", "--port", str(port)],
                cwd=tmp, env=inherited, stdout=log, stderr=subprocess.STDOUT)
        if _answers(proc, port, tmp / "server.log", timeout=90):
            break
        said = (tmp / "server.log").read_text(errors="replace")
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            raise TimeoutError(f"the server did not listen on {port} in 90 s:\n{said[-3000:]}")
        if "address already in use" not in said or attempt == 3:
            raise RuntimeError(f"the server exited ({proc.returncode}):\n{said[-3000:]}")
    try:
        yield f"http://127.0.0.1:{port}/api/v1", proc
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def _answers(proc: subprocess.Popen[bytes], port: int, log: Path, timeout: float) -> bool:
    """Whether ``proc`` answers on ``port`` before it exits or ``timeout`` passes: a request
    for a page of a name of its own is in ``proc``'s log (not another process's, which took
    the port)."""
    probe = f"/ui/probe-{uuid.uuid4().hex}"
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                pass
            httpx.get(f"http://127.0.0.1:{port}{probe}", timeout=2)
        except (OSError, httpx.HTTPError):
            time.sleep(0.02)
            continue
        logged = time.monotonic() + 5
        while time.monotonic() < logged:
            if probe in log.read_text(errors="replace"):
                return True
            time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def shared_console(tmp_path_factory: pytest.TempPathFactory,
                   api_record: Path) -> Iterator[tuple[Api, Path]]:
    """The module's server and its log (see the module docstring)."""
    tmp = tmp_path_factory.mktemp("console")
    with serve_console(tmp, api_record) as served:
        yield served


@pytest.fixture
def console(request: pytest.FixtureRequest, tmp_path: Path,
            api_record: Path) -> Iterator[Console]:
    """The console of a server on a SQLite record with five hosts in group ``web``: the
    module's, or the test's own if it is marked ``own_server``."""
    own = request.node.get_closest_marker("own_server")
    with (serve_console(tmp_path, api_record, **own.kwargs) if own
          else _module_server(request)) as served:
        made = Console(*served)
        try:
            yield made
        finally:
            made.close()


@contextmanager
def _module_server(request: pytest.FixtureRequest) -> Iterator[tuple[Api, Path]]:
    yield request.getfixturevalue("shared_console")


# The browser tests' fixtures (a Chromium per module, a page per test), for every module here.
from tests.server.console.browser import browser_page, chromium, worker_node  # noqa: F401
