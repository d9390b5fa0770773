"""A node never stays half alive: per-job refusals are codes, not errors; a permanent Redis
refusal stops the node with one clear line; transient trouble is retried.

Regressions of issue 12 (1 and 11): a two-job extend/ack/release whose first job was refused
replied ``[-2, 0]``, which was read as an error ``{code, message}`` and killed the heartbeat
thread; a worker whose Redis user may not run scripts retried its claim forever."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis
from redis._parsers.base import BaseParser

from scheduler.errors import Code
from scheduler.queue.client import JobResult, Queue
from scheduler.redisdb.connect import is_permanent
from tests.queue_support import make_task
from tests.worker_support import WorkerProcess, wait_until, worker_args


def test_a_batch_whose_first_job_is_refused_returns_codes_for_every_verb(queue: Queue) -> None:
    make_task(queue, "t", 2)
    jobs = queue.claim("w", 2).jobs
    (a, ta), (b, tb) = [(j.job_id, j.token) for j in jobs]
    # Given the first job is no longer this worker's (claimed again: its token moved)
    queue.client.hincrby(queue.keys.job(a), "token", 1)
    # Then each verb answers per job instead of raising
    assert queue.extend("w", [(a, ta), (b, tb)]) == [Code.STALE_TOKEN, Code.OK]
    assert queue.release("w", [(a, ta), (b, tb)]) == [Code.STALE_TOKEN, Code.OK]
    [again] = queue.claim("w", 2).jobs
    assert again.job_id == b
    assert queue.ack("w", [("t.9", 1, JobResult(0)), (b, again.token, JobResult(0))]) == [
        Code.UNKNOWN_JOB, Code.OK]


@pytest.mark.parametrize(("exc", "permanent"), [
    (redis.exceptions.NoPermissionError("NOPERM no permissions to run 'evalsha'"), True),
    (redis.exceptions.AuthenticationError("invalid username-password pair"), True),
    (redis.ResponseError("ERR Error running script: attempt to compare nil"), True),
    (redis.ConnectionError("Connection refused"), False),
    (redis.TimeoutError("Timeout reading from socket"), False),
    (redis.exceptions.BusyLoadingError("LOADING Redis is loading the dataset in memory"), False),
    (redis.exceptions.ReadOnlyError("READONLY You can't write against a replica."), False),
    (redis.ResponseError("OOM command not allowed when used memory > 'maxmemory'."), False),
    # as redis-py's parser makes them from the server's replies (it drops the code)
    *((BaseParser.parse_error(reply), False) for reply in (
        "READONLY You can't write against a read only replica.",
        "CLUSTERDOWN The cluster is down", "MASTERDOWN Link with MASTER is down",
        "TRYAGAIN Multiple keys request during rehashing of slot",
        "OOM command not allowed when used memory > 'maxmemory'.")),
    (BaseParser.parse_error("NOPERM this user has no permissions to run the 'evalsha' "
                            "command"), True),
])
def test_permanent_and_transient_redis_errors_are_told_apart(exc: Exception,
                                                             permanent: bool) -> None:
    assert is_permanent(exc) is permanent


def test_a_worker_whose_redis_user_may_not_run_scripts_stops_with_one_clear_line(
        private_redis, tmp_path) -> None:
    admin = redis.Redis.from_url(private_redis.url)
    admin.execute_command("ACL", "SETUSER", "noscripts", "on", ">pw", "~*", "&*", "+@all",
                          "-@scripting")
    url = private_redis.url.replace("redis://", "redis://noscripts:pw@")
    w = WorkerProcess(url, tmp_path, worker_args("node-a", slots=2, processes=1)).start()
    started = time.monotonic()
    try:
        rc = w.wait(30)
    finally:
        w.stop()
    log = w.log.read_text()
    errors = [line for line in log.splitlines() if line.startswith("error:")]
    assert rc == 1, log
    assert len(errors) == 1 and "no permissions to run" in errors[0], log
    assert ":pw@" not in log
    assert log.count("claim failed") == 0, log
    assert time.monotonic() - started < 30
    admin.close()


def test_the_cli_entry_point_exists() -> None:
    # python -m scheduler is the CLI (the demo and the tests start workers with it)
    out = subprocess.run([sys.executable, "-P", "-m", "scheduler", "version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip()


def _recorder_processes(w: WorkerProcess) -> list[int]:
    found = []
    for pid in w.children():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if b"workers.recorder_process" in cmdline:
            found.append(pid)
    return found


def test_a_node_whose_recorder_process_dies_stops_with_one_clear_line(private_redis,
                                                                       tmp_path) -> None:
    # Given a node started with its recorder (the default: a process beside the master)
    args = [a for a in worker_args("node-r", slots=2, processes=1) if a != "--no-recorder"]
    w = WorkerProcess(private_redis.url, tmp_path, args).start()
    try:
        w.wait_registered(redis.Redis.from_url(private_redis.url), timeout=30)
        # (it starts once the node can claim, a moment after the node registers)
        wait_until(lambda: _recorder_processes(w), 15, "the recorder process to start", w.tail)
        [recorder] = _recorder_processes(w)
        # When that process dies under it
        os.kill(recorder, signal.SIGKILL)
        rc = w.wait(30)
    finally:
        w.stop()
    # Then the node does not go on unrecorded: it stops, saying why, in one line
    log = w.log.read_text()
    errors = [line for line in log.splitlines() if line.startswith("error:")]
    assert rc == 1, log
    assert len(errors) == 1 and "the recorder process" in errors[0], log
