"""The authorization matrix (issue 28 section 3): every endpoint the app registers, called on one
real ``fleetsched server`` with a token of every role, and with the customer roles (tenant acme)
also on the other customer's (globex) objects. Each answer is what the table says: allowed
(2xx, or the verb's own refusal of the state, which comes after the role check), 403 (the role
may not), or 404 (another customer's object: as if it did not exist, so existence does not
leak). The routes come from the app itself: an endpoint added without a row here fails.

Then what the customer is shown: lists, counts and a task's detail hold acme's rows only, and
nothing any acme token reads names globex. Those tests only read, so they share one server and
world (``read_world``, the module's; their tokens have names of their own); the matrix's test
writes (it cancels, approves, removes) and builds a world of its own."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from scheduler.config import Settings
from scheduler.server.app import PREFIX, create_app
from tests.server.conftest import CLIENT_TLS, Api, shared_api
from tests.submit_support import Cli
from tests.tenants_support import customers_ini

TEAM = frozenset({"viewer", "operator", "window-admin", "admin"})
CUSTOMER = frozenset({"customer-viewer", "customer-approver"})
EVERY = TEAM | CUSTOMER
CONTROL = frozenset({"operator", "admin"})
WINDOWS = frozenset({"window-admin", "admin"})
ADMIN = frozenset({"admin"})
APPROVERS = WINDOWS | {"customer-approver"}
APPROVED = ("w-approve", "w-deny", "w-acme", "w-acme-deny")  # windows that need approval
# windows, schedules, templates, hosts and groups made to be removed: one per call of a
# removal (a call per role, and one without a token)
DOOMED = len(EVERY) + 1
OK = frozenset({200, 201})

CUSTOMERS_INI = (customers_ini(acme=("acme-01", "acme-02"), globex=("globex-01", "globex-02"))
                 + "[customers:children]\nacme\nglobex\n")


@dataclass
class World:
    """The objects the calls name: the team's, acme's and globex's."""

    cli: Cli
    tasks: dict[str, int] = field(default_factory=dict)  # team, acme, globex, mixed
    jobs: dict[str, str] = field(default_factory=dict)  # team, acme, globex
    counters: dict[str, itertools.count[int]] = field(default_factory=dict)

    def fresh(self, prefix: str) -> str:
        """``prefix-0``, ``prefix-1`` ...: a new name, or the next object made to be removed."""
        return f"{prefix}-{next(self.counters.setdefault(prefix, itertools.count()))}"


Scope = str  # "team" (a team role's own objects), "acme" (a customer's own), "globex" (foreign)
Request = dict[str, Any]  # path parameters under "path", httpx arguments beside them


@dataclass(frozen=True)
class Row:
    """One endpoint's expectation: the roles that may call it, the request per scope, and the
    answers that mean the call got past the role check (``ok``)."""

    allowed: frozenset[str]
    request: Callable[[World, Scope], Request] = lambda world, scope: {}
    ok: frozenset[int] = OK
    foreign: bool = False  # names an object, so a customer is asked about globex's too
    # Answered alike to every caller, token or none (the public documents, the login flow,
    # which tests/server/test_oidc.py drives): asked once, without a token, with this answer
    anyone: frozenset[int] | None = None
    stream: bool = False  # Server-Sent Events: the status is read, then the stream closed
    outside: bool = False  # served outside /api/v1


def _task(key: str = "task_id") -> Callable[[World, Scope], Request]:
    return lambda world, scope: {"path": {key: world.tasks[scope]}}


def _host(world: World, scope: Scope) -> Request:
    return {"path": {"name": {"team": "web-01", "acme": "acme-01", "globex": "globex-01"}[scope]}}


def _window(world: World, scope: Scope) -> Request:
    return {"path": {"name": {"team": "w-team", "acme": "w-acme", "globex": "w-globex"}[scope]}}


def _output(world: World, scope: Scope) -> Request:
    host = {"team": "web-01", "acme": "acme-01", "globex": "globex-01"}[scope]
    return {"path": {"task_id": world.tasks[scope]}, "params": {"host": host}}


def _control(world: World, scope: Scope) -> Request:
    # the team's control task for every call: a second cancel is the state's 409, not a 403
    return {"path": {"task_id": world.tasks["control" if scope == "team" else scope]}}


