"""The recorder's bulk SQL writes, one implementation per dialect (``scheduler.db.apply`` folds
the events; this module writes what the fold produced).

A writer:

1. converts ms epochs into the value its driver stores for a ``UTCDateTime`` column (SQLite:
   naive UTC text ``YYYY-MM-DD HH:MM:SS.ffffff``, exactly what SQLAlchemy writes; PostgreSQL: an
   aware datetime), once per second of time seen, so no row pays for type processing;
2. inserts event rows (tuples in ``EVENT_COLUMNS`` order) with ``ON CONFLICT (id) DO NOTHING``
   and returns how many were new (a replay inserts 0);
3. applies per-row patches ``{id: (pos, {column: value})}`` as guarded updates: a row moves only
   if its ``last_event_pos`` is older than the patch's position, so replays and late batches
   never move a row backwards;
4. recomputes the counters and the finished state of tasks from their job rows.

SQLite: driver-level ``executemany`` (one statement per column set, no SQL round trips).
PostgreSQL: one statement per step with the values as arrays (``unnest``), so a batch costs a
handful of round trips instead of one per row; rows are locked first in a fixed order (jobs by
id, then tasks by id), so concurrent recorders never deadlock on each other.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa

from scheduler.db.models import JOB_FINAL_STATES

EVENT_COLUMNS = ("id", "ts", "kind", "task_id", "job_id", "host", "worker", "operator", "data")
Patches = dict[Any, tuple[int, dict[str, Any]]]
_LIVE_TASK_STATES = ("accepted", "active", "paused")
_COUNTERS = ("running", "succeeded", "failed", "lost", "cancelled")


class Writer:
    """The dialect-independent part: task counters from per-(task, state) aggregates."""

    def __init__(self, conn: sa.Connection) -> None:
        self.conn = conn
        self._seconds: dict[int, Any] = {}

    def ts(self, ms: int) -> Any:
        """The stored value of the ms epoch ``ms`` (None if it is no representable time)."""
        raise NotImplementedError

    def lock(self, job_ids: Iterable[str], task_ids: Iterable[int]) -> None:
        """Lock the rows about to change, in a fixed order (a no-op where the database lock
        is already exclusive)."""

    def refresh_tasks(self, task_ids: Sequence[int], started: dict[int, Any]) -> int:
        """Recompute counters and the finished state of ``task_ids`` from their job rows."""
        if not task_ids:
            return 0
        states = self._task_states(task_ids)
        if not states:
            return 0
        counts: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        last_finish: dict[int, Any] = {}
        for tid, state, n, fin in self._job_counts(list(states)):
            counts[tid][state] = n
            if fin is not None and (last_finish.get(tid) is None or fin > last_finish[tid]):
                last_finish[tid] = fin
        params: list[tuple[Any, ...]] = []
        for tid, state in states.items():
            c = counts.get(tid)
            if not c:
                continue  # no job rows: the queue was used without SQL fan-out
            total = sum(c.values())
            finished = None
            if sum(c[s] for s in JOB_FINAL_STATES) == total:
                if state in _LIVE_TASK_STATES:
                    state = "succeeded" if c["failed"] + c["lost"] == 0 else "failed"
                finished = last_finish.get(tid)
            params.append((total, *(c[k] for k in _COUNTERS), state, finished,
                           started.get(tid), tid))
        if params:
            self._update_tasks(params)
        return len(params)

    def _task_states(self, task_ids: Sequence[int]) -> dict[int, str]:
        raise NotImplementedError

    def _job_counts(self, task_ids: Sequence[int]) -> Iterable[tuple[int, str, int, Any]]:
        raise NotImplementedError

    def _update_tasks(self, params: list[tuple[Any, ...]]) -> None:
        raise NotImplementedError


def _second(sec: int) -> datetime | None:
    """The aware UTC datetime of a second of the epoch; None if out of datetime's range."""
    try:
        return datetime.fromtimestamp(sec, timezone.utc)
    except (OverflowError, OSError, ValueError):
        return None


