"""Retention: ``prune`` removes old finished jobs, old events and emptied finished tasks in
small batches, never anything unfinished or recent; ``--dry-run`` only counts."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import sqlalchemy as sa

from scheduler.record import migrate
from scheduler.record.engine import make_engine
from scheduler.record.models import Event, Job, Task
from scheduler.record.prune import prune
from tests.cli.test_config import run_cli

NOW = datetime(2026, 6, 1, tzinfo=timezone.utc)
OLD = NOW - timedelta(days=120)
RECENT = NOW - timedelta(days=10)


def _fill(engine: sa.Engine) -> dict[str, int]:
    """An old finished task (7 jobs), an old task with one job still running, a recent task;
    events old and recent."""
    with engine.begin() as conn:
        def task(state: str, finished: datetime | None) -> int:
            return conn.execute(sa.insert(Task).values(
                action="command", operator="a", state=state, created_at=OLD,
                finished_at=finished).returning(Task.id)).scalar_one()

        old_done, old_running, recent = task("succeeded", OLD), task("active", None), task(
            "failed", RECENT)
        jobs = [{"id": f"{old_done}.{i}", "task_id": old_done, "seq": i, "host": f"h{i}",
                 "state": "succeeded", "finished_at": OLD} for i in range(7)]
        jobs += [{"id": f"{old_running}.0", "task_id": old_running, "seq": 0, "host": "h",
                  "state": "succeeded", "finished_at": OLD},
                 {"id": f"{old_running}.1", "task_id": old_running, "seq": 1, "host": "h",
                  "state": "running", "finished_at": None},
                 {"id": f"{recent}.0", "task_id": recent, "seq": 0, "host": "h",
                  "state": "failed", "finished_at": RECENT}]
        conn.execute(sa.insert(Job), jobs)
        conn.execute(sa.insert(Event), [
            {"id": f"{1000 + i}-0", "ts": OLD if i < 11 else RECENT, "kind": "ack", "data": {}}
            for i in range(15)])
    return {"old_done": old_done, "old_running": old_running, "recent": recent}


def test_prune_removes_only_old_finished_rows_in_batches(engine: sa.Engine) -> None:
    ids = _fill(engine)
    # When pruning 90 days in batches of 3
    result = prune(engine, timedelta(days=90), batch=3, now=NOW)
    # Then the 8 old finished jobs, 11 old events and the emptied old task are gone
    assert (result.jobs, result.events, result.tasks) == (8, 11, 1)
    # in transactions of at most 3 rows: 3 of jobs, 4 of events, 1 of tasks
    assert result.batches == 8
    with engine.connect() as conn:
        left_jobs = set(conn.scalars(sa.select(Job.id)))
        left_tasks = set(conn.scalars(sa.select(Task.id)))
        left_events = conn.execute(sa.select(sa.func.count()).select_from(Event)).scalar_one()
    assert left_jobs == {f"{ids['old_running']}.1", f"{ids['recent']}.0"}
    assert left_tasks == {ids["old_running"], ids["recent"]}
    assert left_events == 4


def test_a_dry_run_counts_what_a_prune_deletes_and_deletes_nothing(engine: sa.Engine) -> None:
    _fill(engine)
    dry = prune(engine, timedelta(days=90), dry_run=True, now=NOW)
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(Job)).scalar_one() == 10
    real = prune(engine, timedelta(days=90), now=NOW)
    assert (dry.jobs, dry.events, dry.tasks) == (real.jobs, real.events, real.tasks)


def test_db_prune_on_the_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    env = {"XDG_STATE_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "cfg")}
    migrate.upgrade(url)
    engine = make_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.insert(Event), [{"id": "1-0", "ts": datetime.now(timezone.utc)
                                         - timedelta(days=100), "kind": "ack", "data": {}}])
    engine.dispose()
    code, out, err = run_cli(["--database-url", url, "db", "prune", "--older-than", "90d",
                              "--dry-run", "-o", "json"], env)
    assert code == 0, err
    assert '"events": 1' in out and "would delete" in err
    code, _, err = run_cli(["--database-url", url, "db", "prune", "--older-than", "90d"], env)
    assert code == 0 and "deleted 0 jobs, 1 events" in err
    code, _, err = run_cli(["--database-url", url, "db", "prune", "--older-than", "soon"], env)
    assert code == 2 and err.startswith("error: --older-than 'soon' is not a duration")
