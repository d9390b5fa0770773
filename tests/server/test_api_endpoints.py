"""The HTTP API's endpoints beyond the first ones, each a thin shell over a verb: a task's
output for one host, continue, retry-failed, reprioritize, jobs show; hosts show and history
(paged), groups; windows list, show, add, assign; schedules list, show, pause, resume; the
report as JSON and CSV. Each is called on a real ``fleetsched server`` once with a role that
may (a change is recorded as the token's owner), once with one that may not (403, nothing
written), and for a name that does not exist (404 with the CLI's message)."""

from __future__ import annotations

import csv
import io
from typing import Any

from tests.server.conftest import HOSTS, Api
from tests.submit_support import events, sql_rows

MISSING_TASK = {"code": 4, "kind": "NotFoundError", "message": "no task 9999",
                "hint": "see `fleetsched tasks list`"}


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
    """Every event of the record: (kind, operator), oldest first."""
    rows = sql_rows(api.database_url, "SELECT kind, operator FROM events ORDER BY ts, id")
    return [(r.kind, r.operator) for r in rows]


def test_one_hosts_output_and_one_job_are_read_on_demand(api: Api) -> None:
    operator = api.token("ci", "--role", "operator", "--owner", "deploy-bot")
    viewer = api.token("dash", "--role", "viewer")
    customer = api.token("acme", "--role", "customer-viewer", "--tenant", "acme")
    task_id = _submit(api, operator)
    # A viewer asks for one host's output: that host's job only (pending: no lines yet)
    reply = api("GET", f"/tasks/{task_id}/output", viewer, params={"host": "web-02"})
    assert reply.status_code == 200, reply.text
    out = reply.json()
    assert out["host"] == "web-02" and [j["host"] for j in out["jobs"]] == ["web-02"]
    assert out["jobs"][0]["attempt"] is None and out["jobs"][0]["lines"] == []
    # The host is required: never every host's output in one response
    assert _error(api("GET", f"/tasks/{task_id}/output", viewer), 422)["code"] == 2
    assert _error(api("GET", "/tasks/9999/output", viewer, params={"host": "web-02"}),
                  404) == MISSING_TASK
    # A customer's token on a task of none of its hosts: as if there were no such task
    assert _error(api("GET", f"/tasks/{task_id}/output", customer,
                      params={"host": "web-02"}), 404)["message"] == f"no task {task_id}"
    # And that job through /jobs/{id}, as `jobs show` reads it
    job_id = out["jobs"][0]["job"]
    job = api("GET", f"/jobs/{job_id}", viewer)
    assert job.status_code == 200, job.text
    assert job.json()["host"] == "web-02" and job.json()["attempts"] == []
    missing = _error(api("GET", f"/jobs/{task_id}.999", viewer), 404)
    code, _out, err = api.cli("jobs", "show", f"{task_id}.999")
    assert code == missing["code"] == 4 and f"error: {missing['message']}" in err
    # Another customer's (here the team's) job is not found, as one that does not exist
    assert _error(api("GET", f"/jobs/{job_id}", customer), 404)["message"] == \
        f"no job {job_id!r}"


