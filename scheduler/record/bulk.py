"""The recorder's bulk SQL writes (``scheduler.record.fold`` folds a batch of events; this module
writes what the fold produced), on SQLite and PostgreSQL.

A ``Writer``:

1. converts ms epochs into the value its driver stores for a ``UTCDateTime`` column (SQLite:
   naive UTC text ``YYYY-MM-DD HH:MM:SS.ffffff``, exactly what SQLAlchemy writes; PostgreSQL: an
   aware datetime), once per second of time seen, so no row pays for type processing;
2. inserts event rows (tuples in ``EVENT_COLUMNS`` order) with ``ON CONFLICT (id) DO NOTHING``
   and returns how many were new (a replay inserts 0);
3. applies per-row patches ``{id: (pos, {column: value})}`` as guarded updates: a row moves only
   if its ``last_event_pos`` is older than the patch's position, so replays and late batches
   never move a row backwards;
4. recomputes the counters and the finished state of tasks from their job rows.

Every write is one driver-level ``executemany`` of plain tuples (no ORM objects, no per-row
type processing): sqlite3 runs it in-process; psycopg 3 pipelines it (one round trip, not one
per row; measured faster than one statement over ``unnest`` arrays, whose text arrays
PostgreSQL parses slowly). Both report rowcount as the rows actually inserted or moved. On
PostgreSQL the rows about to change are locked first in a fixed order (jobs by id, then tasks by
id), so concurrent recorders never wait on each other in a cycle.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa

from scheduler.record.models import JOB_FINAL_STATES

EVENT_COLUMNS = ("id", "ts", "kind", "task_id", "job_id", "host", "worker", "operator", "data")
Patches = dict[Any, tuple[int, dict[str, Any]]]
_LIVE_TASK_STATES = ("accepted", "active", "paused")
_COUNTERS = ("running", "succeeded", "failed", "lost", "cancelled")


class Writer:
    """Bulk writes on one connection; ``sqlite`` or ``postgresql`` picks SQL text and values."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self.pg = conn.dialect.name != "sqlite"
        self.mark = "%s" if self.pg else "?"
        self._seconds: dict[int, Any] = {}

    def ts(self, ms: int) -> Any:
        """The stored value of the ms epoch ``ms`` (None if it is no representable time)."""
        sec, milli = divmod(ms, 1000)
        head = self._seconds.get(sec)
        if head is None:
            base = _second(sec)
            if base is None:
                return None
            head = self._seconds[sec] = base if self.pg else base.isoformat(" ")[:19] + "."
        if self.pg:
            return head.replace(microsecond=milli * 1000) if milli else head
        return f"{head}{milli:03d}000"

    def lock(self, job_ids: Iterable[str], task_ids: Iterable[int]) -> None:
        """PostgreSQL: lock the rows about to change, jobs then tasks, each in id order, so two
        recorders never wait on each other in a cycle (SQLite's write lock is exclusive)."""
        if not self.pg:
            return
        for table, ids in (("jobs", sorted(job_ids)), ("tasks", sorted(task_ids))):
            if ids:
                self.conn.exec_driver_sql(f"SELECT 1 FROM {table} WHERE id = ANY(%s) "
                                          "ORDER BY id FOR UPDATE", (ids,))

    def insert_events(self, rows: list[tuple[Any, ...]]) -> int:
        """Insert event rows; returns how many were new (rowcount counts only those)."""
        sql = _PG_INSERT if self.pg else _SQLITE_INSERT
        return max(self.conn.exec_driver_sql(sql, rows).rowcount, 0)

    def update_rows(self, table: sa.Table, patches: Patches) -> int:
        """Guarded updates, one ``executemany`` per column set; returns rows moved."""
        updated = 0
        for cols, params in _by_columns(patches).items():
            sql = _update_sql(table.name, cols, self.mark)
            updated += max(self.conn.exec_driver_sql(
                sql, [(*values, pos, key, pos) for key, pos, values in params]).rowcount, 0)
        return updated

    def refresh_tasks(self, task_ids: Sequence[int], started: dict[int, Any]) -> int:
        """Recompute counters and the finished state of ``task_ids`` from their job rows."""
        if not task_ids:
            return 0
        ids = _int_list(task_ids)
        lock = " FOR UPDATE" if self.pg else ""
        states = dict(self.conn.exec_driver_sql(
            f"SELECT id, state FROM tasks WHERE id IN ({ids}) ORDER BY id{lock}").all())
        if not states:
            return 0
        counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        last_finish: dict[int, Any] = {}
        for tid, state, n, fin in self.conn.exec_driver_sql(
                "SELECT task_id, state, count(*), max(finished_at) FROM jobs "
                f"WHERE task_id IN ({_int_list(states)}) GROUP BY task_id, state"):
            counts[tid][state] = n
            if fin is not None and (last_finish.get(tid) is None or fin > last_finish[tid]):
                last_finish[tid] = fin
        params = [_task_values(tid, state, counts[tid], last_finish.get(tid), started.get(tid))
                  for tid, state in states.items() if tid in counts]  # else: no job rows
        if params:
            m = self.mark
            self.conn.exec_driver_sql(
                f"UPDATE tasks SET total = {m}, running = {m}, succeeded = {m}, failed = {m}, "
                f"lost = {m}, cancelled = {m}, state = {m}, "
                f"finished_at = coalesce(finished_at, {m}), "
                f"started_at = coalesce(started_at, {m}) WHERE id = {m}", params)
        return len(params)