def _revoke(world: World, scope: Scope) -> Request:
    if scope == "team":  # a standing approval of the team's to revoke, for each call
        world.cli.ok("windows", "approve", "w-approve", operator="approver-at-shell")
    return {"path": {"name": {"team": "w-approve", "acme": "w-acme",  # acme approved it
                              "globex": "w-globex"}[scope]}}


def _freeze(world: World, scope: Scope) -> Request:
    # a customer's freeze covers its own hosts only: globex's group is not found for acme
    covered = {"team": {"hosts": ["web-01"]}, "acme": {"groups": ["acme"]},
               "globex": {"groups": ["globex"]}}[scope]
    return {"json": {"name": world.fresh("freeze"), "start": "2031-01-01T00:00",
                     "end": "2031-01-02T00:00", **covered}}


def _new_window(world: World, scope: Scope) -> Request:
    return {"json": {"name": world.fresh("w-new"), "cron": "0 1 * * *", "duration": "1h"}}


def _doomed_token(world: World) -> int:
    """A token made to be revoked, one per call."""
    code, _out, err = world.cli("tokens", "create", world.fresh("t-doomed"), "--role", "viewer")
    assert code == 0, err
    return int(err.split()[1])  # "token <id> (<name>) acts as ..."


def _template(world: World, scope: Scope) -> Request:
    return {"path": {"name": {"team": "t-team", "acme": "t-acme", "globex": "t-globex"}[scope]}}


def template_file(target: str) -> str:
    """A saved template's file (``fleetsched templates add``) running on ``target``."""
    return ("parameters:\n  cmd: {default: \"true\"}\naction: command\n"
            f"target: {target}\nparams: {{cmd: \"{{param.cmd}}\"}}\nin: 1h\n")