def test_continue_retry_failed_and_reprioritize_are_operator_controls(api: Api) -> None:
    operator = api.token("ci", "--role", "operator", "--owner", "deploy-bot")
    viewer = api.token("dash", "--role", "viewer", "--owner", "watcher")
    task_id = _submit(api, operator)
    before = _kinds(api)
    # A viewer may not control a task: 403 for each, and nothing is written
    for verb, body in (("continue", None), ("retry-failed", None),
                       ("reprioritize", {"priority": "urgent"})):
        error = _error(api("POST", f"/tasks/{task_id}/{verb}", viewer, json=body), 403)
        assert error["message"] == f"role viewer may not call tasks.{verb}"
    assert _kinds(api) == before
    assert sql_rows(api.database_url, "SELECT priority FROM tasks")[0].priority == "normal"
    # An operator reprioritizes: recorded as the token's owner, the record follows
    moved = api("POST", f"/tasks/{task_id}/reprioritize", operator, json={"priority": "urgent"})
    assert moved.status_code == 200, moved.text
    assert moved.json()["by"] == "deploy-bot" and moved.json()["priority"] == "urgent"
    assert [r.operator for r in events(api.database_url, task_id, kinds=("reprioritize",))] \
        == ["deploy-bot"]
    assert sql_rows(api.database_url, "SELECT priority FROM tasks")[0].priority == "urgent"
    assert _error(api("POST", f"/tasks/{task_id}/reprioritize", operator,
                      json={"priority": "soonish"}), 400)["kind"] == "ValidationError"
    # retry-failed of a task with no failed job queues none
    retried = api("POST", f"/tasks/{task_id}/retry-failed", operator)
    assert retried.status_code == 200, retried.text
    assert retried.json()["count"] == 0 and retried.json()["by"] == "deploy-bot"
    # continue reaches the verb, which refuses a task without waves as the CLI does
    refused = _error(api("POST", f"/tasks/{task_id}/continue", operator), 400)
    code, _out, err = api.cli("tasks", "continue", str(task_id))
    assert code == refused["code"] and f"error: {refused['message']}" in err
    assert refused["message"] == f"task {task_id} is not rolled out in waves"
    # And an unknown task is the CLI's 404 for each
    for verb, body in (("continue", None), ("retry-failed", None),
                       ("reprioritize", {"priority": "bulk"})):
        assert _error(api("POST", f"/tasks/9999/{verb}", operator, json=body),
                      404) == MISSING_TASK


def test_resume_of_a_rollout_stopped_by_its_check_is_refused_as_the_cli_refuses_it(
        api: Api, redis_client: Any) -> None:
    from scheduler.queue.client import Queue
    from scheduler.queue.waves import move
    from tests.submit_support import KEYS

    operator = api.token("ci", "--role", "operator", "--owner", "deploy-bot")
    task_id = api.cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--waves", "1,2",
                             "--wave-check", "false")
    queue = Queue(redis_client, KEYS)
    assert move(queue, str(task_id), 1, ["running"], "checking", "wave-check")
    assert move(queue, str(task_id), 1, ["checking"], "stopped", "wave-stop", why="failed")
    before = queue.task_state(str(task_id))
    refused = _error(api("POST", f"/tasks/{task_id}/resume", operator), 409)
    assert refused["kind"] == "TaskNotActiveError"
    assert f"`fleetsched tasks continue {task_id}`" in refused["message"]
    code, _out, err = api.cli("tasks", "resume", str(task_id))
    assert code == refused["code"] == 2 and f"error: {refused['message']}" in err
    assert queue.task_state(str(task_id)) == before


def test_hosts_show_history_and_groups(api: Api) -> None:
    viewer = api.token("dash", "--role", "viewer")
    customer = api.token("acme", "--role", "customer-viewer", "--tenant", "acme")
    shown = api("GET", "/hosts/web-03", viewer)
    assert shown.status_code == 200, shown.text
    assert shown.json()["name"] == "web-03" and shown.json()["groups"] == ["web"]
    assert _error(api("GET", "/hosts/nope", viewer), 404) == {
        "code": 4, "kind": "NotFoundError", "message": "no host named 'nope'",
        "hint": "see `fleetsched hosts list`"}
    assert _error(api("GET", "/hosts/web-03", customer), 404)["message"] == \
        "no host named 'web-03'"
    # A host's history, newest first, paged: added, removed, added again
    for args in (("add", "db-01"), ("remove", "db-01"), ("add", "db-01", "--group", "web")):
        api.cli.ok("hosts", *args)
    first = api("GET", "/hosts/db-01/history", viewer, params={"limit": 2}).json()
    assert [e["kind"] for e in first["items"]] == ["host-add", "host-remove"]
    assert first["next_offset"] == 2 and {e["operator"] for e in first["items"]} == {"tester"}
    last = api("GET", "/hosts/db-01/history", viewer, params={"limit": 2, "offset": 2}).json()
    assert [e["kind"] for e in last["items"]] == ["host-add"] and last["next_offset"] is None
    assert _error(api("GET", "/hosts/nope/history", viewer), 404)["message"] == \
        "no host 'nope' and no event about it"
    assert _error(api("GET", "/hosts/db-01/history", customer), 404)["message"] == \
        "no host 'db-01' and no event about it"
    # A group's hosts are paged too, each row with its groups
    page = api("GET", "/hosts", viewer, params={"group": "web", "limit": 2, "offset": 1}).json()
    assert [(h["name"], h["groups"]) for h in page["items"]] == [("web-01", ["web"]),
                                                                 ("web-02", ["web"])]
    assert _error(api("GET", "/hosts", viewer, params={"group": "nope"}), 404)["message"] \
        == "no group named 'nope'"
    groups = api("GET", "/groups", viewer)
    assert groups.status_code == 200, groups.text
    web = next(g for g in groups.json()["items"] if g["name"] == "web")
    assert web["hosts"] == len(HOSTS) + 1
    assert _error(api("GET", "/groups", customer), 403)["kind"] == "ForbiddenError"


