"""Every query an operator command runs on ``events`` and ``jobs`` starts from an index, on
SQLite and on a real PostgreSQL, checked on the plans of the statements the commands really
send (captured as they run, then EXPLAINed with the same parameters).

The record holds about 60,000 events (49 tasks of 400 jobs, one a day up to 6 hours ago, a
task of 10,000 jobs 20 days ago, schedule events), ANALYZEd, so the planner's choice is the one it makes for real: a
missing index shows as a sequential scan (``Seq Scan`` / SQLite ``SCAN``) or as another index
than the one the command relies on.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.record import migrate
from scheduler.record.engine import make_engine
from scheduler.record.models import Event, Job, Schedule, Task

# Under pytest-xdist the module's tests share one process: the record is loaded once per database.
pytestmark = pytest.mark.xdist_group("record-indexes")

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
DAYS = 50
SMALL_JOBS = 400
BIG = DAYS  # the id of the 10,000-job task, created 20 days before NOW
BIG_JOBS = 10_000
HOSTS = 2_000
READS = re.compile(r"\b(?:FROM|JOIN)\s+(events|jobs)\b", re.IGNORECASE)


def _host(task: int, seq: int) -> str:
    return f"h{(task * 7 + seq * 13) % HOSTS:04d}"


def _rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Tasks, jobs and events of the record (see the module docstring)."""
    tasks, jobs, events = [], [], []

    def event(ts: datetime, kind: str, **fields: Any) -> None:
        events.append({"id": f"{int(ts.timestamp() * 1000)}-{len(events)}", "ts": ts,
                       "kind": kind, "task_id": None, "job_id": None, "host": None,
                       "worker": None, "operator": None, "data": {}, **fields})

    for t in range(1, DAYS + 1):
        size = BIG_JOBS if t == BIG else SMALL_JOBS
        created = NOW - (timedelta(days=20) if t == BIG
                         else timedelta(days=DAYS - 1 - t, hours=6))
        tasks.append({"id": t, "action": "command", "operator": "alice", "state": "succeeded",
                      "created_at": created, "finished_at": created + timedelta(hours=3),
                      "total": size})
        event(created, "submit", task_id=str(t), operator="alice", data={"count": size})
        event(created, "enqueue", task_id=str(t), data={"count": size})
        for s in range(size):
            job, host = f"{t}.{s}", _host(t, s)
            start = created + timedelta(seconds=s)
            failed, retried = s % 50 == 7, s % 33 == 5
            jobs.append({"id": job, "task_id": t, "seq": s, "host": host,
                         "state": "failed" if failed else "succeeded",
                         "attempts": 2 if retried else 1, "started_at": start,
                         "finished_at": start + timedelta(seconds=30),
                         "exit_code": int(failed)})
            common = {"task_id": str(t), "job_id": job, "host": host, "worker": "node-1"}
            if retried:
                event(start - timedelta(seconds=60), "claim", **common, data={"attempt": 1})
                event(start - timedelta(seconds=50), "retry", **common, data={"exit_code": 1})
            event(start, "claim", **common, data={"attempt": 2 if retried else 1})
            event(start + timedelta(seconds=30), "fail" if failed else "ack", **common,
                  data={"exit_code": int(failed), "output": [
                      {"command": "uptime", "exit_code": int(failed), "stdout_tail": "up"}]})
    event(NOW - timedelta(hours=1), "pause", task_id=str(BIG), operator="bob")
    for d in range(30):
        event(NOW - timedelta(days=d, hours=3), "missed", operator="scheduler",
              data={"schedule": "nightly", "occurrence": "1", "error": "late"})
    event(NOW - timedelta(days=2), "schedule-pause", operator="bob",
          data={"schedule": "nightly", "occurrence": None})
    return tasks, jobs, events


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def record(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[sa.Engine]:
    """The loaded, ANALYZEd record on SQLite, then on PostgreSQL."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('idx') / 'record.db'}"
    else:
        admin = sa.create_engine(request.getfixturevalue("postgres_admin_url"),
                                 isolation_level="AUTOCOMMIT")
        name = f"fleetsched_idx_{uuid.uuid4().hex[:8]}"
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        url = sa.make_url(request.getfixturevalue("postgres_admin_url")).set(
            database=name).render_as_string(hide_password=False)
    migrate.upgrade(url)
    engine = make_engine(url)
    tasks, jobs, events = _rows()
    with engine.begin() as conn:
        conn.execute(sa.insert(Schedule), [{"name": "nightly", "cron": "0 2 * * *",
                                            "action": "command", "target": "all"}])
        conn.execute(sa.insert(Task), tasks)
        conn.execute(sa.insert(Job), jobs)
        conn.execute(sa.insert(Event), events)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("ANALYZE")
    yield engine
    engine.dispose()


def _captured(engine: sa.Engine, command: Callable[[sa.Engine], Any]
              ) -> list[tuple[str, Any]]:
    """The statements reading ``events`` or ``jobs`` that ``command`` sent, with parameters."""
    seen: list[tuple[str, Any]] = []

    def keep(_conn: Any, _cursor: Any, statement: str, parameters: Any, _ctx: Any,
             executemany: bool) -> None:
        if not executemany and READS.search(statement):
            seen.append((statement, parameters))

    sa.event.listen(engine, "before_cursor_execute", keep)
    try:
        command(engine)
    finally:
        sa.event.remove(engine, "before_cursor_execute", keep)
    assert seen, "the command read neither events nor jobs"
    return seen


def _plan(conn: sa.Connection, statement: str, parameters: Any) -> tuple[set[str], set[str]]:
    """(tables read whole, indexes used) of one statement's plan."""
    if conn.dialect.name == "sqlite":
        lines = [r[3] for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}",
                                                    parameters)]
        whole = {m.group(1) for ln in lines if (m := re.match(r"SCAN (\w+)", ln))}
        used = {m.group(1) for ln in lines
                if (m := re.search(r"USING (?:COVERING )?INDEX (\w+)", ln))}
        return whole, used
    plan = conn.exec_driver_sql(f"EXPLAIN (FORMAT JSON) {statement}", parameters).scalar()
    plan = json.loads(plan) if isinstance(plan, str) else plan
    whole: set[str] = set()
    used: set[str] = set()
    nodes = [plan[0]["Plan"]]
    while nodes:
        node = nodes.pop()
        if node["Node Type"] == "Seq Scan":
            whole.add(node["Relation Name"])
        if "Index Name" in node:
            used.add(node["Index Name"])
        nodes.extend(node.get("Plans", []))
    return whole, used


