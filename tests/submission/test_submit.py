"""``fleetsched submit``: the plan, the record in SQL, the fan-out to Redis, the operator, the
blast radius and its confirmation, and what happens when Redis is down. Real redis-server,
SQLite and PostgreSQL, through the console script's own ``main()``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa
import sqlalchemy.orm

from scheduler.queue.client import JobResult, Queue
from scheduler.record.migrate import upgrade
from tests.submit_support import (
    KEYS,
    Cli,
    cli_with_inventory,
    data,
    inventory,
    redis_snapshot,
    sql_rows,
    sql_snapshot,
)

FLEET = """
[web]
web-01 ansible_host=10.0.0.1
web-02 ansible_host=10.0.0.2
web-03 ansible_host=10.0.0.3
web-04 ansible_host=10.0.0.4
web-05 ansible_host=10.0.0.5
[db]
db-[01:03] ansible_port=2222
[web:vars]
app_port=8080
ansible_user=deploy
"""


@pytest.fixture
def db(database_url: str) -> str:
    upgrade(database_url)
    return database_url


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, db: str) -> Cli:
    return cli_with_inventory(tmp_path, redis_url, FLEET, db)


def test_a_task_is_recorded_in_sql_then_queued_with_one_job_per_selected_host(
        cli: Cli, redis_client: redis.Redis) -> None:
    # When a task targets two groups minus one host, with a rollout policy
    task = cli.submit("command", "--target", "group:web,group:db,!web-03", "--param",
                      "cmd=uptime", "--executor", "simulate", "--max-concurrency", "50%",
                      "--max-failures", "2", "--retries", "1", "--timeout", "30s",
                      "--name", "load check", "--priority", "urgent")
    hosts = ["db-01", "db-02", "db-03", "web-01", "web-02", "web-04", "web-05"]
    # Then SQL holds the task, queued, with the operator, and one job per host in sorted order
    (row,) = sql_rows(cli.database_url, "SELECT * FROM tasks WHERE id = :t", t=task)
    assert (row.state, row.operator, row.name, row.priority) == ("active", "tester", "load check", "urgent")
    assert (row.max_running, row.max_failures, row.max_attempts, row.total) == (4, 2, 2, 7)
    jobs = sql_rows(cli.database_url, "SELECT id, host, state FROM jobs WHERE task_id = :t "
                                      "ORDER BY seq", t=task)
    assert [(j.id, j.host) for j in jobs] == [(f"{task}.{n}", h) for n, h in enumerate(hosts)]
    assert {j.state for j in jobs} == {"pending"}
    (submit,) = sql_rows(cli.database_url, "SELECT * FROM events WHERE kind = 'submit'")
    assert submit.operator == "tester" and data(submit)["hosts"] == 7
    # And Redis holds the task hash with the policy, the jobs in the urgent due set, and the hosts
    live = Queue(redis_client, KEYS).task_state(str(task))
    assert (live["prio"], live["max_running"], live["max_failures"], live["max_attempts"],
            live["timeout_ms"], live["idempotent"], live["operator"]) == (
        "urgent", "4", "2", "2", "30000", "0", "tester")
    assert json.loads(live["spec"]) == {"action": "command", "params": {"cmd": ["uptime"]},
                                        "executor": "simulate", "executor_options": {},
                                        "expected_ms": 10_000}
    assert sorted(redis_client.zrange(KEYS.due("urgent"), 0, -1)) == sorted(j.id for j in jobs)
    assert redis_client.hgetall(KEYS.host("web-01")) == {
        "address": "10.0.0.1", "port": "22", "user": "deploy", "vars": '{"app_port": 8080}', "limits": ""}
    assert redis_client.hgetall(KEYS.host("db-02"))["port"] == "2222"


def test_the_operator_is_the_as_option_else_the_environment(
        cli: Cli, redis_client: redis.Redis) -> None:
    cli.env["FLEETSCHED_OPERATOR"] = "env-operator"
    first = cli.submit("command", "-t", "web-01", "-p", "cmd=true", operator=None)
    second = cli.submit("command", "-t", "web-01", "-p", "cmd=true", operator="alice")
    rows = dict(sql_rows(cli.database_url, "SELECT id, operator FROM tasks"))
    assert rows == {first: "env-operator", second: "alice"}
    assert Queue(redis_client, KEYS).task_state(str(second))["operator"] == "alice"


def test_dry_run_prints_the_hosts_when_each_runs_and_the_policy_and_writes_nothing(
        cli: Cli, redis_client: redis.Redis) -> None:
    before = (sql_snapshot(cli.database_url), redis_snapshot(redis_client))
    out = cli.ok("submit", "copy", "-t", "group:db", "-p", "src=/srv/a.conf", "-p",
                 "dest=/etc/a.conf", "--at", "2099-01-02T03:04:00+00:00", "--max-failures",
                 "34%", "--dry-run", "-o", "json")
    plan = json.loads(out)
    assert plan["dry_run"] is True
    assert [(j["host"], j["when"]) for j in plan["jobs"]] == [
        (h, "2099-01-02T03:04:00+00:00") for h in ("db-01", "db-02", "db-03")]
    assert plan["plan"]["max_failures"] == "2 hosts failing any attempt (34% of the hosts), then abort"
    assert plan["plan"]["idempotent"] == "yes (from the action)"
    assert (sql_snapshot(cli.database_url), redis_snapshot(redis_client)) == before
    # and the table form names every host and the blast radius
    code, out, err = cli("submit", "command", "-t", "group:web", "-p", "cmd=true", "--dry-run",
                         "--not-idempotent")
    assert code == 0 and all(f"web-0{i}" in out for i in range(1, 6))
    assert "dry run: command on 5 hosts in 1 groups" in err


def test_in_delays_every_job_by_the_redis_due_score(cli: Cli, redis_client: redis.Redis) -> None:
    import time

    task = cli.submit("command", "-t", "group:db", "-p", "cmd=true", "--in", "1h")
    scores = [s for _, s in redis_client.zrange(KEYS.due("normal"), 0, -1, withscores=True)]
    expected = time.time() * 1000 + 3_600_000
    assert len(scores) == 3 and all(abs(s - expected) < 60_000 for s in scores), (task, scores)


@pytest.mark.parametrize("target, message", [
    ("group:web,!group:web", "selects no hosts (everything was excluded)"),
    ("web-99", "no host named 'web-99'"),
    ("group:nope", "no group named 'nope'"),
    ("cache-*", "target term 'cache-*' selects no hosts"),
    ("!web-01", "only excludes hosts"),
    ("web-01,,db-01", "empty term"),
])
def test_a_target_that_selects_nothing_is_one_line_and_nothing_is_written(
        cli: Cli, redis_client: redis.Redis, target: str, message: str) -> None:
    before = (sql_snapshot(cli.database_url), redis_snapshot(redis_client))
    code, out, err = cli("submit", "command", "-t", target, "-p", "cmd=true", "--yes")
    assert code == 2 and out == ""
    assert err.splitlines()[0].startswith("error: ") and message in err.splitlines()[0]
    assert "Traceback" not in err
    assert (sql_snapshot(cli.database_url), redis_snapshot(redis_client)) == before


def test_a_fleet_wide_task_without_a_terminal_is_refused_unless_yes(
        tmp_path: Path, redis_url: str, db: str, redis_client: redis.Redis) -> None:
    # Given 30 hosts in 3 groups
    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, "[a]\nh-[00:09]\n[b]\nh-[10:19]\n[c]\nh-[20:29]\n")
    before = (sql_snapshot(db), redis_snapshot(redis_client))
    # When submitted without --yes and without a terminal: refused, exit 5, nothing written
    for target in ("group:a,group:b,group:c", "all,!h-0*"):
        code, out, err = cli("submit", "command", "-t", target, "-p", "cmd=true")
        assert code == 5, err
        lines = err.splitlines()
        assert lines[0].startswith("error: fleet-wide task not submitted: command on")
        assert lines[1] == "hint: add --yes"
    assert "on 30 hosts in 3 groups" in cli("submit", "command", "-t", "group:a,group:b,group:c",
                                             "-p", "cmd=true")[2]
    assert (sql_snapshot(db), redis_snapshot(redis_client)) == before
    # A small task is not fleet-wide, unless it says `all`
    cli.ok("submit", "command", "-t", "group:a", "-p", "cmd=true")
    # With --yes the fleet-wide one goes through
    task = cli.submit("command", "-t", "all", "-p", "cmd=true")
    assert Queue(redis_client, KEYS).task_state(str(task))["total"] == "30"


def test_secret_references_stay_references_in_sql_and_redis(
        cli: Cli, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SUBMIT_CANARY", "canary-value-51f3")
    task = cli.submit("command", "-t", "web-01", "-p", "cmd=echo @env:SUBMIT_CANARY",
                      "-p", "stdin=@env:SUBMIT_CANARY")
    spec = json.loads(Queue(redis_client, KEYS).task_state(str(task))["spec"])
    assert spec["params"] == {"cmd": ["echo", "@env:SUBMIT_CANARY"], "stdin": "@env:SUBMIT_CANARY"}
    everything = json.dumps(sql_snapshot(cli.database_url)) + repr(redis_snapshot(redis_client))
    assert "canary-value-51f3" not in everything
    assert "@env:SUBMIT_CANARY" in everything


def test_redis_down_at_submit_fails_in_one_line_the_task_stays_accepted_and_reconcile_queues_it(
        tmp_path: Path, db: str, private_redis, redis_url: str) -> None:
    # Given a fleet and a Redis server that is down
    cli = Cli(tmp_path, private_redis.url, db)
    inventory(cli, tmp_path, FLEET)
    private_redis.kill()
    # When a task is submitted
    code, out, err = cli("submit", "command", "-t", "group:web", "-p", "cmd=true",
                         "--executor", "simulate", "--executor-option", "duration_ms=5")
    # Then the command fails with one line naming the task, and a hint
    assert code == 1 and out == ""
    lines = err.splitlines()
    assert lines[0].startswith("error: task 1 is recorded but not queued: ")
    assert lines[1].startswith("hint: run `fleetsched reconcile`") and len(lines) == 2
    # And SQL records it as accepted, not queued
    assert sql_rows(db, "SELECT state FROM tasks")[0].state == "accepted"
    assert {r.state for r in sql_rows(db, "SELECT state FROM jobs")} == {"accepted"}
    # When Redis is back and reconcile runs
    private_redis.start()
    cli.ok("reconcile", "--nodes-stopped")
    # Then the task, its five jobs and its hosts are in Redis, with the spec as submitted
    client = redis.Redis.from_url(private_redis.url, decode_responses=True)
    try:
        live = Queue(client, KEYS).task_state("1")
        assert live["total"] == "5" and json.loads(live["spec"])["executor_options"] == {
            "duration_ms": "5"}
        assert client.zcard(KEYS.due("normal")) == 5
        assert client.hget(KEYS.host("web-02"), "address") == "10.0.0.2"
    finally:
        client.close()


def test_a_fan_out_cut_off_halfway_is_finished_by_reconcile_without_doubling_a_job(
        tmp_path: Path, db: str, redis_client: redis.Redis, redis_url: str) -> None:
    from scheduler.record.engine import make_engine
    from scheduler.record.session import transaction
    from scheduler.submission.fanout import fan_out
    from scheduler.submission.reconcile import reconcile
    from scheduler.submission.submit import TaskRequest, plan_task, record_task

    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, "[all_of_them]\nn-[000:249]\n")
    engine = make_engine(db)
    try:
        # Given a task recorded in SQL whose fan-out stopped after its first 100 jobs
        with transaction(engine) as session:
            plan = plan_task(session, TaskRequest("command", "all", {"cmd": "true"},
                                                  executor="simulate"), operator="ops")
            task = record_task(session, plan)
        fan_out(redis_client, KEYS, plan.task_spec(task), plan.hosts[:100],
                plan.job_specs(task)[:100])
        queue = Queue(redis_client, KEYS)
        first = queue.claim("w", 10)  # and some of those already ran
        queue.ack("w", [(j.job_id, j.token, JobResult(0))
                        for j in first.jobs])
        # When reconcile runs
        report = reconcile(engine, queue, nodes_wait_ms=0, operator="ops")
        # Then the other 150 jobs are queued, nothing ran twice, nothing is missing
        assert report.jobs_requeued == 150
        due = set(redis_client.zrange(KEYS.due("normal"), 0, -1))
        acked = {j.job_id for j in first.jobs}
        assert due == {f"{task}.{n}" for n in range(250)} - acked
        assert redis_client.exists(KEYS.host("n-249"))
    finally:
        engine.dispose()


@pytest.mark.parametrize("answer, code", [("n", 5), ("y", 0)])
def test_a_fleet_wide_task_at_a_terminal_asks_first_and_submits_only_on_yes(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis, answer: str, code: int) -> None:
    import os
    import pty
    import subprocess
    import sys

    # Given 30 hosts in 3 groups and a real terminal on stdin
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, "[a]\nh-[00:09]\n[b]\nh-[10:19]\n[c]\nh-[20:29]\n")
    master, slave = pty.openpty()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")},
           "FLEETSCHED_REDIS_URL": redis_url, "FLEETSCHED_DATABASE_URL": db,
           "FLEETSCHED_OPERATOR": "tty-user", "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "NO_COLOR": "1"}
    # When the operator submits without --yes and answers the question
    proc = subprocess.Popen([sys.executable, "-c", "from scheduler.cli.app import main; main()",
                             "submit", "command", "-t", "all", "-p", "cmd=true"],
                            stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    os.close(slave)
    os.write(master, f"{answer}\n".encode())
    out, err = proc.communicate(timeout=60)
    os.close(master)
    # Then the blast radius was shown, and only "y" submitted the task
    assert proc.returncode == code, err
    assert "fleet-wide: command on 30 hosts in 3 groups (target all)" in err.decode()
    tasks = sql_rows(db, "SELECT id, operator FROM tasks")
    if answer == "y":
        assert [(t.operator) for t in tasks] == ["tty-user"] and out.decode().strip() == str(tasks[0].id)
        assert redis_client.zcard(KEYS.due("normal")) == 30
    else:
        assert tasks == [] and redis_client.zcard(KEYS.due("normal")) == 0
        assert "error: not submitted" in err.decode()


def test_in_window_gives_each_job_its_hosts_next_opening_and_refuses_hosts_without_one(
        cli: Cli, redis_client: redis.Redis) -> None:
    from datetime import datetime, timezone
    from zoneinfo import ZoneInfo

    from scheduler.record.models import Group, Window, WindowAssignment

    # Given a nightly two-hour window (22:00 Berlin) on group web, and none on group db
    engine = sa.create_engine(cli.database_url)
    with sa.orm.Session(engine) as s:
        w = Window(name="nightly", kind="recurring", cron="0 22 * * *", duration_s=7200,
                   tz="Europe/Berlin")
        s.add(w)
        s.flush()
        s.add(WindowAssignment(window_id=w.id,
                               group_id=s.scalar(sa.select(Group.id).where(Group.name == "web"))))
        s.commit()
    engine.dispose()
    # When a task for web is submitted --in-window
    task = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--in-window",
                      "--executor", "simulate")
    # Then every job waits for its next opening (or, submitted inside one, is due at once),
    # with the window and the opening's close (midnight in Berlin) on the job
    state = Queue(redis_client, KEYS).job_state(f"{task}.0")
    due = datetime.fromtimestamp(int(state["due"]) / 1000, timezone.utc)
    close = datetime.fromtimestamp(int(state["wclose"]) / 1000, timezone.utc)
    berlin = ZoneInfo("Europe/Berlin")
    assert state["window"] == "nightly" and close.astimezone(berlin).hour == 0
    if due > datetime.now(timezone.utc):  # before tonight's opening
        assert (close - due).total_seconds() == 7200 and due.astimezone(berlin).hour == 22
    else:  # submitted between 22:00 and midnight in Berlin: in the opening already
        assert 0 < (close - due).total_seconds() <= 7200
    rows = sql_rows(cli.database_url, "SELECT \"window\" AS w, due_at FROM jobs WHERE task_id = :t", t=task)
    assert {r.w for r in rows} == {"nightly"} and len(rows) == 5
    # And a target with hosts that have no window is refused, naming them, with nothing written
    code, _, err = cli("submit", "command", "-t", "all", "-p", "cmd=true", "--in-window", "--yes")
    assert code == 2 and "3 of 8 hosts have no service window: db-01, db-02, db-03" in err
    assert len(sql_rows(cli.database_url, "SELECT id FROM tasks")) == 1
