"""``fleetsched windows`` and ``submit --in-window``: definitions, zones, approval, assignment
precedence, freezes, refusals. Real redis-server, SQLite and PostgreSQL, through ``main()``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from scheduler.record.migrate import upgrade
from tests.submit_support import KEYS, Cli, inventory, redis_snapshot, sql_rows

FLEET = """
[web]
web-01 ansible_host=10.0.0.1
web-02 ansible_host=10.0.0.2
[db]
db-01 ansible_host=10.0.1.1
db-02 ansible_host=10.0.1.2
"""
TABLES = ("windows", "window_assignments", "tasks", "jobs", "events", "schedules")


@pytest.fixture
def db(database_url: str) -> str:
    upgrade(database_url)
    return database_url


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, db: str) -> Cli:
    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, FLEET)
    return cli


def snapshot(url: str) -> dict[str, list[str]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {t: sorted(map(repr, conn.execute(sa.text(f"SELECT * FROM {t}")).all()))
                    for t in TABLES}
    finally:
        engine.dispose()


def iso(at: datetime) -> str:
    return at.astimezone(timezone.utc).replace(microsecond=0).isoformat()


def soon(minutes: int) -> datetime:
    return (datetime.now(timezone.utc) + timedelta(minutes=minutes)).replace(second=0, microsecond=0)


def test_next_openings_are_shown_in_the_windows_zone_and_in_utc(cli: Cli) -> None:
    # Given a weekly Sunday 01:00 Berlin window of 3 hours
    cli.ok("windows", "add", "sun", "--rrule", "FREQ=WEEKLY;BYDAY=SU;BYHOUR=1", "--duration", "3h",
           "--tz", "Europe/Berlin")
    # When the next three openings are asked for
    rows = json.loads(cli.ok("windows", "next", "sun", "--count", "3", "-o", "json"))
    # Then each is a Sunday 01:00-04:00 Berlin wall time, the same instant as its UTC form
    assert len(rows) == 3
    for row in rows:
        local, utc = datetime.fromisoformat(row["start_local"]), datetime.fromisoformat(row["start_utc"])
        assert (local.weekday(), local.hour, local.minute) == (6, 1, 0) and local == utc
        assert utc.utcoffset() == timedelta(0) and local.utcoffset() in (timedelta(hours=1), timedelta(hours=2))
        assert datetime.fromisoformat(row["end_utc"]) - utc == timedelta(hours=3)
    starts = [datetime.fromisoformat(r["start_utc"]) for r in rows]
    assert all(b - a in (timedelta(days=7), timedelta(days=7, hours=1), timedelta(days=6, hours=23))
               for a, b in zip(starts, starts[1:]))
    listed = json.loads(cli.ok("windows", "list", "-o", "json"))
    assert [(w["name"], w["kind"], w["approval"]) for w in listed] == [("sun", "recurring", "not required")]


def test_submit_in_window_gives_each_host_its_next_opening_the_hosts_own_window_first(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    # Given group web with a one-off window in 2 hours, and web-01 with its own in 1 hour
    a, b = soon(120), soon(60)
    cli.ok("windows", "add", "grp", "--start", iso(a), "--end", iso(a + timedelta(hours=1)))
    cli.ok("windows", "add", "own", "--start", iso(b), "--end", iso(b + timedelta(minutes=30)))
    cli.ok("windows", "assign", "grp", "--group", "web")
    cli.ok("windows", "assign", "own", "--host", "web-01")
    # When a task for the group is submitted in windows
    task = cli.submit("command", "-t", "group:web", "-p", "cmd=true", "--executor", "simulate",
                      "--in-window")
    # Then web-01 is due at its own window, web-02 at the group's (SQL and Redis agree)
    rows = {r.host: r for r in sql_rows(db, 'SELECT host, due_at, "window" FROM jobs WHERE task_id = :t', t=task)}
    assert {h: r.window for h, r in rows.items()} == {"web-01": "own", "web-02": "grp"}
    for job, host, at in ((f"{task}.0", "web-01", b), (f"{task}.1", "web-02", a)):
        assert redis_client.zscore(KEYS.due("normal"), job) == at.timestamp() * 1000
        assert redis_client.hget(KEYS.job(job), "window") == rows[host].window
    # And the workers can read both definitions
    assert redis_client.hget(KEYS.window("own"), "starts_at") == str(int(b.timestamp() * 1000))


def test_hosts_without_a_window_are_refused_at_submission_listing_them_and_nothing_is_written(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    # Given only group web has a window
    at = soon(60)
    cli.ok("windows", "add", "grp", "--start", iso(at), "--duration", "1h")
    cli.ok("windows", "assign", "grp", "--group", "web")
    before_sql, before_redis = snapshot(db), redis_snapshot(redis_client)
    # When a windowed task targets every host
    code, out, err = cli("submit", "command", "-t", "all", "-p", "cmd=true", "--in-window", "--yes")
    # Then it is refused in one line naming the db hosts, and nothing changed
    assert code == 2 and out == ""
    assert err.splitlines()[0] == "error: 2 of 4 hosts have no service window: db-01, db-02"
    assert err.splitlines()[1].startswith("hint: ")
    assert snapshot(db) == before_sql and redis_snapshot(redis_client) == before_redis


def test_an_unapproved_window_is_never_used_until_approved_and_the_approval_is_an_event(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    # Given a window that requires the customer's approval
    at = soon(90)
    cli.ok("windows", "add", "acme", "--start", iso(at), "--duration", "2h", "--requires-approval")
    cli.ok("windows", "assign", "acme", "--group", "db")
    assert redis_client.hget(KEYS.window("acme"), "approved") == "0"
    # When a windowed task is submitted before the approval, it is refused
    code, _, err = cli("submit", "command", "-t", "group:db", "-p", "cmd=true", "--in-window", "--yes")
    assert code == 2 and "no approved opening" in err and "db-01, db-02" in err
    # When alice approves it
    cli.ok("windows", "approve", "acme", operator="alice")
    # Then who and when are recorded (row and event), Redis has it approved, and tasks may use it
    shown = json.loads(cli.ok("windows", "show", "acme", "-o", "json"))
    assert shown["approved_by"] == "alice" and shown["approved_at"]
    [event] = sql_rows(db, "SELECT operator, data FROM events WHERE kind = 'window-approve'")
    assert event.operator == "alice"
    assert redis_client.hget(KEYS.window("acme"), "approved") == "1"
    task = cli.submit("command", "-t", "group:db", "-p", "cmd=true", "--in-window", "--executor", "simulate")
    dues = {r[0] for r in sql_rows(db, "SELECT due_at FROM jobs WHERE task_id = :t", t=task)}
    assert {d.replace(tzinfo=timezone.utc) if d.tzinfo is None else d for d in
            (datetime.fromisoformat(str(x)) for x in dues)} == {at}


def test_a_freeze_on_a_group_pushes_its_hosts_past_it_whatever_their_windows_say(
        cli: Cli, db: str) -> None:
    # Given a daily window on web and a freeze over the first hour of the next opening
    start = soon(60)
    cli.ok("windows", "add", "daily", "--cron", f"{start.minute} {start.hour} * * *",
           "--duration", "3h")
    cli.ok("windows", "add", "hold", "--freeze", "--start", iso(start - timedelta(minutes=5)),
           "--end", iso(start + timedelta(hours=1)))
    cli.ok("windows", "assign", "daily", "--group", "web")
    cli.ok("windows", "assign", "hold", "--group", "web")
    # When a windowed task is planned
    plan = json.loads(cli.ok("submit", "command", "-t", "group:web", "-p", "cmd=true",
                             "--in-window", "--dry-run", "-o", "json"))
    # Then every job is due when the freeze ends, and carries the freeze in its window field
    for job in plan["jobs"]:
        assert job["window"] == "daily !hold"
        assert job["when"].startswith(iso(start + timedelta(hours=1)))


def test_removing_a_window_drops_its_assignments_and_leaves_a_tombstone_in_redis(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    cli.ok("windows", "add", "tmp", "--start", iso(soon(60)), "--duration", "1h")
    cli.ok("windows", "assign", "tmp", "--host", "web-01", "--group", "db")
    assert redis_client.exists(KEYS.window("tmp"))
    cli.ok("windows", "remove", "tmp")
    assert sql_rows(db, "SELECT * FROM window_assignments") == []
    # the copy is a tombstone: jobs queued under it learn it is gone for good
    assert list(redis_client.hgetall(KEYS.window("tmp"))) == ["removed"]
    kinds = [r.kind for r in sql_rows(db, "SELECT kind FROM events WHERE kind LIKE 'window-%'")]
    assert sorted(kinds) == ["window-add", "window-assign", "window-remove"]
    code, _, err = cli("windows", "show", "tmp")
    assert code == 4 and err.startswith("error: no window named 'tmp'")


BAD = [
    (["--cron", "61 * * * *", "--duration", "1h"], "error: invalid cron expression '61 * * * *': bad minute field '61'"),
    (["--rrule", "FREQ=WEEKLY;BYDAY=XX", "--duration", "1h"], "error: invalid RRULE 'FREQ=WEEKLY;BYDAY=XX'"),
    (["--cron", "0 1 * * *", "--duration", "1h", "--tz", "Europe/Atlantis"], "error: unknown time zone 'Europe/Atlantis'"),
    (["--cron", "0 1 * * *", "--duration", "-2h"], "error: --duration '-2h' must be positive"),
    (["--cron", "0 1 * * *", "--duration", "0s"], "error: --duration '0s' must be longer than zero"),
    (["--cron", "0 1 * * *", "--duration", "876000h"], "error: --duration '876000h' is longer than a window may last (366d)"),
    (["--start", "2031-01-02T00:00", "--duration", "367d"], "error: --duration '367d' is longer than a window may last (366d)"),
    (["--start", "2031-01-02T00:00", "--end", "2031-01-01T00:00"], "error: window 'w': end 2031-01-01 00:00:00 is not after start"),
    (["--cron", "0 1 * * *", "--duration", "1h", "--end-time", "03:00"], "error: window 'w': a recurring window needs a duration or an end time (one of them)"),
    (["--start", "2001-01-01T00:00", "--duration", "1h"], "error: window 'w': it ended at 2001-01-01 01:00 UTC"),
]


@pytest.mark.parametrize(("args", "line"), BAD, ids=[b[1].split(":")[1].strip()[:30] for b in BAD])
def test_bad_window_input_is_one_clear_line_and_writes_nothing(
        cli: Cli, redis_client: redis.Redis, db: str, args: list[str], line: str) -> None:
    before_sql, before_redis = snapshot(db), redis_snapshot(redis_client)
    code, out, err = cli("windows", "add", "w", *args)
    assert code == 2 and out == "", err
    assert err.splitlines()[0].startswith(line), err
    assert len([x for x in err.splitlines() if x.startswith("error:")]) == 1
    assert "Traceback" not in err
    assert snapshot(db) == before_sql and redis_snapshot(redis_client) == before_redis


def test_a_window_may_last_a_whole_leap_year(cli: Cli) -> None:
    cli.ok("windows", "add", "yearly", "--cron", "0 0 1 1 *", "--duration", "8784h")
    assert "31622400" in cli.ok("windows", "show", "yearly")  # duration_s: 366 days


def test_assigning_to_an_unknown_host_writes_nothing(cli: Cli, db: str) -> None:
    cli.ok("windows", "add", "w", "--start", iso(soon(60)), "--duration", "1h")
    before = snapshot(db)
    code, _, err = cli("windows", "assign", "w", "--group", "web", "--host", "nope")
    assert code == 4 and err.startswith("error: no host named 'nope'")
    assert snapshot(db) == before


def test_unassigning_removes_only_the_named_assignment_with_an_event_and_later_tasks_see_it(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    # Given a window assigned to web-01 and to group db
    at = soon(60)
    cli.ok("windows", "add", "w", "--start", iso(at), "--duration", "1h")
    cli.ok("windows", "assign", "w", "--host", "web-01", "--group", "db")
    # When alice takes the group's assignment back
    code, out, err = cli("windows", "unassign", "w", "--group", "db", operator="alice")
    # Then only host web-01 is left, the change is an event by alice, Redis still has the window
    assert code == 0 and out == "" and "1 assignments removed (by alice)" in err
    shown = json.loads(cli.ok("windows", "show", "w", "-o", "json"))
    assert shown["assigned"] == ["host:web-01"]
    [event] = sql_rows(db, "SELECT operator, data FROM events WHERE kind = 'window-unassign'")
    data = json.loads(event.data) if isinstance(event.data, str) else event.data
    assert event.operator == "alice" and data == {
        "window": "w", "hosts": [], "groups": ["db"], "removed": 1,
        "principal": {"via": "local-cli", "role": None, "tenant": None, "source": None}}
    assert redis_client.hget(KEYS.window("w"), "starts_at") == str(int(at.timestamp() * 1000))
    # And a windowed task for the db group is now refused: its hosts have no window
    code, _, err = cli("submit", "command", "-t", "group:db", "-p", "cmd=true", "--in-window", "--yes")
    assert code == 2 and "db-01, db-02" in err


def test_unassigning_what_is_not_assigned_is_one_line_exit_4_and_removes_nothing(
        cli: Cli, db: str) -> None:
    # Given a window assigned to web-01 only
    cli.ok("windows", "add", "w", "--start", iso(soon(60)), "--duration", "1h")
    cli.ok("windows", "assign", "w", "--host", "web-01")
    before = snapshot(db)
    # When web-01 (assigned) and web-02 (not assigned) are unassigned together
    code, out, err = cli("windows", "unassign", "w", "--host", "web-01", "--host", "web-02")
    # Then it is refused in one line naming web-02, and web-01 keeps its assignment
    assert code == 4 and out == ""
    assert err.splitlines()[0] == "error: window 'w' is not assigned to host 'web-02'"
    assert "Traceback" not in err
    assert snapshot(db) == before
    # And an unknown window, unknown host or no target at all are one line each, too
    for args, code_, line in ((["nope", "--host", "web-01"], 4, "error: no window named 'nope'"),
                              (["w", "--host", "ghost"], 4, "error: no host named 'ghost'"),
                              (["w"], 2, "error: give --host or --group (repeatable)")):
        code, _, err = cli("windows", "unassign", *args)
        assert code == code_ and err.splitlines()[0] == line, err
    assert snapshot(db) == before


def test_sync_turns_a_copy_of_a_window_sql_no_longer_has_into_a_tombstone(
        cli: Cli, redis_client: redis.Redis, db: str) -> None:
    # Given a copy in Redis of a window removed while Redis was unreachable
    cli.ok("windows", "add", "kept", "--start", iso(soon(60)), "--duration", "1h")
    redis_client.hset(KEYS.window("ghost"), mapping={"kind": "freeze", "tz": "UTC"})
    # When the windows are synced
    cli.ok("windows", "sync")
    # Then the stale copy is a tombstone and the stored window is copied as it is
    assert list(redis_client.hgetall(KEYS.window("ghost"))) == ["removed"]
    assert redis_client.hget(KEYS.window("kept"), "kind") == "oneoff"