def _int_list(ids: Iterable[int]) -> str:
    """Integer ids inlined into SQL (they are Python ints: nothing to quote or inject)."""
    return ", ".join(str(int(i)) for i in ids)


class SQLiteWriter(Writer):
    """SQLite: ``executemany`` on the sqlite3 cursor with values stored as the types store them."""

    def ts(self, ms: int) -> str | None:
        sec, milli = divmod(ms, 1000)
        head = self._seconds.get(sec)
        if head is None:
            base = _second(sec)
            if base is None:
                return None
            head = self._seconds[sec] = base.isoformat(" ", "seconds")[:19] + "."
        return f"{head}{milli:03d}000"

    def insert_events(self, rows: list[tuple[Any, ...]]) -> int:
        # sqlite3's rowcount counts only the rows actually inserted, so replays report 0.
        cursor = self.conn.exec_driver_sql(_SQLITE_INSERT, rows)
        return max(cursor.rowcount, 0)

    def update_rows(self, table: sa.Table, patches: Patches) -> int:
        updated = 0
        for cols, params in _by_columns(patches).items():
            sql = _sqlite_update(table.name, cols)
            updated += max(self.conn.exec_driver_sql(
                sql, [(*values, pos, key, pos) for key, pos, values in params]).rowcount, 0)
        return updated

    def _task_states(self, task_ids: Sequence[int]) -> dict[int, str]:
        return dict(self.conn.exec_driver_sql(
            f"SELECT id, state FROM tasks WHERE id IN ({_int_list(task_ids)}) ORDER BY id").all())

    def _job_counts(self, task_ids: Sequence[int]) -> Iterable[tuple[int, str, int, Any]]:
        return self.conn.exec_driver_sql(
            "SELECT task_id, state, count(*), max(finished_at) FROM jobs "
            f"WHERE task_id IN ({_int_list(task_ids)}) GROUP BY task_id, state").all()

    def _update_tasks(self, params: list[tuple[Any, ...]]) -> None:
        self.conn.exec_driver_sql(
            "UPDATE tasks SET total = ?, running = ?, succeeded = ?, failed = ?, lost = ?, "
            "cancelled = ?, state = ?, finished_at = coalesce(finished_at, ?), "
            "started_at = coalesce(started_at, ?) WHERE id = ?", params)


_SQLITE_INSERT = (f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) VALUES "
                  f"({', '.join('?' * len(EVENT_COLUMNS))}) ON CONFLICT (id) DO NOTHING")


@functools.lru_cache(maxsize=256)
def _sqlite_update(table: str, cols: tuple[str, ...]) -> str:
    sets = ", ".join(f'"{c}" = ?' for c in cols)
    return (f"UPDATE {table} SET {sets}, last_event_pos = ? WHERE id = ? "
            f"AND (last_event_pos IS NULL OR last_event_pos < ?)")


def _by_columns(patches: Patches) -> dict[tuple[str, ...], list[tuple[Any, int, tuple]]]:
    """Patches grouped by their columns (in the patch's own order: no sorting per row), each
    as ``(key, pos, values)``, keys in sorted order."""
    groups: dict[tuple[str, ...], list[tuple[Any, int, tuple]]] = defaultdict(list)
    for key in sorted(patches):
        pos, patch = patches[key]
        groups[tuple(patch)].append((key, pos, tuple(patch.values())))
    return groups