def test_a_window_admin_adds_and_assigns_windows_that_a_viewer_reads(api: Api) -> None:
    admin = api.token("win", "--role", "window-admin", "--owner", "ops-lead")
    operator = api.token("ci", "--role", "operator")
    viewer = api.token("dash", "--role", "viewer")
    window = {"name": "sun-night", "cron": "0 1 * * SUN", "duration": "3h",
              "tz": "Europe/Berlin"}
    # An operator may not add or assign a window: 403, nothing written
    assert _error(api("POST", "/windows", operator, json=window), 403)["message"] == \
        "role operator may not call windows.add"
    assert sql_rows(api.database_url, "SELECT name FROM windows") == []
    # A window admin adds it, recorded as the token's owner
    added = api("POST", "/windows", admin, json=window)
    assert added.status_code == 201, added.text
    assert added.json()["kind"] == "recurring" and added.json()["by"] == "ops-lead"
    assert ("window-add", "ops-lead") in _kinds(api)
    # A refused definition gets the CLI's message; an unknown key is refused
    bad = _error(api("POST", "/windows", admin, json={"name": "x", "cron": "0 1 * * SUN"}), 400)
    code, _out, err = api.cli("windows", "add", "x", "--cron", "0 1 * * SUN")
    assert code == bad["code"] and f"error: {bad['message']}" in err
    assert _error(api("POST", "/windows", admin, json={**window, "name": "y", "colour": 1}),
                  422)["code"] == 2
    # Assign: 403 for an operator, then by the admin, then 404s for unknown names
    before = _kinds(api)
    assert _error(api("POST", "/windows/sun-night/assign", operator, json={"groups": ["web"]}),
                  403)["message"] == "role operator may not call windows.assign"
    assert _kinds(api) == before
    assigned = api("POST", "/windows/sun-night/assign", admin, json={"groups": ["web"]})
    assert assigned.status_code == 200, assigned.text
    assert assigned.json()["count"] == 1 and assigned.json()["by"] == "ops-lead"
    assert ("window-assign", "ops-lead") in _kinds(api)
    assert _error(api("POST", "/windows/nope/assign", admin, json={"groups": ["web"]}),
                  404)["message"] == "no window named 'nope'"
    assert _error(api("POST", "/windows/sun-night/assign", admin, json={"hosts": ["nope"]}),
                  404)["message"] == "no host named 'nope'"
    # A viewer reads the list and the window; a customer token none of the team's windows
    listed = api("GET", "/windows", viewer)
    assert listed.status_code == 200 and [w["name"] for w in listed.json()["items"]] == \
        ["sun-night"]
    shown = api("GET", "/windows/sun-night", viewer).json()
    assert shown["name"] == "sun-night" and shown["tz"] == "Europe/Berlin" and shown["next"]
    assert _error(api("GET", "/windows/nope", viewer), 404) == {
        "code": 4, "kind": "NotFoundError", "message": "no window named 'nope'",
        "hint": "see `fleetsched windows list`"}
    customer = api.token("acme", "--role", "customer-viewer", "--tenant", "acme")
    assert api("GET", "/windows", customer).json()["items"] == []
    assert _error(api("GET", "/windows/sun-night", customer), 404)["message"] == \
        "no window named 'sun-night'"


