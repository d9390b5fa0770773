"""Following a task over HTTP: ``GET /api/v1/tasks/{id}/events`` (Server-Sent Events) on a real
``fleetsched server``, with a real worker node running the task on the simulate executor.

The stream says the counts as they change and ends with the final state; one host's output
comes only when asked for; many followers of one task share one poller, which
``/status/followers`` counts; a quiet stream gets a heartbeat as often as the server's setting
``server_stream_heartbeat_ms`` says (15 s by default).

The tests share one server (the module's, ``tests.server.conftest.shared_api``, whose streams
get a heartbeat after 1.5 s of quiet) and one worker node, started by the first test that asks
for it and left running; they use tokens of their own names. The test that stops its server
has one of its own."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import (
    CLIENT_TLS,
    HOSTS,
    Api,
    shared_api,
    worker_nodes,
)

pytestmark = pytest.mark.xdist_group("server-sse")  # under -n: one process, one server

HEARTBEAT_S = 1.5  # server_stream_heartbeat_ms of the module's server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory,
           api_record: Path) -> Iterator[tuple[Api, Callable[[], None]]]:
    """The module's server, and what starts its worker node (once: it runs on)."""
    tmp = tmp_path_factory.mktemp("sse")
    heartbeat = {"FLEETSCHED_SERVER_STREAM_HEARTBEAT_MS": str(int(HEARTBEAT_S * 1000))}
    with (shared_api(tmp, api_record, env=heartbeat) as api,
          worker_nodes(tmp, api.cli.redis_url, api.database_url) as start):
        started: list[bool] = []

        def worker() -> None:
            if not started:
                start()
                started.append(True)

        yield api, worker


@pytest.fixture
def api(served: tuple[Api, Callable[[], None]]) -> Api:
    return served[0]


@pytest.fixture
def worker(served: tuple[Api, Callable[[], None]]) -> Callable[[], None]:
    return served[1]




def _submit(api: Api, token: str, *, duration_ms: int, failure_rate: float = 0.0,
            **more: Any) -> int:
    reply = api("POST", "/tasks", token, json={
        "action": "command", "target": "group:web", "params": {"cmd": "uptime"},
        "executor": "simulate", "retries": 0, "executor_options": {
            "duration_ms": duration_ms, "failure_rate": failure_rate}, **more})
    assert reply.status_code == 201, reply.text
    task_id: int = reply.json()["task_id"]
    return task_id


def _events(api: Api, token: str, task_id: int, *, params: dict[str, str] | None = None,
            headers: dict[str, str] | None = None, timeout: float = 60,
            until: str = "end") -> list[tuple[str, Any, str | None]]:
    """The stream's events (name, data, id) until one named ``until``; ``": ..."`` comments
    come as ``("comment", text, None)``."""
    got: list[tuple[str, Any, str | None]] = []
    sent = {"Authorization": f"Bearer {token}", **(headers or {})}
    with httpx.stream("GET", f"{api.base}/tasks/{task_id}/events", headers=sent,
                      params=params, timeout=timeout, verify=CLIENT_TLS) as reply:
        assert reply.status_code == 200, reply.read()
        assert reply.headers["content-type"].startswith("text/event-stream")
        name, data, event_id = None, None, None
        for line in reply.iter_lines():
            if line.startswith(":"):
                got.append(("comment", line[1:].strip(), None))
                if until == "comment":
                    return got
            elif line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = json.loads(line[6:])
            elif line.startswith("id: "):
                event_id = line[4:]
            elif line == "" and name is not None:
                got.append((name, data, event_id))
                if name == until:
                    return got
                name, data, event_id = None, None, None
    raise AssertionError(f"the stream ended without {until!r}: {got}")


def _followers(api: Api, token: str) -> dict[str, int]:
    reply = api("GET", "/status/followers", token)
    assert reply.status_code == 200, reply.text
    stats: dict[str, int] = reply.json()
    return stats


