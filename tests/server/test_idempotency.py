"""A submit retried after a lost reply is recognised as a repeat (``Idempotency-Key``), on a
real ``fleetsched server`` over real Redis and SQLite or PostgreSQL: the first task comes back
(200, ``repeat: true``) and exactly one task is in SQL and in Redis; the same key with another
request is a 409 naming the key and the first task; concurrent submits with one key make one
task, whatever their order. And ``tokens create`` run again after a lost reply does not mint a
second live token of the same name for the same owner.

The tests share one server per database (the module's, ``tests.server.conftest.shared_api``,
on a redis-server of its own): each uses keys, owners and token names of its own, and counts
what it made in SQL and in Redis against what was there when it began."""

from __future__ import annotations

import itertools
import json
import socket
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import redis

from tests.conftest import _create_database_on
from tests.server.conftest import HOSTS, Api, shared_api
from tests.submit_support import sql_rows

pytestmark = pytest.mark.xdist_group("server-idempotency")  # under -n: one process

BODY = {"action": "command", "target": "group:web", "params": {"cmd": "true"},
        "executor": "simulate", "in": "1h"}
NAMES = itertools.count(1)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           api_record: Path) -> Iterator[Api]:
    """The server on SQLite, then on PostgreSQL (a new database): each test runs on both."""
    tmp = tmp_path_factory.mktemp(f"idempotency-{request.param}")
    database_url = None
    if request.param == "postgresql":
        database_url = _create_database_on(request.getfixturevalue("postgres_admin_url"),
                                           f"fleetsched_idem_{uuid.uuid4().hex[:10]}")
    with shared_api(tmp, api_record, database_url=database_url) as api:
        yield api


def _name(what: str) -> str:
    return f"{what}-{next(NAMES)}"


def _task_count(api: Api) -> int:
    return len(sql_rows(api.database_url, "SELECT id FROM tasks"))


def _tasks_with_key(api: Api, key: str) -> list[int]:
    return [r.id for r in sql_rows(api.database_url,
                                   "SELECT id FROM tasks WHERE request_key = :k", k=key)]


def _redis_counts(api: Api) -> tuple[int, int]:
    """Task hashes and job hashes in the server's Redis."""
    client = redis.Redis.from_url(api.cli.redis_url)
    try:
        return (sum(1 for _ in client.scan_iter("*:task:*")),
                sum(1 for _ in client.scan_iter("*:job:*")))
    finally:
        client.close()


def _send_and_drop_the_reply(api: Api, token: str, key: str) -> None:
    """POST /tasks on a raw socket, wait until the server has recorded the task, then close
    the socket without reading a byte of the reply: a client whose reply was lost."""
    url = httpx.URL(f"{api.base}/tasks")
    payload = json.dumps(BODY).encode()
    head = (f"POST {url.raw_path.decode()} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n"
            f"Authorization: Bearer {token}\r\nIdempotency-Key: {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n")
    with socket.create_connection((url.host, url.port)) as sock:
        sock.sendall(head.encode() + payload)
        deadline = time.monotonic() + 20
        while not _tasks_with_key(api, key):
            assert time.monotonic() < deadline, "the first submit was never recorded"
            time.sleep(0.05)


def test_a_submit_repeated_after_a_lost_reply_returns_the_first_task_and_queues_nothing(
        served: Api) -> None:
    token = served.token(_name("ci"), "--role", "operator", "--owner", "deploy-bot")
    tasks, queued = _task_count(served), _redis_counts(served)
    # Given a submit that ran but whose reply never reached the client
    _send_and_drop_the_reply(served, token, "deploy-4711")
    [first] = _tasks_with_key(served, "deploy-4711")
    # When the client sends the same request with the same key again
    reply = served("POST", "/tasks", token, headers={"Idempotency-Key": "deploy-4711"},
                   json=BODY)
    # Then it gets the first task back, marked as a repeat, with 200 instead of 201
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert answer["repeat"] is True and answer["task_id"] == first
    assert answer["jobs"] == len(HOSTS) and answer["operator"] == "deploy-bot"
    # And exactly one task is in SQL and in Redis, with one job per host
    assert _tasks_with_key(served, "deploy-4711") == [first]
    assert _task_count(served) == tasks + 1
    assert _redis_counts(served) == (queued[0] + 1, queued[1] + len(HOSTS))
    # And a new key is a new task (201, not a repeat)
    other = served("POST", "/tasks", token, headers={"Idempotency-Key": "deploy-4712"},
                   json=BODY)
    assert other.status_code == 201 and other.json()["repeat"] is False
    assert other.json()["task_id"] != first