SUBMIT = {"action": "command", "target": "web-01", "params": {"cmd": "true"}, "in": "1h"}
MATRIX: dict[tuple[str, str], Row] = {
    ("GET", "/openapi.json"): Row(EVERY, anyone=frozenset({200})),
    ("GET", "/metrics"): Row(EVERY, anyone=frozenset({200}), outside=True),
    # single sign-on is not configured here: login says so, the rest want a session cookie
    ("GET", "/auth/login"): Row(EVERY, anyone=frozenset({400})),
    ("GET", "/auth/callback"): Row(EVERY, anyone=frozenset({401})),
    ("GET", "/auth/session"): Row(EVERY, anyone=frozenset({401})),
    ("POST", "/auth/logout"): Row(EVERY, anyone=frozenset({401})),
    ("GET", "/tenants"): Row(TEAM),
    ("POST", "/tenants/{name}"): Row(ADMIN, lambda world, scope: {
        "path": {"name": "acme"}, "json": {"approval_required": False}}),
    ("GET", "/status"): Row(EVERY),
    ("GET", "/status/followers"): Row(TEAM),
    ("GET", "/status/queue"): Row(TEAM),  # top's frame: every customer's tasks, the workers
    ("GET", "/tasks"): Row(EVERY),
    ("GET", "/tasks/{task_id}"): Row(EVERY, _task(), foreign=True),
    ("GET", "/tasks/{task_id}/jobs"): Row(EVERY, _task(), foreign=True),
    # tasks watch's numbers, read from the queue: every customer's jobs counted
    ("GET", "/tasks/{task_id}/progress"): Row(EVERY, _task(), foreign=True),
    # a customer follows and reads its own hosts' jobs only (output where the task says so)
    ("GET", "/tasks/{task_id}/events"): Row(EVERY, _task(), foreign=True, stream=True),
    ("GET", "/tasks/{task_id}/output"): Row(EVERY, _output, foreign=True),
    # tasks output --follow: the same rule as the output, its lines as they are printed
    ("GET", "/tasks/{task_id}/output/stream"): Row(EVERY, _output, foreign=True, stream=True),
    ("GET", "/jobs/{job_id}"): Row(
        EVERY, lambda world, scope: {"path": {"job_id": world.jobs[scope]}}, foreign=True),
    ("POST", "/tasks"): Row(CONTROL, lambda world, scope: {"json": SUBMIT}),
    **{("POST", f"/tasks/{{task_id}}/{verb}"): Row(CONTROL, _control, frozenset({200, 409}),
                                                   foreign=True)
       for verb in ("cancel", "pause", "resume", "retry-failed")},
    # not rolled out in waves: the verb's own 400, after the role check
    ("POST", "/tasks/{task_id}/continue"): Row(CONTROL, _control, frozenset({400}),
                                               foreign=True),
    ("POST", "/tasks/{task_id}/reprioritize"): Row(
        CONTROL, lambda world, scope: {**_control(world, scope), "json": {"priority": "bulk"}},
        frozenset({200, 409}), foreign=True),
    ("GET", "/hosts"): Row(EVERY),
    ("GET", "/hosts/{name}"): Row(EVERY, _host, foreign=True),
    ("GET", "/hosts/{name}/history"): Row(EVERY, _host, foreign=True),
    ("GET", "/groups"): Row(TEAM),
    ("GET", "/windows"): Row(EVERY),
    ("GET", "/windows/{name}"): Row(EVERY, _window, foreign=True),
    ("GET", "/windows/{name}/next"): Row(EVERY, _window, foreign=True),
    ("PATCH", "/windows/{name}"): Row(WINDOWS, lambda world, scope: {
        **_window(world, scope), "json": {"description": world.fresh("edit")}}),
    ("POST", "/windows"): Row(WINDOWS, _new_window),
    ("POST", "/windows/{name}/assign"): Row(
        WINDOWS, lambda world, scope: {**_window(world, scope), "json": {"hosts": ["web-02"]}},
        foreign=True),
    # a customer-approver decides for its own customer: another's window is not found
    ("POST", "/windows/{name}/approve"): Row(
        APPROVERS, lambda world, scope: {"path": {"name": "w-approve" if scope == "team"
                                                  else _window(world, scope)["path"]["name"]}},
        foreign=True),
    ("POST", "/windows/{name}/deny"): Row(
        APPROVERS, lambda world, scope: {
            "path": {"name": {"team": "w-deny", "acme": "w-acme-deny", "globex": "w-globex"}[
                scope]}, "json": {"comment": "not in the sales week"}}, foreign=True),
    ("POST", "/windows/{name}/revoke"): Row(APPROVERS, _revoke, foreign=True),
    ("POST", "/windows/freezes"): Row(APPROVERS, _freeze, foreign=True),
    ("GET", "/schedules"): Row(TEAM),
    ("GET", "/schedules/{name}"): Row(TEAM, lambda world, scope: {"path": {"name": "nightly"}}),
    ("GET", "/schedules/{name}/next"): Row(
        TEAM, lambda world, scope: {"path": {"name": "nightly"}}),
    ("POST", "/schedules/{name}/pause"): Row(
        WINDOWS, lambda world, scope: {"path": {"name": "nightly"}}),
    ("POST", "/schedules/{name}/resume"): Row(
        WINDOWS, lambda world, scope: {"path": {"name": "nightly"}}),
    ("GET", "/report"): Row(TEAM),
    # the rest of the operator verbs: the team's
    ("POST", "/hosts/check"): Row(ADMIN, lambda world, scope: {"json": {
        "target": "web-05", "timeout": "1s", "limit": 1}}),
    ("POST", "/hosts/import"): Row(ADMIN, lambda world, scope: {"json": {
        "name": f"{world.fresh('extra')}.ini", "inventory": "[extra]\nextra-01\n"}}),
    ("GET", "/hosts/export"): Row(ADMIN),
    ("POST", "/groups/{name}/limit"): Row(
        ADMIN, lambda world, scope: {"path": {"name": "web"}, "json": {"max_busy": "3"}}),
    ("DELETE", "/groups/{name}"): Row(
        ADMIN, lambda world, scope: {"path": {"name": world.fresh("g-doomed")}}),
    ("POST", "/hosts"): Row(ADMIN, lambda world, scope: {"json": {
        "name": world.fresh("added"), "groups": ["web"], "vars": {"rack": "r1"}}}),
    ("DELETE", "/hosts/{name}"): Row(
        ADMIN, lambda world, scope: {"path": {"name": world.fresh("h-doomed")}}),
    ("GET", "/tokens"): Row(ADMIN),
    ("POST", "/tokens"): Row(ADMIN, lambda world, scope: {"json": {
        "name": world.fresh("t-new"), "role": "viewer", "expires": "1d"}}),
    ("DELETE", "/tokens/{token_id}"): Row(ADMIN, lambda world, scope: {
        "path": {"token_id": _doomed_token(world)}}),
    ("POST", "/windows/{name}/unassign"): Row(  # a spare host of w-team's for each call
        WINDOWS, lambda world, scope: {**_window(world, scope),
                                       "json": {"hosts": [world.fresh("spare")]}}),
    ("DELETE", "/windows/{name}"): Row(
        WINDOWS, lambda world, scope: {"path": {"name": world.fresh("w-doomed")}}),
    ("POST", "/schedules"): Row(WINDOWS, lambda world, scope: {"json": {
        "name": world.fresh("s-new"), "cron": "0 4 * * *",
        "task": {"action": "command", "target": "group:web", "params": {"cmd": "true"}}}}),
    ("DELETE", "/schedules/{name}"): Row(
        WINDOWS, lambda world, scope: {"path": {"name": world.fresh("s-doomed")}}),
    # templates: a customer sees its own (another's is not found); runs need a role that may
    ("GET", "/templates"): Row(EVERY),
    ("GET", "/templates/{name}"): Row(EVERY, _template, foreign=True),
    ("POST", "/templates/{name}/run"): Row(
        CONTROL, lambda world, scope: {**_template(world, scope),
                                       "json": {"params": {}, "dry_run": True}}, foreign=True),
    ("POST", "/templates"): Row(CONTROL, lambda world, scope: {"json": {
        "name": world.fresh("t-new"), "file": template_file("group:web")}}),
    ("DELETE", "/templates/{name}"): Row(
        CONTROL, lambda world, scope: {"path": {"name": world.fresh("t-doomed")}}),
}


