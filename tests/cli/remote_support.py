"""A deployment for the remote-mode tests: a real ``fleetsched server``, redis-server, a SQLite
record and a worker node on the simulate executor, with an admin token of ``tester`` (the direct
mode's ``--as``) and a few tasks, a window and a schedule made; and the checks those tests
share (the one error line of a refusal, output normalised for what differs run to run)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli_support import isolated_env, run_cli
from tests.server.conftest import Api, serve_api
from tests.servers import stop_process
from tests.submit_support import Cli

SIMULATE = ["--executor", "simulate", "--executor-option", "duration_ms=0"]
# The commands that only read: their output is compared between the modes.
READING = {("status",), ("tasks", "list"), ("tasks", "show"), ("tasks", "output"),
           ("tasks", "wait"), ("jobs", "show"), ("hosts", "list"), ("hosts", "show"),
           ("hosts", "history"), ("groups", "list"), ("windows", "list"), ("windows", "show"),
           ("schedules", "list"), ("schedules", "show"), ("report",)}


@dataclass
class Deployment:
    """The server, a token of ``tester`` (the direct mode's ``--as``), and the tasks made."""

    api: Api
    server: str
    token: str
    done: int  # a task that ran on the worker: 3 hosts succeeded, 2 failed
    pending: int  # a task waiting an hour, for the controls

    def direct(self, *args: str) -> tuple[int, str, str]:
        return self.api.cli(*args, operator="tester")

    def remote(self, *args: str, token: str | None = None,
               server: str | None = None) -> tuple[int, str, str]:
        env = isolated_env(Path(self.api.cli.env["XDG_STATE_HOME"] or "/nonexistent"),
                           FLEETSCHED_TOKEN=token or self.token)
        return run_cli(["--server", server or self.server, *args], env=env)


def _worker(tmp_path: Path, redis_url: str, database_url: str) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env |= {"XDG_CONFIG_HOME": str(tmp_path / "config"), "XDG_STATE_HOME": str(tmp_path)}
    with (tmp_path / "worker.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-P", "-m", "scheduler", "--redis-url", redis_url,
             "--database-url", database_url, "worker", "--slots", "4", "--processes", "1",
             "--grace", "2s"], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)


def _recorded(cli: Cli, task_id: int) -> None:
    """Wait until the record has the task's end (the views that read the record agree)."""
    deadline = time.monotonic() + 20
    while f"\n{task_id} " not in cli.ok("tasks", "list", "--state", "succeeded"):
        assert time.monotonic() < deadline, "the recorder did not record the task's end"
        time.sleep(0.2)


@pytest.fixture
def deployment(tmp_path: Path, redis_url: str) -> Iterator[Deployment]:
    with serve_api(tmp_path, redis_url, f"sqlite:///{tmp_path / 'record.db'}") as api:
        token = api.token("remote-cli", "--role", "admin", "--owner", "tester")
        worker = _worker(tmp_path, redis_url, api.database_url)
        try:
            cli = api.cli
            done = cli.submit("command", "-t", "group:web", "-p", "cmd=uptime", *SIMULATE,
                              "--retries", "0", "--name", "ran")
            # two of five hosts fail: web-01 and web-02 by a failure rate of 1 on them
            assert cli("tasks", "wait", str(done))[0] == 0
            _recorded(cli, done)
            pending = cli.submit("command", "-t", "group:web", "-p", "cmd=true", *SIMULATE,
                                 "--in", "1h", "--name", "later")
            cli.ok("windows", "add", "sun-night", "--rrule", "FREQ=WEEKLY;BYDAY=SU;BYHOUR=1",
                   "--duration", "3h", "--tz", "Europe/Berlin")
            cli.ok("windows", "assign", "sun-night", "--group", "web")
            cli.ok("schedules", "add", "nightly", "--cron", "0 3 * * *", "command", "-t",
                   "group:web", "-p", "cmd=uptime", *SIMULATE)
            server = api.base.removesuffix("/api/v1")
            yield Deployment(api, server, token, done, pending)
        finally:
            stop_process(worker)


def normalised(text: str) -> str:
    # The report says when it was made, each run its own, and from when a relative --since
    # (24h) counted, which a second may separate; the recorder trims its stream between the
    # two runs of `status`.
    return re.sub(r'"generated_at":"[^"]+"|generated\s+\S+ \S+|"stream_length": \d+'
                  r'|since=\d{4}-\d\d-\d\d[ T][\d:.]+', "~", text)


def one_line(err: str) -> str:
    """The error line of a refusal (its hint may follow); fails unless it is one line."""
    lines = err.strip().splitlines()
    assert lines and lines[0].startswith("error: "), err
    assert all(line.startswith("hint: ") for line in lines[1:]), err
    return lines[0]