def test_the_same_key_with_another_request_is_a_conflict_that_changes_nothing(
        served: Api) -> None:
    token = served.token(_name("ci"), "--role", "operator")
    queued = _redis_counts(served)
    first = served("POST", "/tasks", token, headers={"Idempotency-Key": "k1"}, json=BODY)
    assert first.status_code == 201, first.text
    task_id = first.json()["task_id"]
    # When the same key comes with another request
    reply = served("POST", "/tasks", token, headers={"Idempotency-Key": "k1"},
                   json={**BODY, "target": "web-01"})
    # Then 409, one line naming the key and the first task, and nothing new anywhere
    assert reply.status_code == 409, reply.text
    error = reply.json()["error"]
    assert error["kind"] == "ConflictError" and error["code"] == 2
    assert "'k1'" in error["message"] and f"task {task_id}" in error["message"]
    assert "\n" not in error["message"] and error["hint"]
    assert _tasks_with_key(served, "k1") == [task_id]
    assert _redis_counts(served) == (queued[0] + 1, queued[1] + len(HOSTS))


def test_one_key_belongs_to_its_principal_and_a_bad_key_is_refused(served: Api) -> None:
    alice = served.token(_name("a"), "--role", "operator", "--owner", "alice")
    bob = served.token(_name("b"), "--role", "operator", "--owner", "bob")
    tasks = _task_count(served)
    # Two owners may use the same key: each gets a task of their own
    one = served("POST", "/tasks", alice, headers={"Idempotency-Key": "nightly"}, json=BODY)
    two = served("POST", "/tasks", bob, headers={"Idempotency-Key": "nightly"}, json=BODY)
    assert (one.status_code, two.status_code) == (201, 201)
    assert one.json()["task_id"] != two.json()["task_id"]
    # A key with a space, or longer than the column, is a 400 that records nothing
    for bad in ("two words", "k" * 161):
        reply = served("POST", "/tasks", alice, headers={"Idempotency-Key": bad}, json=BODY)
        assert reply.status_code == 400, reply.text
        assert "idempotency key" in reply.json()["error"]["message"]
    assert _task_count(served) == tasks + 2


def test_concurrent_submits_with_one_key_make_exactly_one_task(served: Api) -> None:
    token = served.token(_name("ci"), "--role", "operator")
    queued = _redis_counts(served)

    def submit(_n: int) -> httpx.Response:
        return served("POST", "/tasks", token, headers={"Idempotency-Key": "race"}, json=BODY)

    # When eight clients send the same keyed submit at once
    with ThreadPoolExecutor(8) as pool:
        replies = list(pool.map(submit, range(8)))
    # Then one made the task (201) and every other got it back as a repeat (200)
    assert sorted(r.status_code for r in replies) == [200] * 7 + [201], \
        [r.text for r in replies]
    assert len({r.json()["task_id"] for r in replies}) == 1
    assert len(_tasks_with_key(served, "race")) == 1
    assert _redis_counts(served) == (queued[0] + 1, queued[1] + len(HOSTS))


def test_a_token_create_run_again_is_refused_while_the_first_token_is_live(served: Api) -> None:
    name = _name("ci-deploy")
    first = served.token(name, "--role", "operator", "--owner", "deploy-bot")
    before = served.cli.ok("tokens", "list", "-o", "json")
    first_id = next(row["id"] for row in json.loads(before) if row["name"] == name)
    # When the same create runs again (its reply, the token, was lost)
    code, out, err = served.cli("tokens", "create", name, "--role", "operator",
                                "--owner", "deploy-bot", operator="admin-at-shell")
    # Then it is refused in one line saying how to revoke the first, and nothing is minted
    assert code == 2 and out == ""
    lines = err.splitlines()
    assert lines[0] == (f"error: deploy-bot already has a live token named '{name}' "
                        f"(id {first_id}); nothing was created")
    assert lines[1] == ("hint: if its token was lost, revoke it (`fleetsched tokens revoke "
                        f"{first_id}`) and create it again") and len(lines) == 2
    assert served.cli.ok("tokens", "list", "-o", "json") == before
    assert served("GET", "/tasks", first).status_code == 200
    # And another owner may hold the name, and once the first is revoked it may be made again
    served.token(name, "--role", "viewer", "--owner", "someone-else")
    served.cli.ok("tokens", "revoke", str(first_id), operator="admin-at-shell")
    again = served.token(name, "--role", "operator", "--owner", "deploy-bot")
    assert served("GET", "/tasks", again).status_code == 200
