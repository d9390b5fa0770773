"""``GET /api/v1/tasks/{id}/output/stream`` on a real ``fleetsched server`` with a real worker
node (``local`` executor: the commands run on the node and print as they go): a task's lines
as Server-Sent Events while its jobs run, and the remote CLI's ``tasks output --follow``
through it; a customer follows only its own hosts' lines, only where the task shows output to
customers, and another customer's task is not found.

The tests share one server and one worker node (the module's): each submits tasks of its own
and makes tokens of its own names."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from scheduler.server.output_stream import REVOKED
from tests.cli_support import isolated_env, run_cli
from tests.server.conftest import CLIENT_TLS, Api, shared_api, worker_nodes
from tests.tenants_support import ACME_AND_GLOBEX

pytestmark = pytest.mark.xdist_group("server-output-stream")  # under -n: one process

EVERYONE = "acme-01,globex-01,web-01"
HEARTBEAT_S = 1.0  # server_stream_heartbeat_ms of the module's server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, api_record: Path) -> Iterator[Api]:
    tmp = tmp_path_factory.mktemp("output-stream")
    heartbeat = {"FLEETSCHED_SERVER_STREAM_HEARTBEAT_MS": str(int(HEARTBEAT_S * 1000))}
    with shared_api(tmp, api_record, env=heartbeat) as api:
        (tmp / "customers.ini").write_text(ACME_AND_GLOBEX)
        api.cli.ok("hosts", "import", str(tmp / "customers.ini"))
        with worker_nodes(tmp, api.cli.redis_url, api.database_url) as start:
            start()
            yield api


def _submit(api: Api, token: str, target: str, script: str, **more: Any) -> int:
    reply = api("POST", "/tasks", token, json={
        "action": "command", "target": target, "executor": "local", "retries": 0,
        "params": {"cmd": ["sh", "-c", script, "sh", "{host.name}"]}, **more})
    assert reply.status_code == 201, reply.text
    task_id: int = reply.json()["task_id"]
    return task_id


class Stream:
    """One follower's events, read in a thread; ``lines`` as ``host | line``."""

    def __init__(self, api: Api, token: str, task_id: int, **params: str) -> None:
        self.events: list[tuple[str, Any]] = []
        self.got_line = threading.Event()
        self.done = threading.Event()
        self.status: int | None = None
        self.thread = threading.Thread(target=self._read, args=(api, token, task_id, params),
                                       daemon=True)
        self.thread.start()

    def _read(self, api: Api, token: str, task_id: int, params: dict[str, str]) -> None:
        try:
            with httpx.stream("GET", f"{api.base}/tasks/{task_id}/output/stream",
                              headers={"Authorization": f"Bearer {token}"}, params=params,
                              timeout=60, verify=CLIENT_TLS) as reply:
                self.status = reply.status_code
                if reply.status_code != 200:
                    reply.read()
                    self.events.append(("error", reply.json()))
                    return
                name = None
                for line in reply.iter_lines():
                    if line.startswith("event: "):
                        name = line[7:]
                    elif line.startswith("data: ") and name is not None:
                        self.events.append((name, json.loads(line[6:])))
                        if name == "line":
                            self.got_line.set()
                        if name == "end":
                            return
        finally:
            self.done.set()

    @property
    def lines(self) -> list[str]:
        return [f"{d['host']} | {'[stderr] ' if d['stream'] == 'err' else ''}{d['line']}"
                for name, d in self.events if name == "line"]

    def end(self) -> dict[str, Any]:
        assert self.done.wait(60), self.events
        assert self.events and self.events[-1][0] == "end", self.events
        return self.events[-1][1]