def test_a_follower_sees_the_counts_move_and_an_end_event_with_the_final_state(
        api: Api, worker: Callable[[], None]) -> None:
    # Given a task of five hosts, each job 0.6 s, two at a time, and a worker running it
    operator = api.token_named("ci", "--role", "operator")
    viewer = api.token_named("dash", "--role", "viewer")
    task_id = _submit(api, operator, duration_ms=600, failure_rate=1.0, max_concurrency="2")
    worker()
    # When a viewer follows it to its end
    events = _events(api, viewer, task_id)
    # Then the progress events count up to every job, summarised (no per-job lines) ...
    progress = [data for name, data, _ in events if name == "progress"]
    assert progress and progress[0]["task_id"] == task_id and progress[0]["total"] == len(HOSTS)
    assert len({p["done"] for p in progress}) > 1, progress  # it moved while followed
    assert all(set(p) >= {"state", "done", "running", "failed", "sentence"} for p in progress)
    # ... each failed job once, with its host and last lines ...
    failures = [data for name, data, _ in events if name == "failure"]
    assert sorted(f["host"] for f in failures) == HOSTS
    assert all(f["kind"] == "fail" and f["exit_code"] == 1 for f in failures)
    assert [event_id for name, _, event_id in events if name == "failure"] == \
        [str(n) for n in range(1, len(HOSTS) + 1)]
    # ... no host's output unless asked for ...
    assert "host" not in {name for name, _, _ in events}
    # ... and it ends with the final state and the exit code `tasks wait` gives
    name, end, _ = events[-1]
    assert name == "end" and end["state"] == "failed" and end["failed"] == len(HOSTS)
    assert end["exit_code"] == 3 and end["record_behind"] is False
    code, _out, err = api.cli("tasks", "wait", str(task_id))
    assert code == end["exit_code"] and end["sentence"] in err
    # A follower that resumes after the third failure gets the other two only, then the end
    resumed = _events(api, viewer, task_id, headers={"Last-Event-ID": "3"})
    assert [data["host"] for name, data, _ in resumed if name == "failure"] == \
        [f["host"] for f in failures[3:]]
    assert resumed[-1][0] == "end"


def test_one_hosts_output_comes_on_request_and_a_missing_task_is_a_404(
        api: Api, worker: Callable[[], None]) -> None:
    operator = api.token_named("ci", "--role", "operator")
    viewer = api.token_named("dash", "--role", "viewer")
    task_id = _submit(api, operator, duration_ms=200)
    worker()
    events = _events(api, viewer, task_id, params={"host": "web-03"})
    hosts = [data for name, data, _ in events if name == "host"]
    assert hosts and {h["host"] for h in hosts} == {"web-03"}
    assert all([j["host"] for j in h["jobs"]] == ["web-03"] for h in hosts)
    assert hosts[-1]["jobs"][0]["state"] == "succeeded"
    assert any("[simulated] web-03" in line for line in hosts[-1]["jobs"][0]["lines"])
    assert events[-1][0] == "end" and events[-1][1]["state"] == "succeeded"
    # A task that does not exist: a 404 with `tasks wait`'s message, before any stream
    missing = api("GET", "/tasks/9999/events", viewer)
    assert missing.status_code == 404
    code, _out, err = api.cli("tasks", "wait", "9999")
    assert code == missing.json()["error"]["code"] == 4
    assert f"error: {missing.json()['error']['message']}" in err
    # A customer whose hosts the task does not touch: as if it did not exist
    # (tests/server/test_customer_output.py follows a customer's own); no token: 401
    customer = api.token_named("acme", "--role", "customer-viewer", "--tenant", "acme")
    assert api("GET", f"/tasks/{task_id}/events", customer).status_code == 404
    assert api("GET", f"/tasks/{task_id}/events").status_code == 401


def test_twenty_followers_of_one_task_share_one_poller(
        api: Api, worker: Callable[[], None]) -> None:
    # Given a task that runs for a few seconds (five jobs of 1.5 s, one at a time)
    operator = api.token_named("ci", "--role", "operator")
    viewer = api.token_named("dash", "--role", "viewer")
    task_id = _submit(api, operator, duration_ms=1500, max_concurrency="1")
    before = _followers(api, viewer)
    # When twenty clients follow it at once to its end
    ends: list[dict[str, Any]] = []
    joined = threading.Barrier(21)

    def follow() -> None:
        joined.wait()
        ends.append(_events(api, viewer, task_id, timeout=90)[-1][1])

    threads = [threading.Thread(target=follow) for _ in range(20)]
    for thread in threads:
        thread.start()
    joined.wait()
    deadline = time.monotonic() + 30
    while _followers(api, viewer)["followers"] < 20 and time.monotonic() < deadline:
        time.sleep(0.1)
    during = _followers(api, viewer)
    worker()
    for thread in threads:
        thread.join(120)
    after = _followers(api, viewer)
    # Then all twenty saw the same end, through one feed ...
    assert len(ends) == 20 and all(e["state"] == "succeeded" and e["succeeded"] == len(HOSTS)
                                   for e in ends)
    assert during["followers"] == 20 and during["feeds"] == 1
    assert after["followers"] == 0 and after["feeds"] == 0
    # ... whose polls are those of one follower: one read per poll interval while the task
    # ran (about 8 s here), not twenty
    polls = after["polls"] - before["polls"]
    assert 3 <= polls <= 30, after
    assert after["queries"] - before["queries"] <= 4 * polls + 100


