"""``fleetsched server`` as a real process (uvicorn on a loopback port) on real Redis and a
SQLite record, driven over HTTP with ``httpx``: tokens (shown once, stored hashed, refused at
once when revoked or expired), roles, submit/show/cancel recorded as the token's owner,
paging, errors with the CLI's message, and the OpenAPI document."""

from __future__ import annotations

import time

import httpx
import sqlalchemy as sa

from tests.server.conftest import HOSTS, Api
from tests.submit_support import events, sql_rows


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
    code, out, err = api.cli("tokens", "create", "ci", "--role", "operator", "--expires", "90d")
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
    token = api.token("ci", "--role", "viewer")
    # 10 s: time for a loaded machine to make the first request before the token expires
    short = api.token("short", "--role", "viewer", "--expires", "10s")
    made = time.monotonic()
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
    token_id = api.cli.ok("tokens", "list", "-o", "json").split('"id": ')[1].split(",")[0]
    api.cli.ok("tokens", "revoke", token_id)
    assert api("GET", "/hosts", token).status_code == 401
    # And an expired token is refused too
    time.sleep(max(0.0, made + 10.5 - time.monotonic()))
    assert api("GET", "/hosts", short).status_code == 401


def test_a_viewer_may_read_but_not_submit_and_a_customer_sees_none_of_the_teams_hosts(
        api: Api) -> None:
    viewer = api.token("dash", "--role", "viewer")
    reply = api("POST", "/tasks", viewer, json={"action": "command", "target": "web-01",
                                                "params": {"cmd": "true"}})
    assert reply.status_code == 403
    assert reply.json()["error"]["message"] == "role viewer may not call tasks.submit"
    assert sql_rows(api.database_url, "SELECT id FROM tasks") == []
    # A tenant-scoped token is shown its customer's hosts only: acme has none here
    customer = api.token("acme", "--role", "customer-viewer", "--tenant", "acme")
    listed = api("GET", "/hosts", customer)
    assert listed.status_code == 200 and listed.json()["items"] == []


def test_submit_show_and_cancel_through_the_api_are_recorded_as_the_tokens_owner(
        api: Api) -> None:
    token = api.token("ci", "--role", "operator", "--owner", "deploy-bot")
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
    token = api.token("ci", "--role", "operator")
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
    assert sql_rows(api.database_url, "SELECT id FROM tasks") == []


def test_tasks_and_hosts_are_paged(api: Api) -> None:
    token = api.token("ci", "--role", "operator")
    ids = [api("POST", "/tasks", token, json={
        "action": "command", "target": "web-01", "params": {"cmd": "true"},
        "executor": "simulate", "in": "1h"}).json()["task_id"] for _ in range(3)]
    first = api("GET", "/tasks", token, params={"limit": 2}).json()
    assert [t["id"] for t in first["items"]] == ids[::-1][:2]
    assert first["next_offset"] == 2
    second = api("GET", "/tasks", token, params={"limit": 2, "offset": 2}).json()
    assert [t["id"] for t in second["items"]] == [ids[0]] and second["next_offset"] is None
    hosts = api("GET", "/hosts", token, params={"limit": 3, "offset": 3}).json()
    assert [h["name"] for h in hosts["items"]] == HOSTS[3:]
    assert hosts["next_offset"] is None
    assert api("GET", "/hosts", token, params={"limit": 0}).status_code == 422


def test_the_openapi_document_and_status_are_served(api: Api) -> None:
    doc = httpx.get(f"{api.base}/openapi.json", timeout=30)
    assert doc.status_code == 200
    paths = doc.json()["paths"]
    assert {"/api/v1/tasks", "/api/v1/tasks/{task_id}", "/api/v1/tasks/{task_id}/cancel",
            "/api/v1/hosts", "/api/v1/status", "/api/v1/windows/{name}/approve"} <= set(paths)
    token = api.token("dash", "--role", "viewer")
    status = api("GET", "/status", token)
    assert status.status_code == 200 and status.json()["findings"]