def test_a_follower_gets_each_hosts_lines_while_the_jobs_run_and_the_remote_cli_too(
        served: Api, tmp_path: Path) -> None:
    api = served
    viewer = api.token_named("viewer", "--role", "viewer")
    release = tmp_path / "release"
    script = (f'echo "one on $1"; while [ ! -e {release} ]; do sleep 0.1; done; '
              f'echo "two on $1" >&2')
    task = _submit(api, api.token_named("op", "--role", "operator"), "web-01,web-02", script)
    # When a viewer follows the task while its jobs wait for the release file
    stream = Stream(api, viewer, task)
    assert stream.got_line.wait(60), stream.events
    # Then the first lines came before any job could end
    assert not release.exists()
    # And the remote CLI follows one host through the server, from the stream's start
    env = isolated_env(Path(api.cli.env["XDG_STATE_HOME"] or "/nonexistent"),
                       FLEETSCHED_TOKEN=viewer)
    remote: dict[str, Any] = {}
    cli = threading.Thread(target=lambda: remote.update(result=run_cli(
        ["--server", api.base.removesuffix("/api/v1"), "tasks", "output", str(task),
         "--follow", "--host", "web-02"], env=env)), daemon=True)
    cli.start()
    release.write_text("")
    end = stream.end()
    assert end["exit_code"] == 0 and end["task_id"] == task
    assert sorted(stream.lines) == ["web-01 | [stderr] two on web-01", "web-01 | one on web-01",
                                    "web-02 | [stderr] two on web-02", "web-02 | one on web-02"]
    cli.join(60)
    code, out, err = remote["result"]
    assert code == 0, err
    assert out.splitlines() == ["web-02 | one on web-02", "web-02 | [stderr] two on web-02"]


def test_a_customer_follows_its_own_hosts_lines_only_where_the_task_shows_output(
        served: Api) -> None:
    api = served
    operator = api.token_named("op", "--role", "operator")
    acme = api.token_named("acme", "--role", "customer-viewer", "--tenant", "acme")
    globex = api.token_named("globex", "--role", "customer-viewer", "--tenant", "globex")
    shown = _submit(api, operator, EVERYONE, 'echo "hi from $1"', customer_output=True)
    hidden = _submit(api, operator, EVERYONE, 'echo "hi from $1"')
    only_acme = _submit(api, operator, "acme-01", 'echo "hi from $1"', customer_output=True)
    # A customer of acme follows its own host's lines of a task that shows them
    stream = Stream(api, acme, shown)
    assert stream.end()["exit_code"] == 0
    assert stream.lines == ["acme-01 | hi from acme-01"]
    # ... none of a task that does not (a note says so), and the end counts its own jobs
    stream = Stream(api, acme, hidden)
    end = stream.end()
    assert stream.lines == [] and end["exit_code"] == 0
    assert any(name == "note" and "not shown to customers" in d["text"]
               for name, d in stream.events)
    # ... and another customer's task, or host, is not found (as if it did not exist)
    stream = Stream(api, globex, only_acme)
    assert stream.done.wait(30) and stream.status == 404, stream.events
    stream = Stream(api, acme, shown, host="globex-01")
    assert stream.done.wait(30) and stream.status == 404, stream.events
    # And the team sees every host's lines
    stream = Stream(api, api.token_named("viewer", "--role", "viewer"), shown)
    stream.end()
    assert sorted(stream.lines) == ["acme-01 | hi from acme-01", "globex-01 | hi from globex-01",
                                    "web-01 | hi from web-01"]


def _first_event_s(api: Api, token: str, path: str, first: str = "event: ") -> float:
    """Seconds from asking for an event stream to its first line starting with ``first``."""
    started = time.monotonic()
    with httpx.stream("GET", f"{api.base}{path}", headers={"Authorization": f"Bearer {token}"},
                      timeout=90, verify=CLIENT_TLS) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if line and line.startswith(first):
                return time.monotonic() - started
    raise AssertionError(f"{path} ended without an event")


def _token_id(api: Api, name_prefix: str) -> int:
    rows = json.loads(api.cli.ok("tokens", "list", "-o", "json"))
    return max(row["id"] for row in rows if row["name"].startswith(name_prefix))