def _show_task(engine: sa.Engine) -> None:
    from scheduler.submission.taskinfo import show_task

    with Session(engine) as session:
        show_task(session, BIG, None)


def _schedule_events(engine: sa.Engine) -> None:
    from scheduler.schedules.store import _paused_from, show_schedule

    with Session(engine) as session:
        show_schedule(session, "nightly", now=NOW)
        _paused_from(session, session.scalars(sa.select(Schedule)).one())


def _report(engine: sa.Engine) -> None:
    from scheduler.reports import ReportFilter, build_report

    build_report(engine, ReportFilter(since=NOW - timedelta(days=1)))


def _watch(engine: sa.Engine) -> None:
    from scheduler.views.live import FailureFeed

    FailureFeed(engine, [str(BIG)]).poll()


def _history(engine: sa.Engine) -> None:
    from scheduler.reports import event_trail

    event_trail(engine, host=_host(3, 5), limit=1000)


def _task_events(engine: sa.Engine) -> None:
    from scheduler.reports import event_trail

    event_trail(engine, task=BIG)


def _job(engine: sa.Engine) -> None:
    from scheduler.reports.attempts import job_attempts

    job_attempts(engine, f"{BIG}.5")


def _output(engine: sa.Engine) -> None:
    from scheduler.reports.attempts import task_outputs

    task_outputs(engine, BIG, failed=True)


def _prune(engine: sa.Engine) -> None:
    from scheduler.record.prune import prune

    # The oldest day's task and events. Batches of 100: a batch's rows are deleted by primary
    # key, which for 2,000 rows of a 60,000-row table costs PostgreSQL more than reading the
    # table (so it rightly does); at volume the default 2,000 go by key (docs/benchmarks.md).
    prune(engine, timedelta(days=DAYS - 2), now=NOW, batch=100)


