"""Change control safe by default (issue 26, section 4): freezes hold every job of every task,
windows apply by default to the actions that need them, and the two ways out
(``--ignore-windows``, ``--break-glass REASON``) are explicit and recorded. Real redis-server,
SQLite, a real worker process with the simulate executor, through ``main()``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis

from scheduler.queue.client import ClaimedJob, Queue
from scheduler.queue.schedules import arm
from scheduler.record.migrate import upgrade
from scheduler.windows.wire import BREAK_GLASS, unpublish
from tests.schedule_support import fired
from tests.submit_support import (
    KEYS,
    Cli,
    data,
    drain,
    events,
    inventory,
    redis_snapshot,
    sql_rows,
    sql_snapshot,
)
from tests.windows.test_window_deferral import define, started_claims
from tests.worker_support import WorkerProcess, wait_until, worker_args
from workers.deferral import window_deferral

S = 1000
T = 1_900_000_000_000  # a fixed instant for the hook's tests: judged by the claim's clock
FLEET = "[web]\nweb-01 ansible_host=10.0.0.1\nweb-02 ansible_host=10.0.0.2\n[db]\ndb-01\n"
FIRMWARE = ["firmware", "-p", "image=/srv/fw.bin", "-p", "expected_version=4.2",
            "-p", "upgrade_cmd=fw-up {image}", "-p", "version_cmd=fw-version"]


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(url)
    return url


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, db: str) -> Cli:
    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, FLEET)
    return cli


def iso(at: datetime) -> str:
    return at.astimezone(timezone.utc).isoformat()


def now_s() -> datetime:
    """Now, to the whole second (the windows' times are given to the second)."""
    return datetime.now(timezone.utc).replace(microsecond=0)


def ms(at: datetime) -> int:
    return int(at.timestamp() * 1000)


def freeze(cli: Cli, name: str, start: datetime, end: datetime, *assign: str) -> None:
    cli.ok("windows", "add", name, "--freeze", "--start", iso(start), "--end", iso(end))
    cli.ok("windows", "assign", name, *assign)


def run_worker_until(tmp_path: Path, redis_url: str, done: object, what: str,
                     timeout: float = 30) -> None:
    worker = WorkerProcess(redis_url, tmp_path, worker_args("w", slots=2, processes=1)).start()
    try:
        wait_until(done, timeout, what, worker.tail, watch=[worker])  # type: ignore[arg-type]
    finally:
        worker.stop()


def succeeded(client: redis.Redis, task: int) -> bool:
    return Queue(client, KEYS).task_state(str(task)).get("succeeded") == "1"


def claimed(job_id: str, window: str | None) -> ClaimedJob:
    return ClaimedJob(job_id=job_id, task_id=job_id.split(".")[0], host="h", token=1,
                      attempt=1, due_ms=0, window=window, wclose_ms=None, after_loss=False)


# ----------------------------------------------------------------- the hook, on real Redis


def test_a_job_without_a_window_is_deferred_to_the_end_of_its_hosts_freeze(
        redis_client: redis.Redis) -> None:
    define(redis_client, "f", T, T + 60 * S, freeze=True)
    # Named in the job's field at submission
    d = window_deferral(redis_client, KEYS, claimed("1.0", "!f"), T + 10 * S, 5 * S)
    assert d is not None and (d.due_ms, d.wclose_ms) == (T + 60 * S, None)
    assert d.reason.startswith("inside a freeze period") and not d.fail
    # Or assigned since (the host hash's freezes field), with no window field at all
    d = window_deferral(redis_client, KEYS, claimed("1.1", None), T + 10 * S, 5 * S, "f")
    assert d is not None and d.due_ms == T + 60 * S
    # A job that would still run when a freeze begins waits too (the expected duration)
    d = window_deferral(redis_client, KEYS, claimed("1.2", "!f"), T - 3 * S, 5 * S)
    assert d is not None and d.due_ms == T + 60 * S and "cutoff" in d.reason
    # And after the freeze, it runs
    assert window_deferral(redis_client, KEYS, claimed("1.3", "!f"), T + 60 * S, 5 * S) is None


def test_a_break_glass_job_ignores_every_freeze_but_not_its_window(
        redis_client: redis.Redis) -> None:
    define(redis_client, "f", T, T + 60 * S, freeze=True)
    define(redis_client, "w", T + 100 * S, T + 200 * S)
    assert window_deferral(redis_client, KEYS, claimed("1.0", BREAK_GLASS), T + 10 * S, 5 * S,
                           "f") is None
    d = window_deferral(redis_client, KEYS, claimed("1.1", f"w !f {BREAK_GLASS}"), T + 10 * S,
                        5 * S, "f")
    assert d is not None and d.due_ms == T + 100 * S and "outside its window" in d.reason


def test_a_removed_freeze_no_longer_holds_a_job_without_a_window(
        redis_client: redis.Redis) -> None:
    define(redis_client, "f", T, T + 60 * S, freeze=True)
    unpublish(redis_client, KEYS, ["f"], T)
    assert window_deferral(redis_client, KEYS, claimed("1.0", "!f"), T + 10 * S, 5 * S,
                           "f") is None


# -------------------------------------------------------------------- freezes hold every job


def test_a_freeze_holds_a_plain_command_task_and_the_dry_run_says_frozen_until_when(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    # Given a freeze on group web for the next hour, and no service window anywhere
    now = now_s()
    end = now + timedelta(hours=1)
    freeze(cli, "hold", now - timedelta(minutes=1), end, "--group", "web")
    # When a plain command is planned without --in-window
    plan = json.loads(cli.ok("submit", "command", "-t", "all", "-p", "cmd=true", "--dry-run",
                             "-o", "json"))
    # Then web's jobs are due when the freeze ends and say so; db-01 runs now
    when = {j["host"]: j for j in plan["jobs"]}
    for host in ("web-01", "web-02"):
        assert when[host]["when"] == f"{iso(end)} (frozen until {iso(end)}: !hold)"
        assert when[host]["frozen_until"] == iso(end) and when[host]["window"] == "!hold"
    assert when["db-01"]["when"] == "now" and when["db-01"]["window"] is None
    assert "2 of 3 hosts are frozen" in plan["plan"]["frozen"]
    assert plan["plan"]["windows"] == "none (runs when due); freezes hold its jobs"
    # And the task submitted is queued that way (SQL and Redis agree)
    task = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--executor", "simulate")
    for row in sql_rows(db, 'SELECT id, "window" FROM jobs WHERE task_id = :t', t=task):
        assert row.window == "!hold"
        assert redis_client.zscore(KEYS.due("normal"), row.id) == ms(end)


def test_a_frozen_job_does_not_run_inside_the_freeze_and_runs_after_it(
        cli: Cli, redis_client: redis.Redis, redis_url: str, db: str, tmp_path: Path) -> None:
    # Given a freeze on web-01 that ends in 4 seconds
    now = now_s()
    end = now + timedelta(seconds=4)
    freeze(cli, "short", now - timedelta(minutes=1), end, "--host", "web-01")
    # When a plain command is submitted to it now, and a worker runs
    task = cli.submit("command", "-t", "web-01", "-p", "cmd=true", "--executor", "simulate")
    run_worker_until(tmp_path, redis_url, lambda: succeeded(redis_client, task), "the job")
    # Then it started only once the freeze was over
    drain(redis_client, db)
    started, _ = started_claims(db)
    assert started[f"{task}.0"] and all(at >= ms(end) for at in started[f"{task}.0"])


def test_a_freeze_declared_after_submission_defers_a_due_job_at_its_claim(
        cli: Cli, redis_client: redis.Redis, redis_url: str, db: str, tmp_path: Path) -> None:
    # Given a plain command due in 2 seconds on web-01, queued while no freeze existed
    task = cli.submit("command", "-t", "web-01", "-p", "cmd=true", "--in", "2s",
                      "--executor", "simulate")
    assert redis_client.hget(KEYS.job(f"{task}.0"), "window") in (None, "")
    # When a freeze over the next 6 seconds is then assigned to the host
    now = now_s()
    end = now + timedelta(seconds=6)
    freeze(cli, "late", now - timedelta(minutes=1), end, "--host", "web-01")
    assert redis_client.hget(KEYS.host("web-01"), "freezes") == "late"
    assert redis_client.hget(KEYS.host("web-02"), "freezes") is None  # Redis never knew it
    run_worker_until(tmp_path, redis_url, lambda: succeeded(redis_client, task), "the job")
    # Then the claim that found it due deferred it to the freeze's end, where it ran
    drain(redis_client, db)
    started, defers = started_claims(db)
    assert [d for d in defers if d["job"] == f"{task}.0"
            and d.get("error", "").startswith("inside a freeze period")]
    assert started[f"{task}.0"] and all(at >= ms(end) for at in started[f"{task}.0"])
    # And unassigning the freeze clears the host's field
    cli.ok("windows", "unassign", "late", "--host", "web-01")
    assert redis_client.hget(KEYS.host("web-01"), "freezes") is None


def test_break_glass_runs_through_a_freeze_and_is_recorded_in_the_plan_the_task_and_the_report(
        cli: Cli, redis_client: redis.Redis, redis_url: str, db: str, tmp_path: Path) -> None:
    # Given web-01 frozen for an hour, with a job already held by the freeze
    now = now_s()
    freeze(cli, "year-end", now - timedelta(minutes=1), now + timedelta(hours=1),
           "--group", "web")
    held = cli.submit("command", "-t", "web-01", "-p", "cmd=true", "--executor", "simulate")
    cli.ok("windows", "sync")  # the host's hash now names the freeze too
    assert redis_client.hget(KEYS.host("web-01"), "freezes") == "year-end"
    reason = "INC-4711: DNS down, fix during the freeze"
    # When an operator plans, then submits, the fix with --break-glass
    plan = json.loads(cli.ok("submit", "command", "-t", "web-01", "-p", "cmd=true",
                             "--break-glass", reason, "--dry-run", "-o", "json"))
    assert plan["jobs"][0]["when"] == "now"
    assert plan["plan"]["windows"].endswith(f"BREAK-GLASS through freezes: {reason}")
    task = cli.submit("command", "-t", "web-01", "-p", "cmd=true", "--executor", "simulate",
                      "--break-glass", reason)
    run_worker_until(tmp_path, redis_url, lambda: succeeded(redis_client, task), "the fix")
    # Then it ran inside the freeze, while the other task's job still waits for the end
    assert Queue(redis_client, KEYS).task_state(str(held))["succeeded"] == "0"
    # And the reason is in the task's record, its submit event, tasks show and the report
    [row] = sql_rows(db, "SELECT break_glass FROM tasks WHERE id = :t", t=task)
    assert row.break_glass == reason
    [submit] = events(db, task, ["submit"])
    assert data(submit)["break_glass"] == reason
    shown = json.loads(cli.ok("tasks", "show", str(task), "-o", "json"))
    assert shown["break_glass"] == reason and reason in shown["windows"]
    assert f"BREAK-GLASS through freezes: {reason}" in cli.ok("report", "--task", str(task))
    [other] = sql_rows(db, "SELECT break_glass FROM tasks WHERE id = :t", t=held)
    assert other.break_glass is None


def test_a_schedules_occurrence_on_a_frozen_host_is_held_until_the_freeze_ends(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    # Given a one-second schedule of a plain command on web, frozen for the next hour
    now = now_s()
    end = now + timedelta(hours=1)
    freeze(cli, "hold", now - timedelta(minutes=1), end, "--group", "web")
    cli.ok("schedules", "add", "s", "--every", "1s", "command", "-t", "group:web",
           "-p", "cmd=true", "--executor", "simulate")
    arm(redis_client, KEYS, "s", ms(now), replace=True)
    # When a worker fires its occurrence
    [result] = fired(redis_client, db)
    # Then the occurrence's task waits for the freeze's end on every host
    [task] = result.tasks
    rows = sql_rows(db, 'SELECT id, "window" FROM jobs WHERE task_id = :t', t=task)
    assert len(rows) == 2
    for row in rows:
        assert row.window == "!hold"
        assert redis_client.zscore(KEYS.due("normal"), row.id) == ms(end)


# ---------------------------------------------------------------------- windows by default


def test_firmware_runs_in_its_hosts_windows_without_in_window(cli: Cli, db: str) -> None:
    # Given group web with a service window in an hour
    at = now_s().replace(second=0) + timedelta(hours=1)
    cli.ok("windows", "add", "fw", "--start", iso(at), "--duration", "2h")
    cli.ok("windows", "assign", "fw", "--group", "web")
    # When firmware is submitted without --in-window
    plan = json.loads(cli.ok("submit", *FIRMWARE, "-t", "group:web", "--dry-run", "-o", "json"))
    # Then each job waits for the window, and the plan says why
    assert plan["plan"]["windows"] == ("each host's service window (action firmware requires "
                                       "them); freezes hold its jobs")
    assert all(j["when"].startswith(iso(at)) and j["window"] == "fw" for j in plan["jobs"])
    task = cli.submit(*FIRMWARE, "-t", "group:web")
    [row] = sql_rows(db, "SELECT in_window, ignore_windows FROM tasks WHERE id = :t", t=task)
    assert (bool(row.in_window), bool(row.ignore_windows)) == (True, False)


def test_ignore_windows_runs_firmware_now_and_is_recorded_and_shown(
        cli: Cli, db: str, tmp_path: Path) -> None:
    at = now_s().replace(second=0) + timedelta(hours=1)
    cli.ok("windows", "add", "fw", "--start", iso(at), "--duration", "2h")
    cli.ok("windows", "assign", "fw", "--group", "web")
    # When firmware is planned with --ignore-windows (as an option, and in a task file)
    plan = json.loads(cli.ok("submit", *FIRMWARE, "-t", "group:web", "--ignore-windows",
                             "--dry-run", "-o", "json"))
    path = tmp_path / "task.yaml"
    path.write_text("action: firmware\ntarget: group:web\nignore_windows: true\nparams:\n"
                    "  image: /srv/fw.bin\n  expected_version: '4.2'\n"
                    "  upgrade_cmd: fw-up {image}\n  version_cmd: fw-version\n")
    from_file = json.loads(cli.ok("submit", "-f", str(path), "--dry-run", "-o", "json"))
    # Then its jobs run now, outside the windows, and the plan says so
    for p in (plan, from_file):
        assert p["plan"]["windows"] == ("outside service windows (--ignore-windows); "
                                        "freezes hold its jobs")
        assert [(j["when"], j["window"]) for j in p["jobs"]] == [("now", None)] * 2
    # And the choice is in the task's record, its submit event, tasks show and the report
    task = cli.submit(*FIRMWARE, "-t", "group:web", "--ignore-windows")
    [row] = sql_rows(db, "SELECT in_window, ignore_windows FROM tasks WHERE id = :t", t=task)
    assert (bool(row.in_window), bool(row.ignore_windows)) == (False, True)
    # (a schedule keeps the choice for each of its tasks)
    cli.ok("schedules", "add", "fw", "--every", "1h", *FIRMWARE, "-t", "group:web",
           "--ignore-windows")
    [sched] = sql_rows(db, "SELECT options FROM schedules WHERE name = 'fw'")
    options = json.loads(sched.options) if isinstance(sched.options, str) else sched.options
    assert options["ignore_windows"] is True
    [submit] = events(db, task, ["submit"])
    assert data(submit)["ignore_windows"] is True
    shown = json.loads(cli.ok("tasks", "show", str(task), "-o", "json"))
    assert shown["ignore_windows"] is True
    assert shown["windows"].startswith("outside service windows (--ignore-windows)")
    assert "outside service windows (--ignore-windows)" in cli.ok("report", "--task", str(task))


# ------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize("args, message", [
    (["command", "-t", "web-01", "-p", "cmd=true", "--break-glass", ""],
     "--break-glass needs a reason"),
    (["command", "-t", "web-01", "-p", "cmd=true", "--break-glass", "   "],
     "--break-glass needs a reason"),
    ([*FIRMWARE, "-t", "web-01", "--in-window", "--ignore-windows"],
     "give --in-window or --ignore-windows, not both"),
    ([*FIRMWARE, "-t", "db-01"],
     "action firmware runs inside service windows, and 1 of 1 hosts have no service window: "
     "db-01"),
])
def test_bad_window_and_freeze_options_are_one_line_and_nothing_is_written(
        cli: Cli, redis_client: redis.Redis, args: list[str], message: str) -> None:
    before = (sql_snapshot(cli.database_url), redis_snapshot(redis_client))
    code, out, err = cli("submit", *args, "--yes")
    lines = err.splitlines()
    assert code == 2 and out == "" and lines[0].startswith(f"error: {message}"), err
    assert all(line.startswith("hint: ") for line in lines[1:2]) and len(lines) <= 2, err
    assert (sql_snapshot(cli.database_url), redis_snapshot(redis_client)) == before


def test_a_task_file_with_an_empty_break_glass_reason_is_refused_with_its_line(
        cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("action: command\ntarget: web-01\nbreak_glass: ''\nparams: {cmd: 'true'}\n")
    code, out, err = cli("submit", "-f", str(path), "--yes")
    assert code == 2 and out == ""
    assert err.splitlines()[0] == f"error: {path}:3: break_glass must be the reason, as text"