def registered_routes() -> set[tuple[str, str]]:
    """Every (method, path) the app serves, read from its routes (included routers walked)."""
    app = create_app(Settings())
    out: set[tuple[str, str]] = set()

    def walk(routes: Iterable[Any]) -> None:
        for route in routes:
            if hasattr(route, "effective_route_contexts"):  # FastAPI's included router
                walk(route.effective_route_contexts())
            elif hasattr(route, "path"):
                out.update((m, route.path) for m in getattr(route, "methods", None) or {"GET"}
                           if m != "HEAD")
            else:
                raise AssertionError(f"a route this test cannot read: {route!r}")

    walk(app.routes)
    return out


def console_page(path: str) -> bool:
    """Whether ``path`` is the web console's (``/`` and ``/ui...``: pages for a session)."""
    return path == "/" or path == "/ui" or path.startswith("/ui/")


def _call(api: Api, method: str, template: str, token: str | None, request: Request,
          row: Row) -> Any:
    path = template.format(**request.get("path", {}))
    args = {k: v for k, v in request.items() if k != "path"}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    base = api.base.removesuffix(PREFIX) if row.outside else api.base
    if not row.stream:
        return httpx.request(method, f"{base}{path}", headers=headers, timeout=30,
                             follow_redirects=False, verify=CLIENT_TLS, **args)
    with httpx.stream(method, f"{base}{path}", headers=headers, timeout=30, verify=CLIENT_TLS,
                      **args) as reply:
        if reply.status_code >= 400:
            reply.read()  # an error is JSON, not a stream: its text for the message
        return reply


