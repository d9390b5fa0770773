"""Worker logs never carry the password of the Redis (or database) URL: the node master's and
each child's log handler pass every record through ``scheduler.redact.UrlRedactingFilter``
(the children's also through the jobs' secrets ``RedactingFilter``). A real worker process on a
password-protected private redis-server, at debug level."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.servers import RedisServer, start_redis
from tests.worker_support import (
    ROOT,
    WorkerProcess,
    dump,
    final_outcomes,
    submit,
    wait_until,
    worker_args,
)

PASSWORD = "wk-s3cret-pw"


@pytest.fixture
def locked_redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = start_redis(tmp_path, password=PASSWORD)
    yield server
    server.kill()


def test_a_worker_on_a_password_protected_redis_logs_at_debug_without_the_password(
    locked_redis: RedisServer, tmp_path: Path,
) -> None:
    client = redis.Redis.from_url(locked_redis.url, decode_responses=True)
    # Given a job whose command quotes the fleet's Redis URL and its password (a health check
    # an operator might run), which the child logs at debug level before running it
    jobs = submit(client, "7", 1, params={"cmd": ["redis-cli", "-u", locked_redis.url,
                                                  "-a", PASSWORD, "ping"]})
    # When a worker configured with that URL runs it at debug level
    w = WorkerProcess(locked_redis.url, tmp_path / "w", worker_args("node-r"),
                      env={"FLEETSCHED_LOG_LEVEL": "debug"}).start()
    try:
        wait_until(lambda: final_outcomes(client, jobs)[jobs[0]] == "acked", 20, "the job acked",
                   lambda: w.tail() + dump(client), [w])
    finally:
        w.stop()
        client.close()
    log = w.log.read_text()
    # Then the command was logged, masked, and the password appears nowhere in the log
    command_lines = [line for line in log.splitlines() if ": command: redis-cli -u " in line]
    assert command_lines, w.tail()
    assert command_lines[0].endswith(
        f"command: redis-cli -u redis://:***@127.0.0.1:{locked_redis.port}/0 -a *** ping")
    assert PASSWORD not in log


def test_the_master_masks_a_library_record_quoting_the_database_url(tmp_path: Path) -> None:
    # Given the master's logging set up from settings with password-protected URLs
    script = textwrap.dedent("""
        import logging
        from scheduler.config import load_settings
        from scheduler.logs import configure_logging

        settings = load_settings({"redis_url": "redis://:rd-s3cret@127.0.0.1:1/0",
                                  "database_url": "postgresql+psycopg://u:db-s3cret@db/x",
                                  "log_level": "debug"}, environ={}, config_path=None)
        configure_logging(settings)
        # When libraries log the URLs and a bare password (as driver errors may)
        logging.getLogger("psycopg.pool").debug("connecting to %s", settings.database_url)
        logging.getLogger("redis").debug("lost %s", settings.redis_url)
        logging.getLogger("psycopg").warning("auth failed with password db-s3cret")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                          timeout=60)
    assert done.returncode == 0, done.stderr
    # Then every line was written, with the passwords masked
    lines = done.stderr.splitlines()
    assert len(lines) == 3, done.stderr
    assert "postgresql+psycopg://u:***@db/x" in lines[0]
    assert "redis://:***@127.0.0.1:1/0" in lines[1]
    assert "auth failed with password ***" in lines[2]
    assert "s3cret" not in done.stderr
