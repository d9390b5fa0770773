"""Writing a batch of stream events into SQL, idempotently (the recorder's database half).

One call of :func:`apply_events` is one transaction:

1. insert every event keyed by its stream id, ``ON CONFLICT DO NOTHING`` (a replayed batch
   inserts nothing twice);
2. fold the batch's events per job, in stream order, into one patch per job and update the
   job rows, only where the row has not yet seen a newer event (``last_event_pos``), so a
   replay or a late batch from another consumer never moves a job backwards;
3. apply task-level transitions (create, pause, resume, cancel, abort) the same way;
4. recompute the counters (and the finished state) of every task touched, from its job rows,
   under a row lock on the task, so concurrent recorders cannot overwrite each other's counts.

Rows that do not exist (the queue used without SQL fan-out, or task ids that are not SQL ids)
are simply not updated; their events are recorded all the same.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from scheduler.db.models import JOB_FINAL_STATES, Event, Job, Task
from scheduler.db.types import UTCDateTime, from_ms

OUTPUT_TAIL_MAX = 64 * 1024
INT_FIELDS = ("attempt", "token", "due", "count", "exit_code", "duration_ms")
COLUMN_FIELDS = ("kind", "ts", "task", "job", "host", "worker", "operator")
# Task-level transitions; job-level ones are in _job_patch.
TASK_STATE_BY_KIND = {"create": "active", "pause": "paused", "resume": "active",
                      "abort": "aborted", "cancel": "cancelled"}


class StreamEvent:
    """One stream entry: its id and its fields (strings); ``pos`` orders stream ids."""

    __slots__ = ("id", "fields", "pos")

    def __init__(self, id: str, fields: Mapping[str, str]) -> None:  # noqa: A002
        self.id = id
        self.fields = fields
        ms, _, seq = id.partition("-")
        # A sortable number for the stream id ``<ms>-<seq>``: ms * 10**6 + seq.
        self.pos = int(ms) * 1_000_000 + int(seq or 0)

    def __repr__(self) -> str:
        return f"StreamEvent({self.id!r}, {dict(self.fields)!r})"


@dataclass
class BatchResult:
    events: int = 0  # events in the batch
    inserted: int = 0  # rows new in the events table (a replay inserts 0)
    jobs_updated: int = 0
    tasks_updated: int = 0
    task_ids: set[int] = field(default_factory=set)


def _int(value: str | None) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        return None


def event_row(ev: StreamEvent) -> dict[str, Any]:
    """The events-table row of one stream entry (the recorder's per-event hot path)."""
    f = ev.fields
    data: dict[str, Any] = {}
    for key, value in f.items():
        if key in COLUMN_FIELDS:
            continue
        if key in INT_FIELDS:
            try:
                data[key] = int(value)
            except ValueError:
                data[key] = value
        elif key == "jobs":
            data[key] = value.split()
        elif key in ("detail", "output") and value[:1] in ("{", "["):
            try:
                data[key] = json.loads(value)
            except ValueError:
                data[key] = value
        else:
            data[key] = value
    ts = from_ms(_int(f.get("ts")) or int(ev.id.partition("-")[0]))
    return {"id": ev.id, "ts": ts, "kind": _cap(f.get("kind"), 24) or "unknown",
            "task_id": _cap(f.get("task"), 64), "job_id": _cap(f.get("job"), 80),
            "host": _cap(f.get("host"), 255), "worker": _cap(f.get("worker"), 255),
            "operator": _cap(f.get("operator"), 255), "data": data}


def _cap(value: str | None, width: int) -> str | None:
    """A column value that fits its column (a longer one is a malformed event, kept cut)."""
    return value[:width] if value else None


def _output_tail(value: str | None) -> str | None:
    if value is None:
        return None
    return value[-OUTPUT_TAIL_MAX:]


def _job_patch(kind: str, f: Mapping[str, str], ts: datetime) -> dict[str, Any] | None:
    patch = _job_state_patch(kind, f, ts)
    if patch is not None and kind not in ("enqueue", "cancel", "park", "unpark"):
        for col, key in (("attempts", "attempt"), ("token", "token")):
            if _int(f.get(key)) is not None:
                patch[col] = _int(f.get(key))
    return patch


def _lost_state(error: str) -> str:
    """Where a lost job went, read from the claim script's explanation (claim.lua ``lose``)."""
    if "runs again when the task resumes" in error:
        return "held"
    if "not run again because the task is" in error:
        return "cancelled"
    if "not run again" in error:
        return "lost"
    return "pending"  # run again: its new claim follows in the same script


def _job_state_patch(kind: str, f: Mapping[str, str], ts: datetime) -> dict[str, Any] | None:
    due = from_ms(_int(f.get("due")))
    if kind in ("enqueue", "release", "defer", "unpark"):
        patch: dict[str, Any] = {"state": "pending"}
        if due is not None:
            patch["due_at"] = due
        return patch
    if kind == "claim":
        patch = {"state": "running", "started_at": ts, "finished_at": None}
        if f.get("worker"):
            patch["worker"] = _cap(f["worker"], 255)
        return patch
    if kind in ("ack", "fail", "retry"):
        patch = {"state": {"ack": "succeeded", "fail": "failed", "retry": "pending"}[kind],
                 "exit_code": _int(f.get("exit_code")), "duration_ms": _int(f.get("duration_ms")),
                 "output_tail": _output_tail(f.get("output"))}
        if kind == "ack":
            patch["finished_at"] = ts
            patch["error"] = None
        elif kind == "fail":
            patch["finished_at"] = ts
            patch["error"] = f.get("error")
        else:
            patch["error"] = f.get("error")
            if due is not None:
                patch["due_at"] = due
        return patch
    if kind == "lost":
        state = _lost_state(f.get("error", ""))
        patch = {"state": state, "error": f.get("error")}
        if state in JOB_FINAL_STATES:
            patch["finished_at"] = ts
        return patch
    if kind == "park":
        return {"state": "parked"}
    if kind == "cancel":
        return {"state": "cancelled", "finished_at": ts}
    return None


def _job_ids(f: Mapping[str, str]) -> list[str]:
    ids = f.get("jobs", "").split()
    if f.get("job"):
        ids.append(f["job"])
    return ids


def _sql_task_id(value: str | None) -> int | None:
    if value and value.isdigit() and len(value) < 19:
        return int(value)
    return None


def _insert_events(conn: sa.Connection, rows: list[dict[str, Any]]) -> int:
    if conn.dialect.name == "sqlite":
        return _insert_events_sqlite(conn, rows)
    stmt = postgresql.insert(Event).on_conflict_do_nothing(index_elements=["id"])
    before = _count_existing(conn, [r["id"] for r in rows])
    conn.execute(stmt, rows)
    return len(rows) - before


_SQLITE_INSERT = ("INSERT INTO events (id, ts, kind, task_id, job_id, host, worker, operator, data)"
                  " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING")
def _sqlite_ts(value: datetime) -> str:
    """SQLAlchemy's SQLite DATETIME storage format, ``YYYY-MM-DD HH:MM:SS.ffffff`` in UTC
    (``isoformat`` is several times faster than ``strftime``)."""
    if value.utcoffset():
        value = value.astimezone(timezone.utc)
    return value.isoformat(" ", "microseconds")[:26]


def _insert_events_sqlite(conn: sa.Connection, rows: list[dict[str, Any]]) -> int:
    """The hot path of the default database: one driver-level executemany, values prepared
    here exactly as the ``UTCDateTime`` and ``JSON`` types store them (naive UTC text, JSON
    text), which is several times faster than per-row type processing for 1000-row batches.
    sqlite3's rowcount counts only the rows actually inserted, so replays report 0."""
    dumps = json.dumps
    params = [(r["id"], _sqlite_ts(r["ts"]), r["kind"], r["task_id"], r["job_id"],
               r["host"], r["worker"], r["operator"], dumps(r["data"])) for r in rows]
    cursor = conn.exec_driver_sql(_SQLITE_INSERT, params)
    return max(cursor.rowcount, 0)


def _count_existing(conn: sa.Connection, ids: Sequence[str]) -> int:
    # Counting replays costs one indexed lookup per batch; it lets run_once report honestly.
    if not ids:
        return 0
    return conn.execute(
        sa.select(sa.func.count()).select_from(Event).where(Event.id.in_(ids))).scalar_one()


def _update_rows(conn: sa.Connection, table: sa.Table, patches: dict[Any, tuple[int, dict]]) -> int:
    if conn.dialect.name == "sqlite":
        return _update_rows_sqlite(conn, table, patches)
    by_columns: dict[tuple[str, ...], list[dict[str, Any]]] = defaultdict(list)
    for key in sorted(patches):  # a fixed order: concurrent recorders lock rows alike
        pos, patch = patches[key]
        cols = tuple(sorted(patch))
        by_columns[cols].append({"_id": key, "_pos": pos, **{f"v_{c}": patch[c] for c in cols}})
    updated = 0
    for cols, params in by_columns.items():
        result = conn.execute(_guarded_update(table, cols), params)
        updated += max(result.rowcount, 0)
    return updated


def _update_rows_sqlite(conn: sa.Connection, table: sa.Table,
                        patches: dict[Any, tuple[int, dict]]) -> int:
    """The same guarded updates as one driver-level executemany per column set, datetimes
    prepared as ``UTCDateTime`` stores them on SQLite (see ``_insert_events_sqlite``)."""
    by_columns: dict[tuple[str, ...], list[tuple[Any, ...]]] = defaultdict(list)
    for key in sorted(patches):
        pos, patch = patches[key]
        cols = tuple(sorted(patch))
        values = [_sqlite_ts(v) if isinstance(v, datetime) else v
                  for v in (patch[c] for c in cols)]
        by_columns[cols].append((*values, pos, key, pos))
    updated = 0
    for cols, params in by_columns.items():
        sets = ", ".join(f'"{c}" = ?' for c in cols)
        sql = (f"UPDATE {table.name} SET {sets}, last_event_pos = ? WHERE id = ? "
               f"AND (last_event_pos IS NULL OR last_event_pos < ?)")
        updated += max(conn.exec_driver_sql(sql, params).rowcount, 0)
    return updated


@functools.lru_cache(maxsize=256)
def _guarded_update(table: sa.Table, cols: tuple[str, ...]) -> sa.Update:
    """UPDATE table SET cols.. WHERE id = :_id AND the row has seen no newer event (cached:
    building the statement object costs more than running it for a small batch)."""
    return (sa.update(table)
            .where(table.c.id == sa.bindparam("_id"))
            .where(sa.or_(table.c.last_event_pos.is_(None),
                          table.c.last_event_pos < sa.bindparam("_pos")))
            .values({**{c: sa.bindparam(f"v_{c}") for c in cols},
                     "last_event_pos": sa.bindparam("_pos")}))


def apply_events(conn: sa.Connection, events: Iterable[StreamEvent]) -> BatchResult:
    """Write ``events`` into the open transaction on ``conn`` (see the module docstring)."""
    events = sorted(events, key=lambda e: e.pos)
    result = BatchResult(events=len(events))
    if not events:
        return result
    rows = [event_row(ev) for ev in events]
    result.inserted = _insert_events(conn, rows)

    job_patches: dict[str, tuple[int, dict[str, Any]]] = {}
    task_patches: dict[int, tuple[int, dict[str, Any]]] = {}
    started: dict[int, datetime] = {}
    for ev, row in zip(events, rows):
        kind, f, ts = row["kind"], ev.fields, row["ts"]
        task_id = _sql_task_id(f.get("task"))
        job_ids = _job_ids(f)
        patch = _job_patch(kind, f, ts) if job_ids else None
        if patch is not None:
            for job_id in job_ids:
                tid = _sql_task_id(job_id.partition(".")[0])
                if tid is None:
                    continue  # not a SQL task's job: no row to update
                old = job_patches.get(job_id, (0, {}))[1]
                job_patches[job_id] = (ev.pos, {**old, **patch})
                result.task_ids.add(tid)
        if task_id is not None and kind in TASK_STATE_BY_KIND and (
                kind != "cancel" or f.get("operator")):  # an abort's cancel keeps "aborted"
            old = task_patches.get(task_id, (0, {}))[1]
            task_patches[task_id] = (ev.pos, {**old, "state": TASK_STATE_BY_KIND[kind]})
            result.task_ids.add(task_id)
        if kind == "claim" and task_id is not None:
            started.setdefault(task_id, ts)
    result.jobs_updated = _update_rows(conn, Job.__table__, job_patches)
    _update_rows(conn, Task.__table__, task_patches)
    result.tasks_updated = _refresh_tasks(conn, sorted(result.task_ids), started)
    return result


_FINISHED = sa.case((Job.state.in_(JOB_FINAL_STATES), 1), else_=0)


def _refresh_tasks(conn: sa.Connection, task_ids: list[int], started: dict[int, datetime]) -> int:
    """Recompute counters and the finished state of ``task_ids`` from their job rows."""
    if not task_ids:
        return 0
    states = dict(conn.execute(sa.select(Task.id, Task.state).where(Task.id.in_(task_ids))
                               .order_by(Task.id).with_for_update()).all())
    if not states:
        return 0
    counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    last_finish: dict[int, datetime | None] = {}
    q = (sa.select(Job.task_id, Job.state, sa.func.count(), sa.func.max(Job.finished_at))
         .where(Job.task_id.in_(list(states))).group_by(Job.task_id, Job.state))
    for tid, state, n, fin in conn.execute(q):
        counts[tid][state] = n
        if fin is not None and (last_finish.get(tid) is None or fin > last_finish[tid]):
            last_finish[tid] = fin
    updated = 0
    for tid, state in states.items():
        c = counts.get(tid)
        if not c:
            continue  # no job rows: the queue was used without SQL fan-out
        total = sum(c.values())
        done = sum(c[s] for s in JOB_FINAL_STATES)
        values: dict[str, Any] = {
            "total": total, "running": c["running"], "succeeded": c["succeeded"],
            "failed": c["failed"], "lost": c["lost"], "cancelled": c["cancelled"]}
        if done == total:
            if state in ("accepted", "active", "paused"):
                values["state"] = "succeeded" if c["failed"] + c["lost"] == 0 else "failed"
            if last_finish.get(tid) is not None:
                values["finished_at"] = sa.func.coalesce(
                    Task.finished_at, sa.literal(last_finish[tid], UTCDateTime()))
        stmt = sa.update(Task).where(Task.id == tid).values(values)
        if tid in started:
            stmt = stmt.values(started_at=sa.func.coalesce(
                Task.started_at, sa.literal(started[tid], UTCDateTime())))
        conn.execute(stmt)
        updated += 1
    return updated


__all__ = ["StreamEvent", "BatchResult", "apply_events", "event_row"]