def build_world(api: Api, tmp_path: Path) -> World:
    """The team's, acme's and globex's hosts, tasks, windows and schedule (the console's matrix,
    tests/server/console/test_matrix.py, builds the same)."""
    cli = api.cli
    (tmp_path / "customers.ini").write_text(CUSTOMERS_INI)
    cli.ok("hosts", "import", str(tmp_path / "customers.ini"))
    world = World(cli)
    for scope, target in (("team", "group:web"), ("acme", "group:acme"),
                          ("globex", "group:globex"), ("mixed", "acme-01,globex-01,web-01"),
                          ("control", "web-03")):
        world.tasks[scope] = cli.submit("command", "--target", target, "--param", "cmd=true",
                                        "--in", "1h")
    world.jobs = {"team": f"{world.tasks['team']}.0", "acme": f"{world.tasks['acme']}.0",
                  "globex": f"{world.tasks['globex']}.0"}
    for name, assign in (("w-team", ["--group", "web"]), ("w-acme", ["--group", "acme"]),
                         ("w-acme-deny", ["--group", "acme"]),
                         ("w-globex", ["--host", "globex-01"]),
                         ("w-customers", ["--group", "customers"]),
                         ("w-mixed", ["--host", "acme-01", "--host", "globex-01"]),
                         ("w-approve", ["--host", "web-04"]), ("w-deny", ["--host", "web-04"])):
        cli.ok("windows", "add", name, "--cron", "0 2 * * *", "--duration", "2h",
               *(["--requires-approval"] if name in APPROVED else []))
        cli.ok("windows", "assign", name, *assign)
    cli.ok("schedules", "add", "nightly", "--cron", "0 3 * * *", "command", "-t", "group:web",
           "-p", "cmd=true")
    for name, target, tenant in (("t-team", "group:web", []),
                                 ("t-acme", "group:acme", ["--tenant", "acme"]),
                                 ("t-globex", "group:globex", ["--tenant", "globex"]),
                                 *((f"t-doomed-{n}", "group:web", []) for n in range(DOOMED))):
        (tmp_path / f"{name}.yaml").write_text(template_file(target))
        cli.ok("templates", "add", name, "--file", str(tmp_path / f"{name}.yaml"), *tenant)
    for n in range(DOOMED):
        cli.ok("windows", "add", f"w-doomed-{n}", "--cron", "0 2 * * *", "--duration", "1h")
        cli.ok("schedules", "add", f"s-doomed-{n}", "--cron", "0 3 * * *", "command", "-t",
               "group:web", "-p", "cmd=true")
        cli.ok("hosts", "add", f"spare-{n}", "--group", f"g-doomed-{n}")
        cli.ok("hosts", "add", f"h-doomed-{n}")
    cli.ok("windows", "assign", "w-team",
           *[arg for n in range(DOOMED) for arg in ("--host", f"spare-{n}")])
    return world


NAMES = itertools.count(1)  # tokens' names on the shared server: each test's its own


@pytest.fixture(scope="module")
def read_world(tmp_path_factory: pytest.TempPathFactory,
               api_record: Path) -> Iterator[tuple[Api, World]]:
    """One server and world for the tests that only read them."""
    tmp = tmp_path_factory.mktemp("world")
    with shared_api(tmp, api_record) as api:
        yield api, build_world(api, tmp)


def test_every_endpoint_answers_every_role_as_the_matrix_says(api: Api, tmp_path: Path) -> None:
    # Given the endpoints the app registers, each with its row in the table
    routes = {(m, p.removeprefix(PREFIX)) for m, p in registered_routes()
              if not console_page(p)}  # the web console's: tests/server/console/test_matrix.py
    assert routes - set(MATRIX) == set(), "endpoints without a row in MATRIX"
    assert set(MATRIX) - routes == set(), "rows in MATRIX for endpoints the app does not serve"
    # And one server with the team's hosts, acme's and globex's, a task and a window of each
    world = build_world(api, tmp_path)
    tokens = {role: api.token(role, "--role", role,
                              *(["--tenant", "acme"] if role in CUSTOMER else []))
              for role in sorted(EVERY)}
    wrong: list[str] = []
    for (method, template), row in sorted(MATRIX.items()):
        if row.anyone is not None:
            continue
        for role, token in tokens.items():
            scope = "acme" if role in CUSTOMER else "team"
            reply = _call(api, method, template, token, row.request(world, scope), row)
            expected = row.ok if role in row.allowed else frozenset({403})
            if reply.status_code not in expected:
                wrong.append(f"{method} {template} as {role}: {reply.status_code} "
                             f"{reply.text[:200]}, expected {sorted(expected)}")
            if role in CUSTOMER and row.foreign:
                # When a customer names the other customer's object: 404 where it may call the
                # verb (as for an object that does not exist), 403 where it may not
                reply = _call(api, method, template, token, row.request(world, "globex"), row)
                expected = frozenset({404 if role in row.allowed else 403})
                if reply.status_code not in expected:
                    wrong.append(f"{method} {template} as {role} on globex's: "
                                 f"{reply.status_code} {reply.text[:200]}")
    # Last, without a token: 401 (429 once this address failed too often in a minute), but for
    # the routes answered alike to anyone, asked first
    def first(item: tuple[tuple[str, str], Row]) -> bool:
        return item[1].anyone is None or 401 in item[1].anyone

    for (method, template), row in sorted(MATRIX.items(), key=first):
        expected = {401} if row.anyone is None else set(row.anyone)
        reply = _call(api, method, template, None, row.request(world, "team"), row)
        if reply.status_code not in expected | ({429} if 401 in expected else set()):
            wrong.append(f"{method} {template} without a token: {reply.status_code}")
    assert wrong == []