class PostgresWriter(Writer):
    """PostgreSQL: each step is one statement over arrays (``unnest``), rows locked in order."""

    def ts(self, ms: int) -> datetime | None:
        sec, milli = divmod(ms, 1000)
        base = self._seconds.get(sec)
        if base is None:
            base = _second(sec)
            if base is None:
                return None
            self._seconds[sec] = base
        return base.replace(microsecond=milli * 1000) if milli else base

    def lock(self, job_ids: Iterable[str], task_ids: Iterable[int]) -> None:
        jobs, tasks = sorted(job_ids), sorted(task_ids)
        if jobs:
            self.conn.exec_driver_sql("SELECT 1 FROM jobs WHERE id = ANY(%s::varchar[]) "
                                      "ORDER BY id FOR UPDATE", (jobs,))
        if tasks:
            self.conn.exec_driver_sql("SELECT 1 FROM tasks WHERE id = ANY(%s::bigint[]) "
                                      "ORDER BY id FOR UPDATE", (tasks,))

    def insert_events(self, rows: list[tuple[Any, ...]]) -> int:
        # rowcount of INSERT .. ON CONFLICT DO NOTHING counts only the rows inserted.
        return max(self.conn.exec_driver_sql(_PG_INSERT, tuple(map(list, zip(*rows)))).rowcount, 0)

    def update_rows(self, table: sa.Table, patches: Patches) -> int:
        updated = 0
        for cols, params in _by_columns(patches).items():
            keys, positions, values = zip(*params)
            arrays = (list(keys), list(positions), *map(list, zip(*values)))
            sql = _pg_update(table, cols, self.conn.dialect)
            updated += max(self.conn.exec_driver_sql(sql, arrays).rowcount, 0)
        return updated

    def _task_states(self, task_ids: Sequence[int]) -> dict[int, str]:
        return dict(self.conn.exec_driver_sql(
            "SELECT id, state FROM tasks WHERE id = ANY(%s::bigint[]) ORDER BY id FOR UPDATE",
            (list(task_ids),)).all())

    def _job_counts(self, task_ids: Sequence[int]) -> Iterable[tuple[int, str, int, Any]]:
        return self.conn.exec_driver_sql(
            "SELECT task_id, state, count(*), max(finished_at) FROM jobs "
            "WHERE task_id = ANY(%s::bigint[]) GROUP BY task_id, state", (list(task_ids),)).all()

    def _update_tasks(self, params: list[tuple[Any, ...]]) -> None:
        self.conn.exec_driver_sql(
            "UPDATE tasks AS t SET total = v.total, running = v.running, "
            "succeeded = v.succeeded, failed = v.failed, lost = v.lost, "
            "cancelled = v.cancelled, state = v.state, "
            "finished_at = coalesce(t.finished_at, v.finished_at), "
            "started_at = coalesce(t.started_at, v.started_at) "
            "FROM unnest(%s::int[], %s::int[], %s::int[], %s::int[], %s::int[], %s::int[], "
            "%s::varchar[], %s::timestamptz[], %s::timestamptz[], %s::bigint[]) "
            "AS v(total, running, succeeded, failed, lost, cancelled, state, finished_at, "
            "started_at, id) WHERE t.id = v.id", tuple(map(list, zip(*params))))


_PG_INSERT = (f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) SELECT * FROM unnest("
              "%s::varchar[], %s::timestamptz[], %s::varchar[], %s::varchar[], %s::varchar[], "
              "%s::varchar[], %s::varchar[], %s::varchar[], %s::json[]) "
              "ON CONFLICT (id) DO NOTHING")


@functools.lru_cache(maxsize=256)
def _pg_update(table: sa.Table, cols: tuple[str, ...], dialect: sa.Dialect) -> str:
    """UPDATE table SET cols.. FROM unnest(id[], pos[], col arrays..) guarded by position."""
    def array(col: str) -> str:
        return f"%s::{table.c[col].type.compile(dialect=dialect)}[]"
    key_type = table.c["id"].type.compile(dialect=dialect)
    sets = ", ".join(f'"{c}" = v."{c}"' for c in cols)
    names = ", ".join(f'"{c}"' for c in cols)
    arrays = ", ".join(array(c) for c in cols)
    return (f"UPDATE {table.name} AS t SET {sets}, last_event_pos = v.pos "
            f"FROM unnest(%s::{key_type}[], %s::bigint[], {arrays}) AS v(id, pos, {names}) "
            f"WHERE t.id = v.id AND (t.last_event_pos IS NULL OR t.last_event_pos < v.pos)")


def writer(conn: sa.Connection) -> Writer:
    """The bulk writer for ``conn``'s dialect."""
    if conn.dialect.name == "sqlite":
        return SQLiteWriter(conn)
    return PostgresWriter(conn)


__all__ = ["EVENT_COLUMNS", "Writer", "SQLiteWriter", "PostgresWriter", "writer"]
