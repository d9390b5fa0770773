"""A deployment for the remote-mode tests: a real ``fleetsched server``, a redis-server of its
own, a SQLite record and a worker node on the simulate executor, with an admin token of
``tester`` (the direct mode's ``--as``) and a few tasks, a window and a schedule made; and the
checks those tests share (the one error line of a refusal, output normalised for what differs
run to run).

One deployment serves a whole test module (``deployment`` is module-scoped; ``pytestmark`` of
each module keeps its tests on one pytest-xdist process): starting a server, a worker node and
running a task took most of each test's time. So a test never changes what another relies on:
it makes objects of its own names (tasks, windows, hosts, tokens), and reads the record's
events of its own objects or those recorded since it began (``Deployment.mark``), never all
of them. Its Redis is its own because the session server's ``redis_url`` is flushed before
every other test."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import typer.main

from scheduler.queue.keys import Keys
from scheduler.record.recorder import backlog
from tests.cli_support import isolated_env, run_cli
from tests.server.conftest import HOSTS, Api, server_process
from tests.servers import start_redis, stop_process
from tests.submit_support import Cli, sql_rows

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

    def settled(self) -> None:
        """Wait until the worker's recorder has every event of the stream in the record (the
        tasks that earlier tests ran, the changes they made)."""
        client = redis.Redis.from_url(self.api.cli.redis_url)
        try:
            deadline = time.monotonic() + 20
            while backlog(client, Keys().events)[0]:
                assert time.monotonic() < deadline, "the recorder did not catch up"
                time.sleep(0.05)
        finally:
            client.close()

    def mark(self) -> frozenset[str]:
        """The ids of the events in the record now, once it has all of them: the events a
        test caused are the others (``since``)."""
        self.settled()
        return frozenset(r.id for r in sql_rows(self.api.database_url, "SELECT id FROM events"))

    def events_since(self, mark: frozenset[str], query: str, **params: object) -> list:
        """The rows of ``query`` (on the events table, selecting ``id``) not in ``mark``, in
        the query's order, once the record has every event."""
        self.settled()
        return [r for r in sql_rows(self.api.database_url, query, **params) if r.id not in mark]


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


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    tmp_path = tmp_path_factory.mktemp("deployment")
    redis_server = start_redis(tmp_path_factory.mktemp("deployment-redis"))
    redis_url, database_url = redis_server.url, f"sqlite:///{tmp_path / 'record.db'}"
    worker = None
    try:
        with built_once():
            # tests.server.conftest.serve_api's deployment, with the worker node started
            # before the server, so that the two start up together
            cli = Cli(tmp_path, redis_url, database_url)
            cli.ok("db", "upgrade")
            (tmp_path / "hosts.ini").write_text("[web]\n" + "\n".join(HOSTS) + "\n")
            cli.ok("hosts", "import", str(tmp_path / "hosts.ini"))
            worker = _worker(tmp_path, redis_url, database_url)
            with server_process(tmp_path, redis_url, database_url) as (base, proc):
                api = Api(base, cli, database_url, proc)
                token = api.token("remote-cli", "--role", "admin", "--owner", "tester")
                done = cli.submit("command", "-t", "group:web", "-p", "cmd=uptime", *SIMULATE,
                                  "--retries", "0", "--name", "ran")
                # two of five hosts fail: web-01 and web-02 by a failure rate of 1 on them
                assert cli("tasks", "wait", str(done))[0] == 0
                _recorded(cli, done)
                pending = cli.submit("command", "-t", "group:web", "-p", "cmd=true", *SIMULATE,
                                     "--in", "1h", "--name", "later")
                cli.ok("windows", "add", "sun-night", "--rrule",
                       "FREQ=WEEKLY;BYDAY=SU;BYHOUR=1", "--duration", "3h", "--tz",
                       "Europe/Berlin")
                cli.ok("windows", "assign", "sun-night", "--group", "web")
                cli.ok("schedules", "add", "nightly", "--cron", "0 3 * * *", "command", "-t",
                       "group:web", "-p", "cmd=uptime", *SIMULATE)
                server = api.base.removesuffix("/api/v1")
                yield Deployment(api, server, token, done, pending)
    finally:
        if worker is not None:
            stop_process(worker)
        redis_server.stop()


@contextmanager
def built_once() -> Iterator[None]:
    """Within this block, what each in-process CLI call (``main()``) would build again, the
    same each time, is built once and reused, as one ``fleetsched`` process builds it once:

    - the click command of a typer app: typer builds it anew at every call of the app
      (``typer.main.get_command``: about a quarter of a direct call's time); the apps are the
      same objects from call to call (``scheduler.cli.app.build`` is cached) and click makes
      a new context for each call. ``--help`` prints the same at any width either way.
    - the TLS context of remote mode's ``httpx.Client`` (``verify=True``): loading the CA
      bundle took half of a remote call's time. One context serves any number of clients.

    What is parsed, sent and run is unchanged."""
    import httpx._transports.default as transport

    get_command, ssl_context = typer.main.get_command, transport.create_ssl_context
    commands: dict[int, tuple[Any, Any]] = {}
    contexts: dict[tuple, Any] = {}

    def command_of(app: Any) -> Any:
        hit = commands.get(id(app))
        if hit is None or hit[0] is not app:
            hit = commands[id(app)] = (app, get_command(app))
        return hit[1]

    def context_of(verify: Any = True, cert: Any = None, trust_env: bool = True) -> Any:
        if verify is not True or cert is not None:
            return ssl_context(verify=verify, cert=cert, trust_env=trust_env)
        key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
        if key not in contexts:
            contexts[key] = ssl_context(verify=verify, cert=cert, trust_env=trust_env)
        return contexts[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(typer.main, "get_command", command_of)
        patch.setattr(transport, "create_ssl_context", context_of)
        yield


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
