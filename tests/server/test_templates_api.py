"""Saved job templates over the HTTP API on a real ``fleetsched server``: a role the template
does not name is refused (403) while one it names runs it; a customer's token neither sees nor
runs another customer's (or the team's) templates, and its own runs on its own hosts only;
and the CLI in remote mode adds, lists, shows and runs them as in direct mode."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli_support import isolated_env, run_cli
from tests.server.conftest import Api
from tests.submit_support import sql_rows
from tests.tenants_support import customers_ini

TEMPLATE = """parameters:
  hosts: {default: "%s", description: the hosts}
  cmd: {type: choice, choices: ["true", uptime], default: "true"}
action: command
target: "{param.hosts}"
params: {cmd: "{param.cmd}"}
in: 1h
"""


def add(api: Api, tmp_path: Path, name: str, hosts: str, *args: str) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(TEMPLATE % hosts)
    api.cli.ok("templates", "add", name, "--file", str(path), *args)


def run(api: Api, token: str, name: str, **params: str) -> tuple[int, dict]:
    reply = api("POST", f"/templates/{name}/run", token, json={"params": params})
    return reply.status_code, reply.json()


def test_a_role_the_template_does_not_name_is_refused_and_one_it_names_runs_it(
        api: Api, tmp_path: Path) -> None:
    # Given a template only admins may run, and one any operator may
    add(api, tmp_path, "admins-only", "group:web", "--run-role", "admin")
    add(api, tmp_path, "anyone", "group:web")
    operator = api.token("op", "--role", "operator")
    viewer = api.token("look", "--role", "viewer")
    admin = api.token("boss", "--role", "admin")
    # When an operator runs the admins' template: 403, with the roles it names, nothing written
    code, body = run(api, operator, "admins-only")
    assert code == 403, body
    assert body["error"]["message"] == "template admins-only may be run by role(s) admin, " \
                                       "not operator"
    assert sql_rows(api.database_url, "SELECT id FROM tasks WHERE template IS NOT NULL") == []
    # And a viewer may run none (its role may not run templates), but reads them
    assert run(api, viewer, "anyone")[0] == 403
    assert api("GET", "/templates/admins-only", viewer).json()["run_roles"] == ["admin"]
    # While the admin runs it, and the operator the other: the tasks name template and version
    code, body = run(api, admin, "admins-only")
    assert code == 201 and body["host_count"] == 5
    code, other = run(api, operator, "anyone", cmd="uptime")
    assert code == 201, other
    rows = sql_rows(api.database_url, "SELECT id, template, template_version, operator "
                                      "FROM tasks WHERE template IS NOT NULL ORDER BY id")
    assert [(r.id, r.template, r.template_version, r.operator) for r in rows] == [
        (body["task_id"], "admins-only", 1, "admin-at-shell"),
        (other["task_id"], "anyone", 1, "admin-at-shell")]
    # And a value its declaration refuses is one line, 400, nothing written
    reply = api("POST", "/templates/anyone/run", operator, json={"params": {"cmd": "reboot"}})
    assert reply.status_code == 400
    assert reply.json()["error"]["message"] == ("template anyone: parameter 'cmd' must be one "
                                                "of true, uptime, not 'reboot'")


def test_a_customer_neither_sees_nor_runs_another_customers_template(
        api: Api, tmp_path: Path) -> None:
    # Given acme's and globex's hosts, a template of each and one of the team's
    (tmp_path / "customers.ini").write_text(customers_ini(acme=("acme-01", "acme-02"),
                                                          globex=("globex-01",)))
    api.cli.ok("hosts", "import", str(tmp_path / "customers.ini"))
    add(api, tmp_path, "acme-check", "group:acme", "--tenant", "acme")
    add(api, tmp_path, "globex-check", "group:globex", "--tenant", "globex")
    add(api, tmp_path, "team-check", "group:web")
    acme_op = api.token("acme-op", "--role", "operator", "--tenant", "acme")
    acme_viewer = api.token("acme-look", "--role", "customer-viewer", "--tenant", "acme")
    before = sql_rows(api.database_url, "SELECT id FROM tasks")
    for token in (acme_op, acme_viewer):
        # Then acme lists and shows its own template only
        listed = api("GET", "/templates", token).json()["items"]
        assert [t["name"] for t in listed] == ["acme-check"]
        assert api("GET", "/templates/acme-check", token).status_code == 200
        # And another's, or the team's, is not found, as if it did not exist
        for name in ("globex-check", "team-check"):
            reply = api("GET", f"/templates/{name}", token)
            assert reply.status_code == 404
            assert reply.json()["error"]["message"] == f"no template named {name!r}"
    # And acme's operator cannot run globex's (404) nor the team's (404)
    assert run(api, acme_op, "globex-check")[0] == 404
    assert run(api, acme_op, "team-check")[0] == 404
    # Nor its own template on another customer's host (not found among its own, nothing written)
    code, body = run(api, acme_op, "acme-check", hosts="acme-01,globex-01")
    assert code == 400
    assert body["error"]["message"] == ("target term 'globex-01': no host named 'globex-01'")
    assert sql_rows(api.database_url, "SELECT id FROM tasks") == before
    # While it runs its own on its own hosts, and sees that run as its task
    code, body = run(api, acme_op, "acme-check")
    assert code == 201 and sorted(body["hosts"]) == ["acme-01", "acme-02"]
    runs = api("GET", "/templates/acme-check", acme_viewer).json()["runs"]
    assert [r["task"] for r in runs] == [body["task_id"]]
    assert api("GET", f"/tasks/{body['task_id']}", acme_viewer).status_code == 200


def test_the_cli_in_remote_mode_adds_lists_shows_and_runs_templates(
        api: Api, tmp_path: Path) -> None:
    token = api.token("remote-op", "--role", "admin")
    env = isolated_env(tmp_path / "remote", FLEETSCHED_TOKEN=token)
    server = api.base.removesuffix("/api/v1")

    def remote(*args: str) -> tuple[int, str, str]:
        return run_cli(["--server", server, *args], env=env)

    path = tmp_path / "check.yaml"
    path.write_text(TEMPLATE % "group:web")
    code, _out, err = remote("templates", "add", "check", "--file", str(path))
    assert code == 0 and "template check added: version 1" in err, err
    code, out, err = remote("templates", "list")
    assert code == 0 and "check" in out and "hosts, cmd" in out, err
    code, out, err = remote("templates", "run", "check", "-p", "cmd=uptime", "--dry-run")
    assert code == 0 and "dry run: command on 5 hosts" in err, err
    code, out, err = remote("templates", "run", "check", "-p", "cmd=uptime", "--yes")
    assert code == 0, err
    task = int(out.strip())
    code, out, err = remote("templates", "show", "check", "-o", "json")
    assert code == 0 and f'"task": {task}' in out, err
    code, _out, err = remote("templates", "run", "check", "-p", "nope=1")
    assert code == 2 and err.splitlines()[0] == (
        "error: template check: unknown parameter 'nope' (declared: hosts, cmd)")
    # And the direct mode shows the same template and run
    assert f"{task}" in api.cli.ok("templates", "show", "check")


CUSTOMERS_WITH_VALUES = """[acme]
acme-01
acme-02 pw=acme-pw
[acme:vars]
fleetsched_tenant=acme
[globex]
globex-db-01 db_root_pw=hunter2
globex-db-02 db_root_pw=swordfish
[globex:vars]
fleetsched_tenant=globex
[globex-only]
globex-db-01
"""


def test_a_customers_template_resolves_its_target_against_that_customers_hosts_only(
        api: Api, tmp_path: Path) -> None:
    # Given acme's and globex's hosts (a globex group of its own, and globex's values)
    (tmp_path / "customers.ini").write_text(CUSTOMERS_WITH_VALUES)
    api.cli.ok("hosts", "import", str(tmp_path / "customers.ini"))
    add(api, tmp_path, "acme-up", "group:acme", "--tenant", "acme")
    acme_op = api.token("acme-op", "--role", "operator", "--tenant", "acme")
    team_op = api.token("team-op", "--role", "operator")
    before = sql_rows(api.database_url, "SELECT id FROM tasks")

    def answer(token: str, hosts: str) -> tuple[int, object]:
        reply = api("POST", "/templates/acme-up/run", token,
                    json={"params": {"hosts": hosts}, "dry_run": True})
        body = reply.json()
        return reply.status_code, (body["error"]["message"] if reply.status_code >= 400
                                   else sorted(body["hosts"]))

    for token in (acme_op, team_op):
        # Then another customer's host, group, glob or value answers as one that does not exist
        # (the answers compared with the foreign word put in the missing one's place)
        for term, foreign, missing in [("{}", "globex-db-01", "nosuch-db-01"),
                                       ("group:{}", "globex", "nosuch"),
                                       ("group:{}", "globex-only", "nosuch-only"),
                                       ("{}-*", "globex", "nosuch"),
                                       ("vars.db_root_pw={}", "hunter2", "wrongpw"),
                                       ("vars.{}", "db_root_pw", "no_such_var"),
                                       ("all,&vars.db_root_pw={}", "swordfish", "wrongpw"),
                                       ("acme-01,{}", "globex-db-02", "nosuch-db-02")]:
            said = answer(token, term.format(foreign))
            expected = answer(token, term.format(missing))
            assert said[0] == expected[0] == 400, (term, foreign, said)
            assert str(said[1]).replace(foreign, missing) == expected[1], (said, expected)
        # And 'all', a group and a value are acme's hosts among them
        assert answer(token, "all") == (201, ["acme-01", "acme-02"])
        assert answer(token, "all,!acme-01") == (201, ["acme-02"])
        assert answer(token, "vars.pw=acme-pw") == (201, ["acme-02"])
    assert sql_rows(api.database_url, "SELECT id FROM tasks") == before


def test_only_an_admin_changes_who_may_runs_a_template_and_a_version_needs_leave_to_run_it(
        api: Api, tmp_path: Path) -> None:
    # Given a template only admins may run, one any operator may, and one of acme's
    (tmp_path / "customers.ini").write_text(customers_ini(acme=("acme-01",)))
    api.cli.ok("hosts", "import", str(tmp_path / "customers.ini"))
    add(api, tmp_path, "admins-only", "group:web", "--run-role", "admin")
    add(api, tmp_path, "anyone", "group:web")
    add(api, tmp_path, "acme-check", "group:acme", "--tenant", "acme")
    operator = api.token("op", "--role", "operator")
    admin = api.token("boss", "--role", "admin")
    acme_op = api.token("acme-op", "--role", "operator", "--tenant", "acme")
    before = sql_rows(api.database_url, "SELECT * FROM templates ORDER BY id")

    def put(token: str, name: str, hosts: str, **body: object) -> tuple[int, dict]:
        reply = api("POST", "/templates", token,
                    json={"name": name, "file": TEMPLATE % hosts, **body})
        return reply.status_code, reply.json()

    # When an operator re-adds the admins' template with other run roles: 403, unchanged
    code, body = put(operator, "admins-only", "group:web", run_roles=["operator"])
    assert code == 403, body
    assert body["error"]["message"] == ("template admins-only may be run by role(s) admin, "
                                        "not operator")
    # Nor does it add a version to a template it may not run
    assert put(operator, "admins-only", "group:db")[0] == 403
    # And widening or narrowing the roles of one it may run needs the admin role
    code, body = put(operator, "anyone", "group:web", run_roles=["admin"])
    assert code == 403
    assert body["error"]["message"] == ("template anyone: changing who may run it (--run-role) "
                                        "needs the admin role, not operator")
    # A team operator omitting acme's tenant adds nothing to acme's template
    code, body = put(operator, "acme-check", "group:web")
    assert code == 400
    assert body["error"]["message"] == ("template acme-check is acme's: add its versions with "
                                        "--tenant acme (a template's tenant does not change)")
    assert put(operator, "anyone", "group:web", tenant="acme")[0] == 400
    # And a customer's token adds no template at all, its own customer's nor another's
    assert put(acme_op, "acme-check", "group:acme")[0] == 403
    assert put(acme_op, "anyone", "group:web")[0] == 403
    assert sql_rows(api.database_url, "SELECT * FROM templates ORDER BY id") == before
    # While the operator adds versions to what it may run (naming acme's tenant for acme's)
    code, body = put(operator, "anyone", "group:db")
    assert code == 201 and body["version"] == 2
    code, body = put(operator, "acme-check", "acme-01", tenant="acme")
    assert code == 201 and (body["version"], body["tenant"]) == (2, "acme")
    # And an admin changes the roles
    code, body = put(admin, "admins-only", "group:web", run_roles=["operator"])
    assert code == 201 and body["run_roles"] == ["operator"] and body["settings_changed"]


def test_a_schedule_of_a_template_needs_a_role_that_may_run_it_and_records_it(
        api: Api, tmp_path: Path) -> None:
    # Given a template any role that runs templates may run (one that starts when run)
    path = tmp_path / "check.yaml"
    path.write_text((TEMPLATE % "group:web").replace("in: 1h\n", ""))
    api.cli.ok("templates", "add", "check", "--file", str(path))
    windows = api.token("win", "--role", "window-admin")
    admin = api.token("boss", "--role", "admin")

    def schedule(token: str, name: str) -> tuple[int, dict]:
        reply = api("POST", "/schedules", token, json={
            "name": name, "cron": "0 4 * * *", "template": "check"})
        return reply.status_code, reply.json()

    # When a window-admin (who adds schedules but runs no template) schedules it: 403
    code, body = schedule(windows, "sneaky")
    assert code == 403, body
    assert body["error"]["message"] == "role window-admin may not run templates"
    assert sql_rows(api.database_url, "SELECT id FROM schedules") == []
    # While an admin schedules it, and the schedule keeps the creator's role
    code, body = schedule(admin, "nightly")
    assert code == 201, body
    [row] = sql_rows(api.database_url, "SELECT options FROM schedules")
    assert data_of(row.options)["template"]["role"] == "admin"


def data_of(value: object) -> dict:
    return value if isinstance(value, dict) else json.loads(str(value))



def test_a_huge_version_is_a_client_error_not_a_500(api: Api, tmp_path: Path) -> None:
    add(api, tmp_path, "check", "group:web")
    operator = api.token("op", "--role", "operator")
    huge = 99999999999999999999
    for method, path, body in [("GET", f"/templates/check?version={huge}", None),
                               ("POST", "/templates/check/run", {"version": huge}),
                               ("POST", "/templates/check/run", {"version": 2**31}),
                               ("POST", f"/templates/check@{huge}/run", {}),
                               ("POST", "/schedules", {"name": "n", "cron": "0 4 * * *",
                                                       "template": f"check@{huge}"})]:
        token = api.token("boss", "--role", "admin") if path == "/schedules" else operator
        reply = api(method, path, token, **({"json": body} if body is not None else {}))
        assert reply.status_code in (400, 422), (path, body, reply.status_code, reply.text)
    assert api("GET", f"/templates/check?version={2**31 - 1}", operator).status_code == 404
    assert sql_rows(api.database_url, "SELECT id FROM tasks") == []
