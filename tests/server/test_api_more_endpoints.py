"""The rest of the operator verbs over HTTP, each a thin shell over a verb, on a real
``fleetsched server``: a task's jobs a page at a time, the task list's state filter paged in
SQL, hosts check, import and export, group limits, windows unassign and remove, freezes,
schedules add and remove, and the report paged. Each change is refused to a role that may not
(403, nothing written) and recorded as the token's owner when allowed.

Most tests share one server (the module's, ``tests.server.conftest.shared_api``) with tokens
of their own names, judging the record against what it held when they began; the three that
read the whole record (every task, every job of the report) or remove group ``web`` have a
server of their own (``own_api``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.server.conftest import HOSTS, Api, shared_api
from tests.servers import free_port
from tests.submit_support import sql_rows

pytestmark = pytest.mark.xdist_group("server-more-endpoints")  # under -n: one process



@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, api_record: Path) -> Iterator[Api]:
    with shared_api(tmp_path_factory.mktemp("more-endpoints"), api_record) as server:
        yield server


@pytest.fixture
def api(served: Api) -> Api:
    return served




def _error(reply: Any, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    error: dict[str, Any] = reply.json()["error"]
    return error


def _submit(api: Api, token: str, target: str = "group:web") -> int:
    """A task an hour ahead, so that its jobs stay pending through the test."""
    reply = api("POST", "/tasks", token, json={
        "action": "command", "target": target, "params": {"cmd": "true"},
        "executor": "simulate", "in": "1h"})
    assert reply.status_code == 201, reply.text
    task_id: int = reply.json()["task_id"]
    return task_id


def _kinds(api: Api) -> list[tuple[str, str | None]]:
    rows = sql_rows(api.database_url, "SELECT kind, operator FROM events ORDER BY ts, id")
    return [(r.kind, r.operator) for r in rows]


def test_a_tasks_jobs_are_read_a_page_at_a_time_in_host_order(api: Api) -> None:
    operator = api.token_named("ci", "--role", "operator")
    viewer = api.token_named("dash", "--role", "viewer")
    task_id = _submit(api, operator)
    first = api("GET", f"/tasks/{task_id}/jobs", viewer, params={"limit": 2})
    assert first.status_code == 200, first.text
    page = first.json()
    assert [j["host"] for j in page["items"]] == HOSTS[:2] and page["next_offset"] == 2
    assert page["items"][0]["id"] == f"{task_id}.0" and page["items"][0]["state"] == "pending"
    last = api("GET", f"/tasks/{task_id}/jobs", viewer,
               params={"limit": 2, "offset": 4}).json()
    assert [j["host"] for j in last["items"]] == HOSTS[4:] and last["next_offset"] is None
    # Filtered by job state, in SQL: a page is full when more rows match
    api.cli.ok("tasks", "cancel", str(task_id))
    cancelled = api("GET", f"/tasks/{task_id}/jobs", viewer,
                    params={"state": "cancelled", "limit": 3}).json()
    assert len(cancelled["items"]) == 3 and cancelled["next_offset"] == 3
    assert api("GET", f"/tasks/{task_id}/jobs", viewer,
               params={"state": "running"}).json()["items"] == []
    error = _error(api("GET", f"/tasks/{task_id}/jobs", viewer, params={"state": "done"}), 400)
    assert error["message"].startswith("--state 'done' must be one of accepted, pending")
    assert _error(api("GET", "/tasks/9999/jobs", viewer), 404)["message"] == "no task 9999"
    # The task's detail says the jobs by state, never a row per job
    detail = api("GET", f"/tasks/{task_id}", viewer).json()
    assert detail["jobs"] == {"cancelled": len(HOSTS)}
    # A customer is shown its own jobs only: a task without one is not found
    customer = api.token_named("acme", "--role", "customer-viewer", "--tenant", "acme")
    assert _error(api("GET", f"/tasks/{task_id}/jobs", customer), 404)["message"] == \
        f"no task {task_id}"


def test_the_task_lists_state_filter_is_paged_in_sql_so_no_page_is_short(own_api: Api) -> None:
    api = own_api
    operator = api.token_named("ci", "--role", "operator")
    viewer = api.token_named("dash", "--role", "viewer")
    older, middle, newest = (_submit(api, operator) for _ in range(3))
    # Given the newest task's counters say every job succeeded while its row still says
    # active (the recorder counts the jobs before it writes the task's final state)
    engine = sa.create_engine(api.database_url)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE tasks SET succeeded = total WHERE id = :id"), {"id": newest})
    engine.dispose()
    # Then the list shows it as succeeded, and the active ones page by one without a gap
    shown = {t["id"]: t["state"] for t in api("GET", "/tasks", viewer).json()["items"]}
    assert shown == {newest: "succeeded", middle: "active", older: "active"}
    page = api("GET", "/tasks", viewer, params={"state": "active", "limit": 1}).json()
    assert [t["id"] for t in page["items"]] == [middle] and page["next_offset"] == 1
    page = api("GET", "/tasks", viewer, params={"state": "active", "limit": 1,
                                                "offset": 1}).json()
    assert [t["id"] for t in page["items"]] == [older] and page["next_offset"] is None
    succeeded = api("GET", "/tasks", viewer, params={"state": "succeeded"}).json()
    assert [t["id"] for t in succeeded["items"]] == [newest]


def _hosts(api: Api) -> dict[str, str | None]:
    return {r.name: r.source for r in sql_rows(api.database_url, "SELECT name, source FROM hosts")}


def test_an_admin_imports_an_inventory_sent_as_text_with_the_clis_refusals(
        api: Api, tmp_path: Path) -> None:
    admin = api.token_named("inv", "--role", "admin", "--owner", "cmdb-sync")
    operator = api.token_named("ci", "--role", "operator")
    text = "[db]\ndb-01 ansible_host=10.0.0.1\ndb-02 ansible_host=10.0.0.2\n"
    body = {"name": "cmdb.ini", "inventory": text}
    # An operator may not import: 403, nothing written
    before = start = _hosts(api)
    assert _error(api("POST", "/hosts/import", operator, json=body), 403)["message"] == \
        "role operator may not call hosts.import"
    # A dry run says what would change and writes nothing
    dry = api("POST", "/hosts/import", admin, json={**body, "dry_run": True})
    assert dry.status_code == 200, dry.text
    assert dry.json()["counts"]["added"] == 2 and _hosts(api) == before
    # The import adds the hosts as the token's owner, under the name's own source
    done = api("POST", "/hosts/import", admin, json=body)
    assert done.status_code == 200, done.text
    assert done.json()["format"] == "ini" and done.json()["by"] == "cmdb-sync"
    assert sorted(c["host"] for c in done.json()["changes"]) == ["db-01", "db-02"]
    hosts = _hosts(api)
    assert hosts["db-01"] == hosts["db-02"] == "inventory:api:cmdb.ini"
    assert ("import", "cmdb-sync") in _kinds(api)
    # A prune under that name removes only what that name imported (not the file's web hosts)
    pruned = api("POST", "/hosts/import", admin, json={
        "name": "cmdb.ini", "inventory": "[db]\ndb-01 ansible_host=10.0.0.1\n", "prune": True})
    assert pruned.status_code == 200, pruned.text
    assert sorted(_hosts(api)) == sorted([*start, "db-01"])
    # Text a file would be refused for is refused with the CLI's message, and writes nothing
    before = _hosts(api)
    for bad in ("[db]\ndb-03\x00\n", "$ANSIBLE_VAULT;1.1;AES256\n6162\n", "   \n",
                "[db\ndb-03\n"):
        (tmp_path / "bad.ini").write_text(bad)
        code, _out, err = api.cli("hosts", "import", str(tmp_path / "bad.ini"))
        error = _error(api("POST", "/hosts/import", admin,
                           json={"name": "bad.ini", "inventory": bad}), 400)
        assert error["code"] == code == 2
        assert f"error: {error['message']}".replace("bad.ini", str(tmp_path / "bad.ini")) in err
    assert _error(api("POST", "/hosts/import", admin, json={**body, "name": "../etc/x"}),
                  400)["message"].startswith("name '../etc/x' is not an inventory name")
    assert _error(api("POST", "/hosts/import", admin, json={**body, "format": "toml"}),
                  422)["code"] == 2
    big = "[db]\n" + "db-9 ansible_host=10.9.9.9\n" * 50_000  # over 1 MB
    assert api("POST", "/hosts/import", admin,
               json={"name": "big.ini", "inventory": big}).status_code in (400, 413)
    assert _hosts(api) == before


def test_an_admin_exports_the_hosts_a_viewer_may_not(api: Api) -> None:
    admin = api.token_named("inv", "--role", "admin")
    viewer = api.token_named("dash", "--role", "viewer")
    assert _error(api("GET", "/hosts/export", viewer), 403)["message"] == \
        "role viewer may not call hosts.export"
    ini = api("GET", "/hosts/export", admin)
    assert ini.status_code == 200 and ini.headers["content-type"].startswith("text/plain")
    code, out, _err = api.cli("hosts", "export")
    assert code == 0 and ini.text == out
    exported = api("GET", "/hosts/export", admin,
                   params={"target": "web-0[12]", "format": "ansible-json"})
    assert exported.status_code == 200, exported.text
    assert sorted(exported.json()["_meta"]["hostvars"]) == ["web-01", "web-02"]
    assert _error(api("GET", "/hosts/export", admin, params={"target": "nope-*"}),
                  404)["code"] == 4


def test_a_host_check_checks_one_bounded_page_of_the_target(api: Api) -> None:
    admin = api.token_named("inv", "--role", "admin")
    viewer = api.token_named("dash", "--role", "viewer")
    closed = free_port()  # nothing listens: each probe is refused at once
    inventory = "".join(f"probe-{n} ansible_host=127.0.0.1 ansible_port={closed}\n"
                        for n in range(1, 4))
    assert api("POST", "/hosts/import", admin,
               json={"name": "probes.ini", "inventory": inventory}).status_code == 200
    reply = api("POST", "/hosts/check", admin,
                json={"target": "probe-*", "limit": 2, "timeout": "3s"})
    assert reply.status_code == 200, reply.text
    page = reply.json()
    assert [h["host"] for h in page["hosts"]] == ["probe-1", "probe-2"]
    assert {h["status"] for h in page["hosts"]} == {"unreachable"} and page["ok"] is False
    assert page["selected"] == 3 and page["next_offset"] == 2
    rest = api("POST", "/hosts/check", admin,
               json={"target": "probe-*", "limit": 2, "offset": 2, "timeout": "3s"}).json()
    assert [h["host"] for h in rest["hosts"]] == ["probe-3"] and rest["next_offset"] is None
    # Bounded: a page over the limit, a long timeout, executor options are refused
    assert _error(api("POST", "/hosts/check", admin, json={"limit": 500}), 422)["code"] == 2
    assert _error(api("POST", "/hosts/check", admin, json={"timeout": "5m"}), 400)[
        "message"] == "timeout '5m' is over 30s"
    assert _error(api("POST", "/hosts/check", admin,
                      json={"options": {"identity_file": "/etc/shadow"}}), 422)["code"] == 2
    assert _error(api("POST", "/hosts/check", viewer, json={}), 403)["kind"] == \
        "ForbiddenError"


def test_an_admin_limits_a_group_removes_the_limit_and_removes_the_group(own_api: Api) -> None:
    api = own_api
    admin = api.token_named("inv", "--role", "admin", "--owner", "ops-lead")
    operator = api.token_named("ci", "--role", "operator")
    before = _kinds(api)
    assert _error(api("POST", "/groups/web/limit", operator, json={"max_busy": "2"}), 403)[
        "message"] == "role operator may not call groups.limit"
    assert _kinds(api) == before
    limited = api("POST", "/groups/web/limit", admin, json={"max_busy": "40%"})
    assert limited.status_code == 200, limited.text
    assert limited.json() == {"group": "web", "max_busy": 2, "hosts": len(HOSTS),
                              "members": HOSTS, "by": "ops-lead"}
    groups = {g["name"]: g for g in api("GET", "/groups", admin).json()["items"]}
    assert groups["web"]["max_busy"] == "40%"
    removed = api("POST", "/groups/web/limit", admin, json={"max_busy": None}).json()
    assert removed["max_busy"] is None
    assert [k for k in _kinds(api) if k[0] == "group-limit"] == [("group-limit", "ops-lead")] * 2
    bad = _error(api("POST", "/groups/web/limit", admin, json={"max_busy": "lots"}), 400)
    code, _out, err = api.cli("groups", "limit", "web", "--max-busy", "lots")
    assert code == bad["code"] and f"error: {bad['message']}" in err
    assert _error(api("POST", "/groups/nope/limit", admin, json={"max_busy": "1"}), 404)[
        "code"] == 4
    gone = api("DELETE", "/groups/web", admin)
    assert gone.status_code == 200 and gone.json()["hosts"] == len(HOSTS)
    assert "web" not in {g["name"] for g in api("GET", "/groups", admin).json()["items"]}
    assert _error(api("DELETE", "/groups/web", admin), 404)["code"] == 4


def test_a_window_admin_adds_a_freeze_unassigns_and_removes_windows(api: Api) -> None:
    admin = api.token_named("win", "--role", "window-admin", "--owner", "ops-lead")
    operator = api.token_named("ci", "--role", "operator")
    start = _kinds(api)
    freeze = api("POST", "/windows", admin, json={
        "name": "xmas", "freeze": True, "start": "2030-12-20T00:00", "end": "2031-01-02T00:00",
        "tz": "Europe/Berlin"})
    assert freeze.status_code == 201, freeze.text
    assert freeze.json()["kind"] == "freeze"
    assert api("POST", "/windows/xmas/assign", admin, json={"groups": ["web"]}).status_code == 200
    before = _kinds(api)
    assert _error(api("POST", "/windows/xmas/unassign", operator, json={"groups": ["web"]}),
                  403)["message"] == "role operator may not call windows.unassign"
    assert _error(api("DELETE", "/windows/xmas", operator), 403)["kind"] == "ForbiddenError"
    assert _kinds(api) == before
    # Each assignment named must be held, or nothing is removed (the CLI's message)
    bad = _error(api("POST", "/windows/xmas/unassign", admin, json={"hosts": ["web-01"]}), 404)
    code, _out, err = api.cli("windows", "unassign", "xmas", "--host", "web-01")
    assert code == bad["code"] and f"error: {bad['message']}" in err
    unassigned = api("POST", "/windows/xmas/unassign", admin, json={"groups": ["web"]})
    assert unassigned.status_code == 200, unassigned.text
    assert unassigned.json()["count"] == 1 and unassigned.json()["by"] == "ops-lead"
    removed = api("DELETE", "/windows/xmas", admin)
    assert removed.status_code == 200 and removed.json()["by"] == "ops-lead"
    assert _error(api("GET", "/windows/xmas", admin), 404)["message"] == \
        "no window named 'xmas'"
    assert [k for k in _kinds(api)[len(start):]
            if k[0] in ("window-unassign", "window-remove")] == [
        ("window-unassign", "ops-lead"), ("window-remove", "ops-lead")]


def test_a_window_admin_adds_and_removes_a_schedule(api: Api) -> None:
    admin = api.token_named("win", "--role", "window-admin", "--owner", "ops-lead")
    operator = api.token_named("ci", "--role", "operator")
    start = _kinds(api)
    body = {"name": "nightly", "cron": "0 3 * * *", "tz": "Europe/Berlin", "task": {
        "action": "command", "target": "group:web", "params": {"cmd": "uptime"},
        "executor": "simulate"}}
    assert _error(api("POST", "/schedules", operator, json=body), 403)["message"] == \
        "role operator may not call schedules.add"
    added = api("POST", "/schedules", admin, json=body)
    assert added.status_code == 201, added.text
    assert added.json()["hosts"] == len(HOSTS) and added.json()["next"]
    assert added.json()["by"] == "ops-lead"
    shown = api("GET", "/schedules/nightly", admin).json()
    assert shown["name"] == "nightly" and shown["tz"] == "Europe/Berlin"
    # A start time is the occurrence's: refused in the task; a duplicate gets the CLI's message
    assert _error(api("POST", "/schedules", admin,
                      json={**body, "name": "x", "task": {**body["task"], "in": "1h"}}),
                  400)["message"] == "task: unknown key(s) in"
    dup = _error(api("POST", "/schedules", admin, json=body), 400)
    code, _out, err = api.cli("schedules", "add", "nightly", "--cron", "0 3 * * *", "command",
                              "-t", "group:web", "-p", "cmd=uptime")
    assert code == dup["code"] and f"error: {dup['message']}" in err
    assert _error(api("DELETE", "/schedules/nightly", operator), 403)["kind"] == \
        "ForbiddenError"
    removed = api("DELETE", "/schedules/nightly", admin)
    assert removed.status_code == 200 and removed.json()["by"] == "ops-lead"
    assert _error(api("GET", "/schedules/nightly", admin), 404)["code"] == 4
    assert [k for k in _kinds(api)[len(start):]
            if k[0] in ("schedule-add", "schedule-remove")] == [
        ("schedule-add", "ops-lead"), ("schedule-remove", "ops-lead")]


def test_the_reports_job_rows_are_paged_and_its_totals_are_the_whole_reports(
        own_api: Api) -> None:
    api = own_api
    operator = api.token_named("ci", "--role", "operator")
    viewer = api.token_named("dash", "--role", "viewer")
    _submit(api, operator)
    first = api("GET", "/report", viewer, params={"since": "1d", "limit": 2}).json()
    assert [j["host"] for j in first["jobs"]] == HOSTS[:2]
    assert first["jobs_total"] == first["totals"]["jobs"] == len(HOSTS)
    assert first["next_offset"] == 2
    last = api("GET", "/report", viewer, params={"since": "1d", "limit": 2, "offset": 4}).json()
    assert [j["host"] for j in last["jobs"]] == HOSTS[4:] and last["next_offset"] is None
    assert _error(api("GET", "/report", viewer, params={"limit": 0}), 422)["code"] == 2
