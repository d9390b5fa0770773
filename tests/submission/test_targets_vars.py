"""Targets by host variable (issue 30): ``vars.KEY=VALUE``, ``vars.KEY=V1|V2``, ``vars.KEY``,
``!vars...``, ``&TERM``; parsed and refused in one line, resolved against the effective
variables stored at import (group vars, overridden by host vars), the same through
``submit --dry-run``, a task file, a schedule that fires and the HTTP API. Real redis-server,
SQLite and PostgreSQL (the ``database_url`` fixture), a real ``fleetsched server``."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis

from scheduler.errors import Code, ValidationError
from scheduler.queue.client import Queue
from scheduler.queue.schedules import arm
from scheduler.schedules.firing import fire_claimed
from scheduler.submission.targets import parse_target, resolve_target, var_text
from tests.schedule_support import engine_for
from tests.submit_support import KEYS, Cli, cli_with_inventory, data, events, inventory, sql_rows

# ------------------------------------------------------------------------------- unit

HOSTS = ["web-01", "web-02", "web-03", "db-01", "db-02", "lb-01"]
GROUPS = {"web": {"web-01", "web-02", "web-03"}, "db": {"db-01", "db-02"}}
VARS = {
    "web-01": {"tier": "canary", "rack": "r1", "port": 8080, "tls": True},
    "web-02": {"tier": "prod", "rack": "r2", "port": 8081, "tls": False},
    "web-03": {"tier": "prod", "rack": "r3", "tags": ["a"]},
    "db-01": {"tier": "canary", "rack": "r1", "ratio": 1.5},
    "db-02": {"tier": "prod", "rack": "r2", "gone": None},
    "lb-01": {},
}


def pick(expr: str) -> list[str]:
    return resolve_target(expr, HOSTS, GROUPS, VARS)


@pytest.mark.parametrize(("expr", "hosts"), [
    ("vars.tier=canary", ["db-01", "web-01"]),
    ("vars.rack=r1|r2", ["db-01", "db-02", "web-01", "web-02"]),
    ("vars.tags", ["web-03"]),
    ("vars.gone", ["db-02"]),  # set to null: set
    ("group:web,&vars.tier=canary", ["web-01"]),
    ("group:web,group:db,&vars.tier=prod,&vars.rack=r2", ["db-02", "web-02"]),
    ("all,!vars.tier=canary", ["db-02", "lb-01", "web-02", "web-03"]),
    ("group:web,!vars.tier=canary", ["web-02", "web-03"]),
    ("vars.tier=canary,lb-01", ["db-01", "lb-01", "web-01"]),
    ("group:web,&group:web,&web-0[12]", ["web-01", "web-02"]),  # & takes any selector
    ("vars.port=8080", ["web-01"]),  # a number as JSON writes it
    ("vars.tls=true", ["web-01"]),
    ("vars.tls=false", ["web-02"]),
    ("vars.ratio=1.5", ["db-01"]),
    ("group:web,vars.nothing=x", ["web-01", "web-02", "web-03"]),  # not the only including term
])
def test_variable_terms_select_the_hosts_whose_effective_vars_match(expr: str,
                                                                    hosts: list[str]) -> None:
    assert pick(expr) == hosts


def test_the_order_is_union_then_each_and_term_then_exclusions() -> None:
    # ! wins over the including term and over & whatever the order they are written in
    assert pick("!web-01,&vars.tier=canary,group:web,group:db") == ["db-01"]


@pytest.mark.parametrize(("expr", "fragment"), [
    ("vars.=x", "'vars.=x': '' is not a variable name"),
    ("vars.ti er=x", "is not a variable name"),
    ("vars.tier=", "'vars.tier=' has an empty value"),
    ("vars.rack=r1||r2", "has an empty value"),
    ("vars.rack=r1|", "has an empty value"),
    ("vars.tier=nope", "target term 'vars.tier=nope' selects no hosts"),
    ("vars.nothing", "target term 'vars.nothing' selects no hosts"),
    ("&vars.tier=canary", "has no including term, only '&'"),
    ("&group:web,!web-01", "has no including term"),
    ("group:web,&!vars.tier=canary", "'&!vars.tier=canary' mixes '&' and '!'"),
    ("group:web,!&vars.tier=canary", "mixes '&' and '!'"),
    ("group:web,&vars.tier=nope", "'&vars.tier=nope' matches no host"),
    ("group:web,&group:db", "none of the included hosts matches every '&' term"),
    ("vars.tier=canary,!vars.tier=canary", "everything was excluded"),
    ("group:web,&web-99", "no host named 'web-99'"),
    ("!vars.tier=canary", "only excludes"),
    ("vars.tags=a", "selects no hosts"),  # a list never equals a value
    ("vars.tier=Canary", "selects no hosts"),  # exact, case matters
])
def test_a_bad_variable_term_is_refused_in_one_line_naming_it(expr: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as err:
        pick(expr)
    assert fragment in str(err.value)
    assert "\n" not in str(err.value)


def test_parsed_terms_print_back_and_parse_to_the_same_target() -> None:
    expr = " group:web , &vars.tier = canary|blue , !vars.os=Ubuntu 22.04 , vars.rack "
    target = parse_target(expr)
    assert str(target) == "group:web,&vars.tier=canary|blue,!vars.os=Ubuntu 22.04,vars.rack"
    assert parse_target(str(target)) == target and target.needs_vars
    assert not parse_target("group:web,!web-01,&web-0*").needs_vars


def test_resolving_a_vars_term_without_the_vars_is_a_programming_error() -> None:
    # Never "no host has the variable", which would make '!vars.tier=prod' exclude nothing
    with pytest.raises(TypeError):
        resolve_target("all,!vars.tier=prod", HOSTS, GROUPS)


def test_value_text_is_what_hosts_show_prints() -> None:
    assert [var_text(v) for v in ("x", 8, 1.5, True, False, None, [1], {"a": 1})] == [
        "x", "8", "1.5", "true", "false", None, None, None]


# ------------------------------------------------------------------ through the CLI/API

FLEET = """
[web]
web-01 rack=r1
web-02 rack=r2
web-03 rack=r3 tier=canary
web-04 rack=r1
[db]
db-01 rack=r1
db-02 rack=r2 tier=canary
[web:vars]
tier=prod
[db:vars]
tier=prod
[canaries]
web-01
[canaries:vars]
tier=canary
ansible_group_priority=5
"""
# Effective tiers: web-01 canary (group canaries, priority 5, over web), web-03 and db-02
# canary (host vars over group vars), the rest prod.


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, database_url: str) -> Cli:
    return cli_with_inventory(tmp_path, redis_url, FLEET, database_url)


def planned(cli: Cli, *args: str) -> list[str]:
    plan = json.loads(cli.ok("submit", *args, "--dry-run", "-o", "json"))
    return [j["host"] for j in plan["jobs"]]


def test_submit_dry_run_picks_the_hosts_by_effective_variable(cli: Cli) -> None:
    task = ["command", "-p", "cmd=true", "--executor", "simulate"]
    assert json.loads(cli.ok("hosts", "show", "web-03", "-o", "json"))["vars"]["tier"] == "canary"
    assert planned(cli, *task, "-t", "group:web,&vars.tier=canary") == ["web-01", "web-03"]
    assert planned(cli, *task, "-t", "vars.rack=r1|r2") == [
        "db-01", "db-02", "web-01", "web-02", "web-04"]
    assert planned(cli, *task, "-t", "all,!vars.tier=canary") == ["db-01", "web-02", "web-04"]
    assert planned(cli, *task, "-t", "group:db,&vars.rack=r2,&vars.tier") == ["db-02"]
    # the table form shows the hosts as it always did
    code, out, err = cli("submit", *task, "-t", "group:web,&vars.tier=canary", "--dry-run")
    assert code == 0 and "web-01" in out and "web-03" in out and "web-02" not in out, err
    # hosts export and hosts check take the same expression
    exported = cli.ok("hosts", "export", "group:web,&vars.tier=canary", "-f", "yaml")
    assert "web-01" in exported and "web-03" in exported and "web-02" not in exported
    # a refusal is one line naming the term, exit code 2, nothing written
    code, out, err = cli("submit", *task, "-t", "group:web,&vars.tier=blue", "--dry-run")
    assert code == 2 and "'&vars.tier=blue' matches no host" in err, err
    code, out, err = cli("submit", *task, "-t", "vars.tier=", "--dry-run")
    assert code == 2 and "'vars.tier=' has an empty value" in err, err


def test_a_submitted_task_records_the_expression_and_one_job_per_picked_host(cli: Cli) -> None:
    task = cli.submit("command", "-p", "cmd=true", "--executor", "simulate",
                      "-t", "group:web,&vars.tier=canary")
    (row,) = sql_rows(cli.database_url, "SELECT target FROM tasks WHERE id = :t", t=task)
    assert row.target == "group:web,&vars.tier=canary"
    jobs = sql_rows(cli.database_url, "SELECT host FROM jobs WHERE task_id = :t ORDER BY seq",
                    t=task)
    assert [j.host for j in jobs] == ["web-01", "web-03"]


def test_a_task_file_takes_a_variable_target(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("action: command\ntarget: 'group:db,!vars.tier=canary'\n"
                    "params:\n  cmd: 'true'\nexecutor: simulate\n")
    assert planned(cli, "-f", str(path)) == ["db-01"]


def test_a_schedule_with_a_variable_target_fires_on_those_hosts(
        cli: Cli, redis_client: redis.Redis, database_url: str) -> None:
    cli.ok("schedules", "add", "canary", "--every", "1s", "command",
           "-t", "vars.rack=r1|r2,&vars.tier=canary", "-p", "cmd=true", "--executor", "simulate")
    occ = int(time.time()) * 1000
    arm(redis_client, KEYS, "canary", occ, replace=True)
    [claimed] = Queue(redis_client, KEYS).claim("w1", 5).schedules
    engine = engine_for(database_url)
    try:
        done = fire_claimed(engine, redis_client, KEYS, claimed, occ + 200, worker="w1")
    finally:
        engine.dispose()
    assert done.code is Code.OK and len(done.tasks) == 1
    jobs = sql_rows(database_url, "SELECT host FROM jobs WHERE task_id = :t ORDER BY seq",
                    t=done.tasks[0])
    assert [j.host for j in jobs] == ["db-02", "web-01"]


def test_the_api_submit_takes_a_variable_target(tmp_path: Path, redis_url: str) -> None:
    from tests.server.conftest import serve_api

    with serve_api(tmp_path, redis_url, f"sqlite:///{tmp_path / 'api.db'}") as api:
        inventory(api.cli, tmp_path, FLEET)
        token = api.token("vars-ci", "--role", "operator")
        reply = api("POST", "/tasks", token, json={
            "action": "command", "target": "group:web,&vars.tier=canary",
            "params": {"cmd": "true"}, "executor": "simulate", "in": "1h"})
        assert reply.status_code == 201, reply.text
        task = reply.json()["task_id"]
        jobs = sql_rows(api.database_url, "SELECT host FROM jobs WHERE task_id = :t "
                                          "ORDER BY seq", t=task)
        assert [j.host for j in jobs] == ["web-01", "web-03"]
        refused = api("POST", "/tasks", token, json={
            "action": "command", "target": "&vars.tier=canary", "params": {"cmd": "true"}})
        assert refused.status_code == 400, refused.text
        assert "only '&'" in refused.json()["error"]["message"]


def test_a_host_named_like_a_vars_term_is_reachable_by_a_glob() -> None:
    hosts = [*HOSTS, "vars.old"]
    assert resolve_target("vars[.]old", hosts, GROUPS, VARS) == ["vars.old"]
    with pytest.raises(ValidationError, match="'vars.old' selects no hosts"):
        resolve_target("vars.old", hosts, GROUPS, VARS)  # the variable "old", which none has


# ------------------------------------------------------------------ a first wave by term

def test_waves_first_term_parses_and_bad_ones_are_refused() -> None:
    from scheduler.submission.waves import parse_waves, split, wave_spec

    spec = wave_spec("vars.tier=canary,50%")
    assert spec is not None and str(spec.first) == "vars.tier=canary"
    assert spec.policy()["sizes"] == "vars.tier=canary,50%"
    hosts = ["a", "b", "c", "d", "e"]
    # wave 1: the term's hosts; then 50% of the task's 5 hosts (3) at a time
    assert split(spec, hosts, seed="1", first={"b", "e"}) == [[1, 4], [0, 2, 3]]
    assert split(wave_spec("group:x,1"), hosts, seed="1", first={"a"}) == [[0], [1], [2], [3], [4]]
    for text, fragment in [
        ("vars.tier=canary", "needs the sizes of the waves after its first"),
        ("1,vars.tier=canary,100%", "only the first wave can be a target term"),
        ("vars.tier=,100%", "has an empty value"),
        ("vars.a=b|c|,100%", "has an empty value"),
    ]:
        with pytest.raises(ValidationError, match=fragment):
            parse_waves(text)
    with pytest.raises(ValidationError, match="selects none of the task's hosts"):
        split(spec, hosts, seed="1", first=set())


def waves_of(cli: Cli, *args: str) -> list[tuple[int, str]]:
    plan = json.loads(cli.ok("submit", *args, "--dry-run", "-o", "json"))
    return sorted((j["wave"], j["host"]) for j in plan["jobs"])


def test_a_first_wave_by_variable_runs_the_canaries_then_the_rest(cli: Cli) -> None:
    task = ["command", "-p", "cmd=true", "--executor", "simulate"]
    assert waves_of(cli, *task, "-t", "group:web", "--waves", "vars.tier=canary,100%") == [
        (1, "web-01"), (1, "web-03"), (2, "web-02"), (2, "web-04")]
    assert waves_of(cli, *task, "-t", "all", "--waves", "group:db,1") == [
        (1, "db-01"), (1, "db-02"), (2, "web-01"), (3, "web-02"), (4, "web-03"), (5, "web-04")]
    # recorded: the waves the submit event keeps
    task_id = cli.submit(*task, "-t", "group:web", "--waves", "vars.rack=r1,100%")
    (row,) = events(cli.database_url, task_id, kinds=("submit",))
    waves = data(row)["waves"]["waves"]
    jobs = {j.id: j.host for j in sql_rows(cli.database_url, "SELECT id, host FROM jobs "
                                                             "WHERE task_id = :t", t=task_id)}
    assert [sorted(jobs[j] for j in w) for w in waves] == [
        ["web-01", "web-04"], ["web-02", "web-03"]]
    code, _out, err = cli("submit", *task, "-t", "group:db", "--waves", "vars.tier=nope,100%",
                          "--dry-run")
    assert code == 2 and "'vars.tier=nope' selects none of the task's hosts" in err, err