# command -> (what runs it, the indexes it must use)
COMMANDS: dict[str, tuple[Callable[[sa.Engine], Any], set[str]]] = {
    "hosts history": (_history, {"ix_events_host_ts"}),
    "jobs show": (_job, {"ix_events_job_id_ts"}),
    "tasks output --failed": (_output, {"ix_events_job_id_ts"}),
    "tasks show": (_show_task, {"ix_jobs_task_id_state", "ix_events_kind_task_id_ts"}),
    "tasks show --events": (_task_events, {"ix_events_task_id_ts"}),
    "tasks watch": (_watch, {"ix_events_kind_task_id_ts"}),
    "report --since 1d": (_report, {"ix_jobs_finished_at", "ix_events_kind_task_id_ts"}),
    "schedules show, resume": (_schedule_events, {"ix_events_kind_task_id_ts"}),
    "db prune": (_prune, {"ix_events_ts"}),  # last: it deletes the oldest day
}
# SQLite's planner (no value histograms) prefers the index that yields a LIMITed query's ORDER
# BY: a task's rare kinds are read through (task_id, ts), filtered; still no table scan.
SQLITE_CHOOSES = {"tasks show": {"ix_jobs_task_id_state", "ix_events_task_id_ts"},
                  "tasks watch": {"ix_events_task_id_ts"}}


def test_the_record_fixture_is_big_enough_for_the_planner_to_choose(record: sa.Engine) -> None:
    # A plan on a near-empty table says nothing: the tables hold what the docstring says
    with record.connect() as conn:
        events = conn.execute(sa.select(sa.func.count()).select_from(Event)).scalar_one()
        jobs = conn.execute(sa.select(sa.func.count()).select_from(Job)).scalar_one()
    assert events > 55_000 and jobs > 29_000


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_operator_command_reads_events_and_jobs_only_through_their_indexes(
        record: sa.Engine, command: str) -> None:
    run, needed = COMMANDS[command]
    if record.dialect.name == "sqlite":
        needed = SQLITE_CHOOSES.get(command, needed)
    # Given the statements the command sends to the loaded record
    statements = _captured(record, run)
    # When each is EXPLAINed
    whole: set[str] = set()
    used: set[str] = set()
    with record.connect() as conn:
        for statement, parameters in statements:
            w, u = _plan(conn, statement, parameters)
            whole |= w
            used |= u
    # Then none reads events or jobs whole, and the indexes it relies on are the ones used
    assert not whole & {"events", "jobs"}, (command, whole, statements)
    assert needed <= used, (command, used)


def test_hosts_history_stops_reading_at_its_limit(record: sa.Engine) -> None:
    # Given a host with 30 events, read newest first with a limit of 5
    from scheduler.reports import event_trail

    host = _host(3, 5)
    [(statement, parameters)] = _captured(
        record, lambda e: event_trail(e, host=host, limit=5))
    with record.connect() as conn:
        total = conn.execute(sa.select(sa.func.count()).select_from(Event)
                             .where(Event.host == host)).scalar_one()
        assert total >= 20
        if conn.dialect.name == "sqlite":
            # Then SQLite walks the index in order, never sorting all the host's events
            plan = [r[3] for r in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}",
                                                       parameters)]
            assert not any(ln == "USE TEMP B-TREE FOR ORDER BY" for ln in plan), plan
            assert any("ix_events_host_ts" in ln for ln in plan), plan
            return
        # Then PostgreSQL's index scan hands up a few more rows than the limit, not all
        plan = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, FORMAT JSON) {statement}",
                                    parameters).scalar()
    nodes, scanned = [plan[0]["Plan"]], None
    while nodes:
        node = nodes.pop()
        if node.get("Index Name") == "ix_events_host_ts":
            scanned = node["Actual Rows"]
        nodes.extend(node.get("Plans", []))
    assert scanned is not None and scanned <= 6 < total, (scanned, total)