def test_output_followers_never_hold_up_the_other_streams_and_a_token_holds_few(
        served: Api, tmp_path: Path) -> None:
    api = served
    operator = api.token_named("op", "--role", "operator")
    release = tmp_path / "release"
    task = _submit(api, operator, "web-01", f"while [ ! -e {release} ]; do sleep 0.1; done")
    viewers = [api.token_named("viewer", "--role", "viewer") for _ in range(4)]
    # When four viewers follow a quiet task's output 8 times each (the most each may: the
    # default of server_output_streams_per_principal)
    followers = [Stream(api, viewers[i % 4], task) for i in range(32)]
    try:
        deadline = time.monotonic() + 60
        while any(f.status is None for f in followers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(f.status == 200 for f in followers), [f.status for f in followers]
        # Then a new follower of the task's events gets its first event at once
        events_s = _first_event_s(api, operator, f"/tasks/{task}/events")
        # ... and so does a new follower of its output (of a principal of its own)
        output_s = _first_event_s(api, operator, f"/tasks/{task}/output/stream", "")
        print(f"32 output followers open: first /events event {events_s:.3f} s, "
              f"a new output stream's first line {output_s:.3f} s")
        assert events_s < 3.0 and output_s < 3.0, (events_s, output_s)
        # And a ninth output stream of one token is refused in one line until one ends
        refused = api("GET", f"/tasks/{task}/output/stream", viewers[0])
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["message"] == ("this token already follows 8 output streams, the most one "
                                    "principal may hold open at once")
        assert "server_output_streams_per_principal" in error["hint"]
    finally:
        release.write_text("")
    for follower in followers:
        assert follower.end()["exit_code"] == 0
    # And once they ended, the token follows again
    assert Stream(api, viewers[0], task).end()["exit_code"] == 0


def test_a_revoked_token_stops_receiving_lines_within_a_heartbeat(
        served: Api, tmp_path: Path) -> None:
    api = served
    operator = api.token_named("op", "--role", "operator")
    release = tmp_path / "release"
    script = f"while [ ! -e {release} ]; do echo tick; sleep 0.1; done"
    task = _submit(api, operator, "web-01", script)
    viewer = api.token_named("leaving", "--role", "viewer")
    stream = Stream(api, viewer, task)
    env = isolated_env(Path(api.cli.env["XDG_STATE_HOME"] or "/nonexistent"),
                       FLEETSCHED_TOKEN=viewer)
    remote: dict[str, Any] = {}
    cli = threading.Thread(target=lambda: remote.update(result=run_cli(
        ["--server", api.base.removesuffix("/api/v1"), "tasks", "output", str(task),
         "--follow"], env=env)), daemon=True)
    try:
        assert stream.got_line.wait(60), stream.events
        cli.start()
        time.sleep(2.0)  # the CLI starts and opens its stream
        # When the token is revoked while its stream receives lines
        api.cli.ok("tokens", "revoke", str(_token_id(api, "leaving-")),
                   operator="admin-at-shell")
        revoked = time.monotonic()
        # Then the stream ends within a heartbeat (and a read), with an error event
        assert stream.done.wait(HEARTBEAT_S + 2.0), stream.events[-3:]
        assert time.monotonic() - revoked < HEARTBEAT_S + 2.0
        name, data = stream.events[-1]
        assert name == "error" and "no longer good" in data["message"], stream.events[-1]
        # And the remote CLI following with it says so in one line (and its hint), exit 1
        cli.join(HEARTBEAT_S + 5.0)
        assert not cli.is_alive()
        code, out, err = remote["result"]
        assert code == 1 and out.startswith("web-01 | tick"), (code, out[:200], err)
        assert err.splitlines() == [f"error: {REVOKED['message']}", f"hint: {REVOKED['hint']}"]
    finally:
        release.write_text("")


def test_the_remote_follow_gives_up_after_its_timeout_as_wait_does(served: Api) -> None:
    api = served
    operator = api.token_named("op", "--role", "operator")
    task = _submit(api, operator, "web-01", "true", **{"in": "1h"})  # nothing ends it soon
    env = isolated_env(Path(api.cli.env["XDG_STATE_HOME"] or "/nonexistent"),
                       FLEETSCHED_TOKEN=operator)
    server = ["--server", api.base.removesuffix("/api/v1")]
    started = time.monotonic()
    code, out, err = run_cli([*server, "tasks", "output", str(task), "--follow",
                              "--timeout", "2s"], env=env)
    assert code == 1 and out == "", err
    assert err.splitlines() == [f"error: task {task} not finished after 2s: 1 job waiting",
                                f"hint: follow again, or wait: fleetsched tasks wait {task}"]
    assert 2.0 <= time.monotonic() - started < 15.0
    code, out, err = run_cli([*server, "submit", "command", "-t", "web-02", "-p", "cmd=true",
                              "--in", "1h", "--follow", "--wait-timeout", "2s", "--yes"],
                             env=env)
    assert code == 1, err
    assert "not finished after 2s: 1 job waiting" in err.splitlines()[-2], err
