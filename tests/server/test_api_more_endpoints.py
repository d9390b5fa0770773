"""The rest of the operator verbs over HTTP, each a thin shell over a verb, on a real
``fleetsched server``: a task's jobs a page at a time, the task list's state filter paged in
SQL, hosts check, import and export, group limits, windows unassign and remove, freezes,
schedules add and remove, and the report paged. Each change is refused to a role that may not
(403, nothing written) and recorded as the token's owner when allowed."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tests.server.conftest import HOSTS, Api
from tests.submit_support import sql_rows


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
    operator = api.token("ci", "--role", "operator")
    viewer = api.token("dash", "--role", "viewer")
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
    customer = api.token("acme", "--role", "customer-viewer", "--tenant", "acme")
    assert _error(api("GET", f"/tasks/{task_id}/jobs", customer), 403)["kind"] == \
        "ForbiddenError"


def test_the_task_lists_state_filter_is_paged_in_sql_so_no_page_is_short(api: Api) -> None:
    operator = api.token("ci", "--role", "operator")
    viewer = api.token("dash", "--role", "viewer")
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
