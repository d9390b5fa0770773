"""The web console's authorization matrix: every page and form the app registers under ``/ui``,
asked on one real ``fleetsched server`` by a session of every role (signed in through the
console's form with a token of that role; the customer roles for tenant acme), and by acme's
roles also on globex's objects. Each answer is what the table says: allowed (a page, a
redirect after a form, or the verb's own refusal of the state, after the role check), 403
(the role may not), or 404 (another customer's object, as if it did not exist). The routes come
from the app: a page added without a row here fails, as in the API's matrix
(tests/server/test_authorization_matrix.py, whose world of objects this one shares).

Then without a session every page sends the browser to sign in, and every form posted with a
wrong CSRF token by a role that may post it is refused (403) and changes nothing.

Both tests ask the module's server (tests/server/console/conftest.py), on one world built
there: the second proves its forms change nothing against what it finds when it begins."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server.conftest import Api
from tests.server.console.conftest import Browsing, Console
from tests.server.test_authorization_matrix import (
    APPROVERS,
    CONTROL,
    CUSTOMER,
    EVERY,
    TEAM,
    Scope,
    World,
    build_world,
    console_page,
    registered_routes,
)
from tests.submit_support import sql_snapshot

Request = dict[str, Any]  # "path": the path's parameters, "data": a form's fields, "params"
PAGE = frozenset({200})
POSTED = frozenset({303})  # a form's answer: back to a page


@dataclass(frozen=True)
class Row:
    """One route's expectation (as the API matrix's ``Row``)."""

    allowed: frozenset[str]
    request: Callable[[World, Scope], Request] = lambda world, scope: {}
    ok: frozenset[int] = PAGE
    foreign: bool = False
    anyone: frozenset[int] | None = None  # answered alike with or without a session
    stream: bool = False
    last: bool = False  # ends the session: asked on a session of its own


def _task(world: World, scope: Scope) -> Request:
    return {"path": {"task_id": world.tasks[scope]}}


def _control(world: World, scope: Scope) -> Request:
    return {"path": {"task_id": world.tasks["control" if scope == "team" else scope]}}


def _job(world: World, scope: Scope) -> Request:
    return {"path": {"job_id": world.jobs[scope]}}


def _host(world: World, scope: Scope) -> Request:
    return {"path": {"name": {"team": "web-01", "acme": "acme-01", "globex": "globex-01"}[scope]}}


def _window(world: World, scope: Scope) -> Request:
    return {"path": {"name": {"team": "w-team", "acme": "w-acme", "globex": "w-globex"}[scope]}}


def _decision(team: str, acme: str, **data: str) -> Callable[[World, Scope], Request]:
    def request(world: World, scope: Scope) -> Request:
        name = {"team": team, "acme": acme, "globex": "w-globex"}[scope]
        return {"path": {"name": name}, "data": data}

    return request


def _revoke(world: World, scope: Scope) -> Request:
    if scope == "team":  # a standing approval of the team's to revoke, for each call
        world.cli.ok("windows", "approve", "w-approve", operator="approver-at-shell")
    return {"path": {"name": {"team": "w-approve", "acme": "w-acme", "globex": "w-globex"}[scope]}}


FORM = {"action": "command", "target": "web-01", "params": "cmd=true", "in": "1h"}
MATRIX: dict[tuple[str, str], Row] = {
    ("GET", "/"): Row(EVERY, anyone=frozenset({303})),
    ("GET", "/ui/login"): Row(EVERY, anyone=PAGE),
    ("POST", "/ui/login"): Row(EVERY, anyone=frozenset({400})),  # no sign-in form's value
    ("GET", "/ui/static"): Row(EVERY, anyone=frozenset({307, 404})),  # the stylesheet's folder
    ("POST", "/ui/logout"): Row(EVERY, ok=POSTED, last=True),
    ("GET", "/ui/"): Row(EVERY, ok=frozenset({200, 303})),  # a customer: to its own view
    ("GET", "/ui/fleet/live"): Row(TEAM, stream=True),
    ("GET", "/ui/customer"): Row(EVERY),
    ("GET", "/ui/tasks"): Row(EVERY),
    ("GET", "/ui/tasks/{task_id}"): Row(EVERY, _task, foreign=True),
    ("GET", "/ui/tasks/{task_id}/live"): Row(EVERY, _task, foreign=True, stream=True),
    ("GET", "/ui/jobs/{job_id}"): Row(EVERY, _job, foreign=True),
    ("GET", "/ui/jobs/{job_id}/live"): Row(EVERY, _job, foreign=True, stream=True),
    **{("GET", f"/ui/tasks/{{task_id}}/{verb}"): Row(CONTROL, _control, foreign=True)
       for verb in ("cancel", "pause", "resume", "retry-failed", "continue")},
    # the verb's own refusal of the task's state comes after the role check
    **{("POST", f"/ui/tasks/{{task_id}}/{verb}"): Row(
        CONTROL, _control, frozenset({303, 400, 409}), foreign=True)
       for verb in ("cancel", "pause", "resume", "retry-failed", "continue")},
    ("GET", "/ui/submit"): Row(CONTROL),
    ("POST", "/ui/submit/plan"): Row(CONTROL, lambda world, scope: {"data": FORM}),
    ("POST", "/ui/submit"): Row(CONTROL, lambda world, scope: {"data": {
        **FORM, "idempotency_key": world.fresh("key")}}, POSTED),
    ("GET", "/ui/calendar"): Row(EVERY),
    ("GET", "/ui/windows/{name}"): Row(EVERY, _window, foreign=True),
    ("POST", "/ui/windows/{name}/approve"): Row(
        APPROVERS, _decision("w-approve", "w-acme", comment="fine"), frozenset({303, 409}),
        foreign=True),
    ("POST", "/ui/windows/{name}/deny"): Row(
        APPROVERS, _decision("w-deny", "w-acme-deny", comment="not in the sales week"),
        frozenset({303, 409}), foreign=True),
    ("POST", "/ui/windows/{name}/revoke"): Row(APPROVERS, _revoke, frozenset({303, 409}),
                                               foreign=True),
    ("GET", "/ui/hosts"): Row(EVERY),
    ("GET", "/ui/hosts/{name}"): Row(EVERY, _host, foreign=True),
    ("GET", "/ui/audit"): Row(TEAM),
    ("GET", "/ui/audit.csv"): Row(TEAM),
    ("GET", "/ui/audit.json"): Row(TEAM),
}


@pytest.fixture(scope="module")
def world(shared_console: tuple[Api, Path], tmp_path_factory: pytest.TempPathFactory) -> World:
    """The team's hosts, acme's and globex's, a task and a window of each, on the module's
    server."""
    return build_world(shared_console[0], tmp_path_factory.mktemp("world"))


def _call(browsing: Browsing | None, root: str, method: str, template: str, request: Request,
          row: Row, *, csrf: str | None = None) -> httpx.Response:
    path = template.format(**request.get("path", {}))
    data = request.get("data", {})
    if browsing is None:
        return httpx.request(method, f"{root}{path}", data=data or None, timeout=30,
                             follow_redirects=False)
    client = browsing.client
    if method == "POST":
        fields = {"csrf_token": browsing.csrf if csrf is None else csrf, **data}
        return client.post(f"{root}{path}", data=fields)
    if not row.stream:
        return client.get(f"{root}{path}", params=request.get("params"))
    with client.stream("GET", f"{root}{path}") as reply:
        reply.read() if reply.status_code >= 400 else None
        return reply


def test_every_page_answers_every_role_as_the_matrix_says(console: Console,
                                                          world: World) -> None:
    # Given the pages the app registers, each with its row in the table
    routes = {r for r in registered_routes() if console_page(r[1])}
    assert routes - set(MATRIX) == set(), "console routes without a row in MATRIX"
    assert set(MATRIX) - routes == set(), "rows in MATRIX for routes the app does not serve"
    # And one server with the team's hosts, acme's and globex's, a task and a window of each
    tokens = {role: console.token(f"console-{role}", "--role", role,
                                      *(["--tenant", "acme"] if role in CUSTOMER else []))
              for role in sorted(EVERY)}
    sessions = {role: console.signed(token) for role, token in tokens.items()}
    wrong: list[str] = []
    for (method, template), row in sorted(MATRIX.items(), key=lambda item: item[1].last):
        if row.anyone is not None:
            continue
        for role in sorted(EVERY):
            scope = "acme" if role in CUSTOMER else "team"
            browsing = console.signed(tokens[role]) if row.last else sessions[role]
            reply = _call(browsing, console.root, method, template, row.request(world, scope),
                          row)
            expected = row.ok if role in row.allowed else frozenset({403})
            if reply.status_code not in expected:
                wrong.append(f"{method} {template} as {role}: {reply.status_code} "
                             f"{_line(reply)}, expected {sorted(expected)}")
            if role in CUSTOMER and row.foreign:
                # another customer's object: 404 where the role may call the verb, else 403
                reply = _call(browsing, console.root, method, template,
                              row.request(world, "globex"), row)
                expected = frozenset({404 if role in row.allowed else 403})
                if reply.status_code not in expected:
                    wrong.append(f"{method} {template} as {role} on globex's: "
                                 f"{reply.status_code} {_line(reply)}")
    # Without a session: every page and form sends the browser to sign in first
    for (method, template), row in sorted(MATRIX.items()):
        reply = _call(None, console.root, method, template, row.request(world, "team"), row)
        expected = row.anyone if row.anyone is not None else frozenset({303})
        if reply.status_code not in expected:
            wrong.append(f"{method} {template} without a session: {reply.status_code}")
        elif row.anyone is None and not reply.headers["location"].startswith("/ui/login?next="):
            wrong.append(f"{method} {template} without a session: to "
                         f"{reply.headers['location']}")
    assert wrong == []


def test_every_form_posted_with_a_wrong_csrf_token_is_refused_and_changes_nothing(
        console: Console, world: World) -> None:
    admin = console.as_role("admin")
    approver = console.as_role("customer-approver", tenant="acme")
    posts = [(method, template, row, browsing, role, row.request(world, scope))
             for (method, template), row in sorted(MATRIX.items())
             if method == "POST" and row.anyone is None
             for browsing, role, scope in ((admin, "admin", "team"),
                                           (approver, "customer-approver", "acme"))
             if role in row.allowed]
    before = sql_snapshot(console.api.database_url)
    wrong: list[str] = []
    for method, template, row, browsing, role, request in posts:
        for csrf in ("", "x" * 43, approver.csrf if browsing is admin else admin.csrf):
            reply = _call(browsing, console.root, method, template, request, row, csrf=csrf)
            if reply.status_code != 403 or "CSRF" not in reply.text:
                wrong.append(f"{method} {template} as {role} with csrf {csrf[:6]!r}: "
                             f"{reply.status_code} {_line(reply)}")
    assert wrong == []
    # Nothing was written: no task, no decision, no session ended
    after = sql_snapshot(console.api.database_url)
    assert {t: rows for t, rows in after.items() if t != "api_tokens"} == \
        {t: rows for t, rows in before.items() if t != "api_tokens"}
    assert admin.get("/ui/").status_code == 200


def _line(reply: httpx.Response) -> str:
    import re

    found = re.search(r'class="problem"[^>]*>([^<]*)<', reply.text)
    return found.group(1) if found else reply.text[:160].replace("\n", " ")
