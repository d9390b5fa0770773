"""``fleetsched server`` as a real process (uvicorn on a loopback port) on real Redis and a
SQLite record, driven over HTTP with ``httpx``: tokens (shown once, stored hashed, refused at
once when revoked or expired), roles, submit/show/cancel recorded as the token's owner,
paging, errors with the CLI's message, and the OpenAPI document.

The tests share one server (the module's, ``tests.server.conftest.shared_api``): each uses
tokens of its own names and judges the record against what it held when the test began."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from scheduler.record.models import ApiToken
from tests.server.conftest import CLIENT_TLS, HOSTS, Api, shared_api
from tests.submit_support import events, sql_rows

pytestmark = pytest.mark.xdist_group("server-api")  # under -n: one process, one server

NAMES = itertools.count(1)  # tokens' names: each test's its own on the one server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, api_record: Path) -> Iterator[Api]:
    with shared_api(tmp_path_factory.mktemp("api"), api_record) as server:
        yield server


@pytest.fixture
def api(served: Api) -> Api:
    return served


def _name(what: str) -> str:
    return f"{what}-{next(NAMES)}"


def _task_ids(api: Api) -> list[int]:
    return [r.id for r in sql_rows(api.database_url, "SELECT id FROM tasks")]


def _every_value(database_url: str) -> str:
    """Every cell of every table of the record, as one text."""
    engine = sa.create_engine(database_url)
    try:
        with engine.connect() as conn:
            return "\n".join(repr(row) for table in sa.inspect(engine).get_table_names()
                             for row in conn.execute(sa.text(f'SELECT * FROM "{table}"')))
    finally:
        engine.dispose()


def test_a_token_is_shown_once_and_the_record_keeps_only_its_hash(api: Api) -> None:
    # When an administrator creates a token at the shell
    code, out, err = api.cli("tokens", "create", _name("ci"), "--role", "operator",
                             "--expires", "90d")
    # Then stdout is the token alone, prefixed for secret scanners
    assert code == 0
    token = out.strip()
    assert token.startswith("fst_") and "\n" not in token and len(token) > 40
    assert "shown only now" in err
    # And the secret is nowhere in the record: not the token, not its secret part
    record = _every_value(api.database_url)
    assert token not in record and token.split("_", 2)[2] not in record
    # While the list shows its prefix, owner and role
    listed = api.cli.ok("tokens", "list", "-o", "json")
    assert token.split("_")[1] in listed and token not in listed and "operator" in listed
    # And the API accepts it
    assert api("GET", "/tasks", token).status_code == 200


def test_requests_without_a_valid_token_are_refused_with_401(api: Api) -> None:
    name, short_name = _name("ci"), _name("short")
    token = api.token(name, "--role", "viewer")
    # 10 s: time for a loaded machine to make the first request before the token expires
    short = api.token(short_name, "--role", "viewer", "--expires", "10s")
    assert api("GET", "/hosts", token).status_code == 200
    assert api("GET", "/hosts", short).status_code == 200
    # Given no token, a malformed one, a forged one with a real prefix
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    for bad in (None, "nonsense", forged):
        reply = api("GET", "/hosts", bad)
        # Then 401, as JSON with a one-line message and a hint
        assert reply.status_code == 401, bad
        assert reply.headers["www-authenticate"] == "Bearer"
        error = reply.json()["error"]
        assert error["kind"] == "UnauthenticatedError" and "\n" not in error["message"]
        assert error["hint"]
    # When the token is revoked, the very next request is refused
    token_id = next(row["id"] for row in json.loads(api.cli.ok("tokens", "list", "-o", "json"))
                    if row["name"] == name)
    api.cli.ok("tokens", "revoke", str(token_id))
    assert api("GET", "/hosts", token).status_code == 401
    # And an expired token is refused too: `--expires 10s` recorded its end ten seconds after
    # its making, and once that end is past (brought to its making here, instead of waiting
    # ten seconds: the server compares it with its clock at every request) it is refused
    engine = sa.create_engine(api.database_url)
    try:
        with engine.begin() as conn:
            made, ends = conn.execute(sa.select(ApiToken.created_at, ApiToken.expires_at)
                                      .where(ApiToken.name == short_name)).one()
            assert abs(ends - made - timedelta(seconds=10)) < timedelta(seconds=1), (made, ends)
            conn.execute(sa.update(ApiToken).where(ApiToken.name == short_name)
                         .values(expires_at=ApiToken.created_at))
    finally:
        engine.dispose()
    assert api("GET", "/hosts", short).status_code == 401


def test_a_viewer_may_read_but_not_submit_and_a_customer_sees_none_of_the_teams_hosts(
        api: Api) -> None:
    viewer = api.token(_name("dash"), "--role", "viewer")
    before = _task_ids(api)
    reply = api("POST", "/tasks", viewer, json={"action": "command", "target": "web-01",
                                                "params": {"cmd": "true"}})
    assert reply.status_code == 403
    assert reply.json()["error"]["message"] == "role viewer may not call tasks.submit"
    assert _task_ids(api) == before
    # A tenant-scoped token is shown its customer's hosts only: acme has none here
    customer = api.token(_name("acme"), "--role", "customer-viewer", "--tenant", "acme")
    listed = api("GET", "/hosts", customer)
    assert listed.status_code == 200 and listed.json()["items"] == []


def test_submit_show_and_cancel_through_the_api_are_recorded_as_the_tokens_owner(
        api: Api) -> None:
    token = api.token(_name("ci"), "--role", "operator", "--owner", "deploy-bot")
    # When a task is submitted an hour ahead, so that it is still pending for the cancel
    reply = api("POST", "/tasks", token, json={
        "action": "command", "target": "group:web", "params": {"cmd": "true"},
        "executor": "simulate", "in": "1h", "max_concurrency": "2"})
    assert reply.status_code == 201, reply.text
    done = reply.json()
    task_id = done["task_id"]
    assert done["jobs"] == len(HOSTS) and done["operator"] == "deploy-bot"
    # Then it shows with its request
    shown = api("GET", f"/tasks/{task_id}", token)
    assert shown.status_code == 200 and shown.json()["id"] == task_id
    # And a cancel through the API cancels its jobs
    cancelled = api("POST", f"/tasks/{task_id}/cancel", token)
    assert cancelled.status_code == 200, cancelled.text
    assert cancelled.json()["state"] == "cancelled" and cancelled.json()["by"] == "deploy-bot"
    # And the record's operator events name the token's owner, not a self-declared name
    rows = events(api.database_url, task_id, kinds=("submit", "cancel"))
    assert {r.kind for r in rows} >= {"submit", "cancel"}
    assert {r.operator for r in rows} == {"deploy-bot"}
    # And an unknown task is a 404 with the CLI's message
    missing = api("POST", "/tasks/9999/pause", token)
    assert missing.status_code == 404
    assert missing.json()["error"] == {"code": 4, "kind": "NotFoundError",
                                       "message": "no task 9999",
                                       "hint": "see `fleetsched tasks list`"}


def test_a_refused_request_body_gets_the_clis_message(api: Api) -> None:
    token = api.token(_name("ci"), "--role", "operator")
    before = _task_ids(api)
    body = {"action": "no-such-action", "target": "web-01"}
    reply = api("POST", "/tasks", token, json=body)
    assert reply.status_code == 404
    error = reply.json()["error"]
    # The CLI refuses the same request with the same line and exit code
    code, _out, err = api.cli("submit", "no-such-action", "--target", "web-01", "--yes")
    assert code == error["code"] == 4
    assert f"error: {error['message']}" in err
    # A bad value names its key as a task file does; an unknown key is refused; so is non-JSON
    reply = api("POST", "/tasks", token, json={"action": "command", "target": "web-01",
                                               "max_concurrency": "lots"})
    assert reply.status_code == 400 and "max_concurrency" in reply.json()["error"]["message"]
    reply = api("POST", "/tasks", token, json={**body, "colour": "blue"})
    assert reply.status_code == 400
    assert reply.json()["error"]["message"] == "unknown key(s) colour"
    reply = api("POST", "/tasks", token, content=b"{not json",
                headers={"Content-Type": "application/json"})
    assert reply.status_code == 422 and reply.json()["error"]["code"] == 2
    assert _task_ids(api) == before


def test_tasks_and_hosts_are_paged(api: Api) -> None:
    token = api.token(_name("ci"), "--role", "operator")
    ids = [api("POST", "/tasks", token, json={
        "action": "command", "target": "web-01", "params": {"cmd": "true"},
        "executor": "simulate", "in": "1h"}).json()["task_id"] for _ in range(3)]
    # Newest first: the three, then the tasks the module's other tests made before
    every = [t["id"] for t in api("GET", "/tasks", token, params={"limit": 1000}).json()["items"]]
    assert every[:3] == ids[::-1]
    first = api("GET", "/tasks", token, params={"limit": 2}).json()
    assert [t["id"] for t in first["items"]] == ids[::-1][:2]
    assert first["next_offset"] == 2
    second = api("GET", "/tasks", token, params={"limit": 2, "offset": 2}).json()
    assert [t["id"] for t in second["items"]] == every[2:4]
    assert second["next_offset"] == (4 if len(every) > 4 else None)
    last = api("GET", "/tasks", token, params={"limit": 2, "offset": len(every) - 1}).json()
    assert [t["id"] for t in last["items"]] == [every[-1]] and last["next_offset"] is None
    hosts = api("GET", "/hosts", token, params={"limit": 3, "offset": 3}).json()
    assert [h["name"] for h in hosts["items"]] == HOSTS[3:]
    assert hosts["next_offset"] is None
    assert api("GET", "/hosts", token, params={"limit": 0}).status_code == 422


def test_the_openapi_document_and_status_are_served(api: Api) -> None:
    doc = httpx.get(f"{api.base}/openapi.json", timeout=30, verify=CLIENT_TLS)
    assert doc.status_code == 200
    paths = doc.json()["paths"]
    assert {"/api/v1/tasks", "/api/v1/tasks/{task_id}", "/api/v1/tasks/{task_id}/cancel",
            "/api/v1/hosts", "/api/v1/status", "/api/v1/windows/{name}/approve"} <= set(paths)
    token = api.token(_name("dash"), "--role", "viewer")
    status = api("GET", "/status", token)
    assert status.status_code == 200 and status.json()["findings"]