@pytest.mark.xdist_group("server-matrix-read-world")  # under -n: one process, one world
def test_a_customer_is_shown_its_own_rows_and_nothing_that_names_another_customer(
        read_world: tuple[Api, World]) -> None:
    api, world = read_world
    viewer = api.token(f"dash-{next(NAMES)}", "--role", "viewer")
    acme = [api.token(f"{role}-{next(NAMES)}", "--role", role, "--tenant", "acme")
            for role in sorted(CUSTOMER)]
    seen: list[str] = []

    def read(token: str, path: str, **params: Any) -> Any:
        reply = api("GET", path, token, params=params)
        assert reply.status_code == 200, reply.text
        seen.append(reply.text)
        return reply.json()

    for token in acme:
        # Lists: acme's tasks (its own, and the one it shares a host of), hosts and windows
        tasks = read(token, "/tasks")["items"]
        assert sorted(t["id"] for t in tasks) == sorted([world.tasks["acme"],
                                                         world.tasks["mixed"]])
        assert all(t["target"] is None for t in tasks)  # a target may name another's hosts
        assert [h["name"] for h in read(token, "/hosts")["items"]] == ["acme-01", "acme-02"]
        assert {h["tenant"] for h in read(token, "/hosts")["items"]} == {"acme"}
        windows = {w["name"]: w["assigned"] for w in read(token, "/windows")["items"]}
        assert windows == {"w-acme": "group:acme", "w-acme-deny": "group:acme",
                           "w-customers": "group:customers", "w-mixed": "host:acme-01"}
        assert read(token, "/windows/w-mixed")["assigned"] == ["host:acme-01"]
        # A shared task's detail and counts are acme's job only
        mixed = read(token, f"/tasks/{world.tasks['mixed']}")
        assert (mixed["total"], mixed["jobs"], mixed["live"]) == (1, {"pending": 1}, None)
        assert [t["total"] for t in tasks if t["id"] == world.tasks["mixed"]] == [1]
        jobs = read(token, f"/tasks/{world.tasks['mixed']}/jobs")["items"]
        assert [j["host"] for j in jobs] == ["acme-01"]
        # Counts: acme's hosts, tasks and jobs
        assert read(token, "/status") == {"tenant": "acme", "hosts": 2, "tasks": 2,
                                          "active_tasks": 2, "jobs": {"pending": 3}}
        # A job and a host's history, its own
        assert read(token, f"/jobs/{world.jobs['acme']}")["host"] == "acme-01"
        read(token, "/hosts/acme-01/history")
        # A state filter counts acme's jobs, in SQL: none of its tasks has finished
        assert read(token, "/tasks", state="succeeded")["items"] == []
        assert len(read(token, "/tasks", state="active", limit=1)["items"]) == 1
    assert not [text for text in seen if "globex" in text.lower()]
    # While a team role sees every customer's
    team = {t["id"] for t in read(viewer, "/tasks")["items"]}
    assert {world.tasks["globex"], world.tasks["mixed"]} <= team
    assert read(viewer, f"/tasks/{world.tasks['mixed']}")["total"] == 3
    assert {h["name"] for h in read(viewer, "/hosts")["items"]} >= {"acme-01", "globex-01"}


@pytest.mark.xdist_group("server-matrix-read-world")
@pytest.mark.parametrize("role", sorted(CUSTOMER))
def test_a_customer_token_sees_no_output_of_its_own_jobs(read_world: tuple[Api, World],
                                                          role: str) -> None:
    # Given tasks submitted without --customer-output (tests/server/test_customer_output.py
    # runs them and reads their output with and without it)
    api, world = read_world
    token = api.token(f"{role}-{next(NAMES)}", "--role", role, "--tenant", "acme")
    job = api("GET", f"/jobs/{world.jobs['acme']}", token).json()
    assert all(a["commands"] == [] for a in job["attempts"])
    assert all(late["commands"] == [] for late in job["late"])
    assert job["output_withheld"] is True
    reply = api("GET", f"/tasks/{world.tasks['acme']}/output", token,
                params={"host": "acme-01"})
    assert reply.status_code == 200, reply.text
    assert [(j["host"], j["lines"], j["output_withheld"]) for j in reply.json()["jobs"]] == [
        ("acme-01", [], True)]