def _task_values(tid: int, state: str, c: dict[str, int], last_finish: Any,
                 started: Any) -> tuple[Any, ...]:
    """One task's UPDATE parameters: its counters, its state (finished once every job is),
    the finish time (only when finished) and the first start seen in this batch."""
    total = sum(c.values())
    finished = None
    if sum(c[s] for s in JOB_FINAL_STATES) == total:
        if state in _LIVE_TASK_STATES:
            state = "succeeded" if c["failed"] + c["lost"] == 0 else "failed"
        finished = last_finish
    return (total, *(c[k] for k in _COUNTERS), state, finished, started, tid)


def _second(sec: int) -> datetime | None:
    """The aware UTC datetime of a second of the epoch; None if out of datetime's range."""
    try:
        return datetime.fromtimestamp(sec, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def _int_list(ids: Iterable[int]) -> str:
    """Integer ids inlined into SQL (they are Python ints: nothing to quote or inject)."""
    return ", ".join(str(int(i)) for i in ids)


def _by_columns(patches: Patches) -> dict[tuple[str, ...], list[tuple[Any, int, tuple]]]:
    """Patches grouped by their columns (in the patch's own order: no sorting per row), each
    as ``(key, pos, values)``, keys in sorted order."""
    groups: dict[tuple[str, ...], list[tuple[Any, int, tuple]]] = defaultdict(list)
    for key in sorted(patches):
        pos, patch = patches[key]
        groups[tuple(patch)].append((key, pos, tuple(patch.values())))
    return groups


@functools.lru_cache(maxsize=512)
def _update_sql(table: str, cols: tuple[str, ...], m: str) -> str:
    sets = ", ".join(f'"{c}" = {m}' for c in cols)
    return (f"UPDATE {table} SET {sets}, last_event_pos = {m} WHERE id = {m} "
            f"AND (last_event_pos IS NULL OR last_event_pos < {m})")


_COLUMN_LIST = ", ".join(EVENT_COLUMNS)
_SQLITE_INSERT = (f"INSERT INTO events ({_COLUMN_LIST}) VALUES "
                  f"({', '.join('?' * len(EVENT_COLUMNS))}) ON CONFLICT (id) DO NOTHING")
_PG_INSERT = (f"INSERT INTO events ({_COLUMN_LIST}) VALUES "
              f"({', '.join(['%s'] * (len(EVENT_COLUMNS) - 1))}, %s::json) "
              "ON CONFLICT (id) DO NOTHING")


def writer(conn: sa.Connection) -> Writer:
    """The bulk writer for ``conn``."""
    return Writer(conn)


__all__ = ["EVENT_COLUMNS", "Writer", "writer"]