def test_a_quiet_stream_gets_a_heartbeat(api: Api) -> None:
    # Given a task an hour ahead: nothing changes for a while
    operator = api.token_named("ci", "--role", "operator")
    viewer = api.token_named("dash", "--role", "viewer")
    task_id = _submit(api, operator, duration_ms=0, **{"in": "1h"})
    started = time.monotonic()
    events = _events(api, viewer, task_id, until="comment", timeout=30)
    # Then a heartbeat comes once the stream has been quiet for the server's setting, not before
    assert events[-1] == ("comment", "heartbeat", None)
    assert HEARTBEAT_S <= time.monotonic() - started <= HEARTBEAT_S + 10
    assert [name for name, _, _ in events[:-1]] == ["progress"]
    assert events[0][1]["state"] == "active" and events[0][1]["pending"] == len(HOSTS)
    # A follower that hangs up leaves: its feed and the feed's poller go with it
    deadline = time.monotonic() + 10
    while _followers(api, viewer)["feeds"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _followers(api, viewer) | {"polls": 0, "queries": 0} == {
        "polls": 0, "queries": 0, "feeds": 0, "followers": 0}


def test_a_revoked_token_stops_following_within_a_heartbeat(api: Api) -> None:
    # Given a viewer following a task an hour ahead (its stream stays open)
    operator = api.token_named("ci", "--role", "operator")
    viewer = api.token_named("revoked", "--role", "viewer")
    task_id = _submit(api, operator, duration_ms=0, **{"in": "1h"})
    got: dict[str, Any] = {}
    thread = threading.Thread(target=lambda: got.update(events=_events(
        api, viewer, task_id, until="error", timeout=30)), daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while _followers(api, operator)["followers"] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    # When its token is revoked
    rows = json.loads(api.cli.ok("tokens", "list", "-o", "json"))
    token_id = max(row["id"] for row in rows if row["name"].startswith("revoked-"))
    api.cli.ok("tokens", "revoke", str(token_id), operator="admin-at-shell")
    revoked = time.monotonic()
    # Then the stream ends within a heartbeat (and a check), with an error event
    thread.join(HEARTBEAT_S + 2.0)
    assert not thread.is_alive(), "the stream went on after its token was revoked"
    assert time.monotonic() - revoked < HEARTBEAT_S + 2.0
    name, data, _ = got["events"][-1]
    assert name == "error" and "no longer good" in data["message"], got["events"]


def test_a_server_told_to_stop_ends_its_open_streams_and_exits(own_api: Api) -> None:
    from scheduler.server.service import SHUTDOWN_GRACE_S

    api = own_api

    # Given a follower of a task that will not end for an hour
    operator = api.token_named("ci", "--role", "operator")
    viewer = api.token_named("dash", "--role", "viewer")
    task_id = _submit(api, operator, duration_ms=0, **{"in": "1h"})
    ended: list[str] = []

    def follow() -> None:
        try:
            _events(api, viewer, task_id, timeout=60)
        except (httpx.HTTPError, AssertionError) as exc:
            ended.append(type(exc).__name__)

    thread = threading.Thread(target=follow)
    thread.start()
    deadline = time.monotonic() + 10
    while not _followers(api, viewer)["followers"] and time.monotonic() < deadline:
        time.sleep(0.1)
    # When the server is told to stop
    assert api.process is not None
    api.process.send_signal(signal.SIGTERM)
    # Then it exits within its grace (uvicorn ends by raising the signal again), and the
    # follower's stream is over
    assert api.process.wait(timeout=SHUTDOWN_GRACE_S + 10) in (0, -signal.SIGTERM)
    thread.join(10)
    assert not thread.is_alive() and ended
