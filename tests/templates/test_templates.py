"""Saved job templates through the CLI (direct mode) on a real redis-server and SQLite and
PostgreSQL: versions, show and list, a run through the submit verb (recorded with its template
and version), dry runs, refused values that write nothing, pinned versions, idempotency keys,
and a schedule that fires a template once per occurrence."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis

from scheduler.record.migrate import upgrade
from tests.schedule_support import fired, missed, occurrences
from tests.submit_support import (
    KEYS,
    Cli,
    cli_with_inventory,
    data,
    redis_snapshot,
    sql_rows,
)

FLEET = ("[web]\nweb-01 ansible_host=10.0.0.1\nweb-02 ansible_host=10.0.0.2\n"
         "[db]\ndb-01 ansible_host=10.0.0.3\n")
RESTART = """# restart a service on some hosts
parameters:
  service:
    type: choice
    choices: [nginx, haproxy]
    description: the service to restart
  hosts:
    default: group:web
    description: the hosts
  retries:
    type: int
    min: 0
    max: 5
    default: 1
action: command
target: "{param.hosts}"
params: {cmd: "systemctl restart {param.service}"}
retries: "{param.retries}"
executor: simulate
executor_options: {duration_ms: 0}
"""
WRITTEN = ("tasks", "jobs", "events", "templates", "template_versions", "schedules")


@pytest.fixture
def db(database_url: str) -> str:
    upgrade(database_url)
    return database_url


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, db: str) -> Cli:
    return cli_with_inventory(tmp_path, redis_url, FLEET, db)


def template_file(tmp_path: Path, text: str = RESTART, name: str = "restart.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def snapshot(url: str) -> dict[str, list[str]]:
    return {t: sorted(map(repr, sql_rows(url, f"SELECT * FROM {t}"))) for t in WRITTEN}


def test_adding_a_changed_file_makes_a_new_version_and_the_same_file_none(
        cli: Cli, tmp_path: Path) -> None:
    # Given a template added from a file
    code, _out, err = cli("templates", "add", "restart", "--file", template_file(tmp_path))
    assert code == 0 and "template restart added: version 1" in err
    # When the same file (a comment changed) is added again
    again = RESTART.replace("# restart a service", "# restarts a service")
    code, _out, err = cli("templates", "add", "restart", "-f", template_file(tmp_path, again))
    # Then no version is made, and it says so
    assert code == 0 and "unchanged from version 1; no new version" in err
    # When what the file says changes
    changed = RESTART.replace("max: 5", "max: 9")
    added = json.loads(cli.ok("templates", "add", "restart", "-f",
                              template_file(tmp_path, changed), "-o", "json"))
    assert (added["version"], added["changed"], added["created"]) == (2, True, False)
    # Then show has both versions, each with its own file, and list the newest
    shown = json.loads(cli.ok("templates", "show", "restart", "-o", "json"))
    assert (shown["version"], shown["newest"]) == (2, 2)
    assert [v["version"] for v in shown["versions"]] == [2, 1]
    assert "max: 9" in shown["file"]
    first = json.loads(cli.ok("templates", "show", "restart", "--version", "1", "-o", "json"))
    assert "max: 5" in first["file"] and first["version"] == 1
    assert [p["name"] for p in first["parameters"]] == ["service", "hosts", "retries"]
    assert first["parameters"][0]["choices"] == ["nginx", "haproxy"]
    [row] = json.loads(cli.ok("templates", "list", "-o", "json"))
    assert (row["name"], row["version"], row["action"]) == ("restart", 2, "command")


def test_a_run_goes_through_submit_and_the_task_records_the_template_and_its_version(
        cli: Cli, tmp_path: Path, db: str, redis_client: redis.Redis) -> None:
    # Given a template
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path))
    # When it is run with its parameters
    code, out, err = cli("templates", "run", "restart", "-p", "service=nginx",
                         "-p", "retries=3", "--yes")
    assert code == 0, err
    task = int(out.strip())
    # Then the task is submit's: its jobs queued in Redis, its values filled in and typed
    assert redis_client.hget(KEYS.task(str(task)), "total") == "2"
    [row] = sql_rows(db, "SELECT template, template_version, params, max_attempts, target "
                         "FROM tasks WHERE id = :t", t=task)
    assert (row.template, row.template_version, row.max_attempts, row.target) == (
        "restart", 1, 4, "group:web")
    params = json.loads(row.params) if isinstance(row.params, str) else row.params
    assert params["cmd"] == ["systemctl", "restart", "nginx"]
    # And its submit event names the template and version (the audit trail)
    [event] = sql_rows(db, "SELECT data FROM events WHERE kind = 'submit' AND task_id = :t",
                       t=str(task))
    assert data(event)["template"] == {"name": "restart", "version": 1}
    # And tasks show (and the audit report, which prints the same request) says where from
    shown = json.loads(cli.ok("tasks", "show", str(task), "-o", "json"))
    assert shown["origin"] == "submitted by tester, from template restart v1"
    # And show lists it among the last runs, with who ran it
    shown = json.loads(cli.ok("templates", "show", "restart", "-o", "json"))
    assert [(r["task"], r["version"], r["operator"]) for r in shown["runs"]] == [
        (task, 1, "tester")]


def test_a_dry_run_prints_the_plan_and_writes_nothing(
        cli: Cli, tmp_path: Path, db: str, redis_client: redis.Redis) -> None:
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path))
    before, queued = snapshot(db), redis_snapshot(redis_client)
    code, out, err = cli("templates", "run", "restart", "-p", "service=haproxy",
                         "-p", "hosts=db-01", "--dry-run", "-o", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert plan["dry_run"] is True and [j["host"] for j in plan["jobs"]] == ["db-01"]
    assert snapshot(db) == before and redis_snapshot(redis_client) == queued


@pytest.mark.parametrize("values, said", ids=["missing", "not-a-choice", "not-an-int",
                                               "out-of-range", "unknown"], argvalues=[
    ([], "template restart: missing required parameter 'service' (the service to restart)"),
    (["-p", "service=apache"], ("template restart: parameter 'service' must be one of "
                                "nginx, haproxy, not 'apache'")),
    (["-p", "service=nginx", "-p", "retries=many"],
     "template restart: parameter 'retries' must be an integer >= 0 and <= 5, not 'many'"),
    (["-p", "service=nginx", "-p", "retries=7"],
     "template restart: parameter 'retries' must be an integer >= 0 and <= 5, not '7'"),
    (["-p", "service=nginx", "-p", "host=web-01"],
     "template restart: unknown parameter 'host' (declared: service, hosts, retries)"),
])
def test_a_missing_unknown_or_mistyped_value_is_one_line_exit_2_and_nothing_written(
        cli: Cli, tmp_path: Path, db: str, redis_client: redis.Redis, values: list[str],
        said: str) -> None:
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path))
    before, queued = snapshot(db), redis_snapshot(redis_client)
    code, out, err = cli("templates", "run", "restart", *values, "--yes")
    assert (code, out) == (2, "")
    assert err.splitlines()[0] == f"error: {said}"
    assert "Traceback" not in err
    assert snapshot(db) == before and redis_snapshot(redis_client) == queued


@pytest.mark.parametrize("text, said", ids=["placeholder", "type", "task-key", "in-a-key",
                                             "alias", "deep", "set"], argvalues=[
    (RESTART.replace("{param.hosts}", "{param.host}"),
     "unknown placeholder {param.host} (declared: hosts, retries, service)"),
    (RESTART.replace("type: choice", "type: enum"),
     "parameter 'service': type 'enum' is not one of string, int, bool, choice"),
    (RESTART.replace("retries: \"{param.retries}\"", "retriez: 2"), "unknown key 'retriez'"),
    (RESTART.replace("params: {cmd:", "params: {\"{param.service}\":"),
     "a placeholder stands in a value, not in a key"),
    (RESTART.replace("default: group:web", "default: &web group:web") + "name: *web\n",
     "anchors and aliases (&name, *name) are not taken in a template file"),
    (RESTART + "executor_options: {duration_ms: 0, x: " + "[" * 200 + "]" * 200 + "}\n",
     "restart.yaml:21: lists and mappings are nested more than 32 deep"),
    (RESTART + "notify: !!set {mailto:a@example.org: null}\n",
     "a tag:yaml.org,2002:set value is not taken in a template file"),
])
def test_a_bad_template_file_is_refused_in_one_line_and_nothing_written(
        cli: Cli, tmp_path: Path, db: str, text: str, said: str) -> None:
    before = snapshot(db)
    code, out, err = cli("templates", "add", "restart", "-f", template_file(tmp_path, text))
    assert (code, out) == (2, ""), err
    assert said in err.splitlines()[0] and "Traceback" not in err
    assert snapshot(db) == before


def test_a_value_is_never_read_as_yaml_so_it_cannot_add_a_key(
        cli: Cli, tmp_path: Path, db: str) -> None:
    # Given a text parameter that stands for the whole target
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path))
    # When its value holds a line that would be another key of a task file
    code, _out, err = cli("templates", "run", "restart", "-p", "service=nginx",
                          "-p", "hosts=web-01\nbreak_glass: now", "--dry-run")
    # Then it is one value, the whole target (which names no host), never a key of its own
    assert code == 2 and "target term 'web-01\\nbreak_glass: now' is not" in err
    assert sql_rows(db, "SELECT id FROM tasks") == []


def test_a_pinned_version_runs_that_version_and_the_same_idempotency_key_gives_the_task_back(
        cli: Cli, tmp_path: Path, db: str) -> None:
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path))
    cli.ok("templates", "add", "restart", "-f",
           template_file(tmp_path, RESTART.replace("restart {param", "reload {param")))
    first = int(cli.ok("templates", "run", "restart@1", "-p", "service=nginx", "--yes",
                       "--idempotency-key", "k-1").strip())
    again = int(cli.ok("templates", "run", "restart@1", "-p", "service=nginx", "--yes",
                       "--idempotency-key", "k-1").strip())
    newest = int(cli.ok("templates", "run", "restart", "-p", "service=nginx", "--yes").strip())
    assert again == first != newest
    rows = {r.id: (r.template_version, r.params) for r in sql_rows(
        db, "SELECT id, template_version, params FROM tasks WHERE template = 'restart'")}
    assert set(rows) == {first, newest}
    assert (rows[first][0], rows[newest][0]) == (1, 2)
    assert "restart" in str(rows[first][1]) and "reload" in str(rows[newest][1])


def test_a_schedule_of_a_template_fires_its_newest_version_once_per_occurrence(
        cli: Cli, tmp_path: Path, db: str, redis_client: redis.Redis) -> None:
    # Given a template and a schedule that fires it every second
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path))
    cli.ok("schedules", "add", "nightly", "--every", "1s", "--template", "restart",
           "-p", "service=nginx", "--overlap", "allow")
    shown = json.loads(cli.ok("schedules", "show", "nightly", "-o", "json"))
    assert shown["template"] == "restart (its newest version at each firing), with service=nginx"
    assert json.loads(cli.ok("templates", "show", "restart", "-o", "json"))["schedules"] == [
        "nightly"]
    # And a second version of the template, added after the schedule
    cli.ok("templates", "add", "restart", "-f",
           template_file(tmp_path, RESTART.replace("restart {param", "reload {param")))
    # When its occurrence is claimed and fired, and the same claim fired again
    time.sleep(1.1)
    [result] = fired(redis_client, db)
    assert result.tasks, result
    # Then that occurrence has one task, run from the template's newest version
    counts = occurrences(db, "nightly")
    assert counts and set(counts.values()) == {1}
    [row] = sql_rows(db, "SELECT template, template_version, params, name FROM tasks "
                         "WHERE id = :t", t=result.tasks[0])
    assert (row.template, row.template_version, row.name) == ("restart", 2, "schedule nightly")
    assert "reload" in str(row.params)
    # And the template cannot be removed while the schedule fires it
    code, _out, err = cli("templates", "remove", "restart")
    assert code == 2 and "fired by schedule(s) nightly" in err
    cli.ok("schedules", "remove", "nightly")
    assert "removed (2 version(s))" in cli("templates", "remove", "restart")[2]
    # And the tasks run from it keep its name and version
    assert sql_rows(db, "SELECT template_version FROM tasks WHERE id = :t",
                    t=result.tasks[0])[0][0] == 2


def test_a_schedule_of_a_template_with_a_bad_value_is_refused_at_add(
        cli: Cli, tmp_path: Path, db: str) -> None:
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path))
    before = snapshot(db)
    code, _out, err = cli("schedules", "add", "nightly", "--cron", "0 4 * * *",
                          "--template", "restart", "-p", "service=apache")
    assert code == 2 and "parameter 'service' must be one of nginx, haproxy" in err
    code, _out, err = cli("schedules", "add", "nightly", "--cron", "0 4 * * *",
                          "--template", "restart", "-p", "service=nginx", "-t", "db-01")
    assert code == 2 and "drop --target" in err
    assert snapshot(db) == before


def test_a_schedule_fires_a_template_only_while_its_creators_role_may_run_it(
        cli: Cli, tmp_path: Path, db: str, redis_client: redis.Redis) -> None:
    from scheduler.principal import Principal
    from scheduler.record.engine import make_engine
    from scheduler.schedules.store import ScheduleSpec, add_schedule

    # Given a template any operator may run, scheduled by an operator (a token's principal)
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path))
    operator = Principal(name="olga", via="token:7", role="operator")
    engine = make_engine(db)
    try:
        add_schedule(engine, lambda: redis.Redis.from_url(
            cli.redis_url, decode_responses=True), ScheduleSpec(
            name="nightly", request=None, every="1s", overlap="allow", template="restart",
            template_params={"service": "nginx"}), operator=operator, keys=KEYS)
    finally:
        engine.dispose()
    # When an admin (the local CLI) narrows the template to admins before it fires
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path), "--run-role", "admin")
    time.sleep(1.1)
    [result] = fired(redis_client, db)
    # Then the occurrence is not run: a missed one, with the reason, and no task
    assert result.tasks == [] and result.missed >= 1, result
    assert "not submitted: template restart may be run by role(s) admin, not operator" in set(
        missed(db, "nightly").values())
    assert sql_rows(db, "SELECT id FROM tasks WHERE template = 'restart'") == []
    # And once the operators may again, it fires
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path),
           "--run-role", "operator")
    time.sleep(1.1)
    [result] = fired(redis_client, db)
    assert result.tasks, result


def test_a_template_removed_and_added_again_shows_only_its_own_runs(
        cli: Cli, tmp_path: Path) -> None:
    # Given a template run once, then removed
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path))
    old = int(cli.ok("templates", "run", "restart", "-p", "service=nginx", "--yes").strip())
    cli.ok("templates", "remove", "restart")
    # When a template of that name is added again
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path))
    # Then it shows no runs and no last run: the old template's task is not its
    shown = json.loads(cli.ok("templates", "show", "restart", "-o", "json"))
    assert shown["runs"] == []
    [listed] = json.loads(cli.ok("templates", "list", "-o", "json"))
    assert listed["last_run"] is None
    # And its own run is its only one, while the old task keeps its template's name
    new = int(cli.ok("templates", "run", "restart", "-p", "service=nginx", "--yes").strip())
    shown = json.loads(cli.ok("templates", "show", "restart", "-o", "json"))
    assert [r["task"] for r in shown["runs"]] == [new] and new != old
    assert sql_rows(cli.database_url, "SELECT template FROM tasks WHERE id = :t", t=old)[0][0] \
        == "restart"


def test_a_huge_version_is_one_line_exit_2_at_every_entry_point(
        cli: Cli, tmp_path: Path, db: str) -> None:
    cli.ok("templates", "add", "restart", "-f", template_file(tmp_path))
    huge = "99999999999999999999"
    before = snapshot(db)
    for args in (("templates", "run", f"restart@{huge}", "-p", "service=nginx", "--dry-run"),
                 ("templates", "run", "restart@2147483648", "-p", "service=nginx", "--yes"),
                 ("schedules", "add", "nightly", "--cron", "0 4 * * *", "--template",
                  f"restart@{huge}", "-p", "service=nginx")):
        code, _out, err = cli(*args)
        assert code == 2 and len(err.strip().splitlines()) <= 2, (args, err)
        assert "the version after @ is a number from 1 to 2147483647" in err, (args, err)
        assert "Traceback" not in err and "DataError" not in err
    code, _out, err = cli("templates", "show", "restart", "--version", huge)
    assert code == 2 and "Traceback" not in err and "2147483647" in err, err
    assert snapshot(db) == before
    # While the largest version there may be is only not found
    code, _out, err = cli("templates", "show", "restart", "--version", "2147483647")
    assert code == 4 and "has no version 2147483647" in err, err