def test_a_window_admin_pauses_and_resumes_schedules_that_a_viewer_reads(api: Api) -> None:
    api.cli.ok("schedules", "add", "nightly", "--cron", "0 3 * * *", "command", "-t",
               "group:web", "-p", "cmd=true", "--executor", "simulate")
    admin = api.token("win", "--role", "window-admin", "--owner", "ops-lead")
    operator = api.token("ci", "--role", "operator")
    viewer = api.token("dash", "--role", "viewer")
    listed = api("GET", "/schedules", viewer)
    assert listed.status_code == 200 and [s["name"] for s in listed.json()["items"]] == \
        ["nightly"]
    assert api("GET", "/schedules/nightly", viewer).json()["name"] == "nightly"
    assert _error(api("GET", "/schedules/nope", viewer), 404) == {
        "code": 4, "kind": "NotFoundError", "message": "no schedule named 'nope'",
        "hint": "see `fleetsched schedules list`"}
    # An operator may not pause it: 403, nothing written
    before = _kinds(api)
    for verb in ("pause", "resume"):
        assert _error(api("POST", f"/schedules/nightly/{verb}", operator), 403)["message"] == \
            f"role operator may not call schedules.{verb}"
    assert _kinds(api) == before
    # A window admin pauses and resumes it, recorded as the token's owner
    paused = api("POST", "/schedules/nightly/pause", admin)
    assert paused.status_code == 200, paused.text
    assert paused.json()["changed"] is True and paused.json()["by"] == "ops-lead"
    resumed = api("POST", "/schedules/nightly/resume", admin)
    assert resumed.status_code == 200, resumed.text
    assert resumed.json()["changed"] is True and resumed.json()["next"]
    assert [k for k in _kinds(api) if k[0].startswith("schedule-")][-2:] == [
        ("schedule-pause", "ops-lead"), ("schedule-resume", "ops-lead")]
    for verb in ("pause", "resume"):
        assert _error(api("POST", f"/schedules/nope/{verb}", admin), 404)["message"] == \
            "no schedule named 'nope'"


def test_the_report_is_served_as_json_and_as_csv(api: Api) -> None:
    operator = api.token("ci", "--role", "operator", "--owner", "deploy-bot")
    viewer = api.token("dash", "--role", "viewer")
    task_id = _submit(api, operator)
    reply = api("GET", "/report", viewer, params={"since": "1d"})
    assert reply.status_code == 200, reply.text
    data = reply.json()
    assert data["totals"]["jobs"] == len(HOSTS)
    assert {j["operator"] for j in data["jobs"]} == {"deploy-bot"}
    assert [t["task"] for t in data["tasks"]] == [task_id]
    # CSV: one row per job, asked by ?format=csv or by the Accept header
    for params, headers in (({"format": "csv"}, {}), ({}, {"Accept": "text/csv"})):
        as_csv = api("GET", "/report", viewer, params=params, headers=headers)
        assert as_csv.status_code == 200 and as_csv.headers["content-type"].startswith(
            "text/csv")
        rows = list(csv.DictReader(io.StringIO(as_csv.text)))
        assert sorted(r["host"] for r in rows) == HOSTS
    # A bad filter is refused with the verb's line; an unknown group is a 404
    assert "neither an ISO 8601 time nor a duration" in _error(
        api("GET", "/report", viewer, params={"since": "lots"}), 400)["message"]
    assert _error(api("GET", "/report", viewer, params={"group": "nope"}), 404)["message"] == \
        "no group named 'nope'"
    customer = api.token("acme", "--role", "customer-viewer", "--tenant", "acme")
    assert _error(api("GET", "/report", customer), 403)["kind"] == "ForbiddenError"


def test_the_openapi_document_lists_every_endpoint(api: Api) -> None:
    paths = api("GET", "/openapi.json").json()["paths"]
    expected = {
        "/tasks/{task_id}/output": "get", "/tasks/{task_id}/continue": "post",
        "/tasks/{task_id}/retry-failed": "post", "/tasks/{task_id}/reprioritize": "post",
        "/jobs/{job_id}": "get", "/hosts/{name}": "get", "/hosts/{name}/history": "get",
        "/groups": "get", "/windows": "post", "/windows/{name}": "get",
        "/windows/{name}/assign": "post", "/schedules": "get", "/schedules/{name}": "get",
        "/schedules/{name}/pause": "post", "/schedules/{name}/resume": "post",
        "/report": "get"}
    missing = [p for p, method in expected.items() if method not in paths.get(f"/api/v1{p}", {})]
    assert not missing
    assert "get" in paths["/api/v1/windows"]
