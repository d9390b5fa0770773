"""The fleet's gauges, read afresh on every scrape of ``fleetsched exporter``.

:class:`FleetCollector` is a prometheus_client custom collector. Each ``collect`` (one scrape):

1. Opens Redis without starting the embedded server (``scheduler.health.checks.open_redis``),
   every command bounded by the timeout. Unreachable, a read failing, or a queue with another
   shard count than ``queue_shards`` (its figures would be a part of the queue):
   ``fleetsched_up 0`` and nothing else from Redis; the scrape still answers.
2. Reads the queue through the functions the views use, so an operator sees one number
   whichever way they look: the due sets (``scheduler.queue.depth.queue_counts``: due now per
   class, overdue, oldest overdue age, waiting for a later time, dead), the live tasks' running,
   parked and held jobs (``scheduler.views.snapshot.read_tasks`` and ``task_totals``), the
   workers (``scheduler.queue.presence.read_workers``), the recorder's lag
   (``scheduler.record.sharded.total_backlog``) and the last fair-share reorder (``Keys.stats``).
   A queue in N shards (``queue_shards``): every gauge is the sum over the shards (the oldest
   overdue age and the last reorder: of every shard), read in the same round trips; no label
   per shard, so dashboards and alert rules stay as they are.
3. Bounded cost: ZCOUNT, ZCARD, LLEN, XLEN and small hashes; no member of a large set is read.
   The live tasks come from SQL (``tasks`` in accepted, active or paused, by the state index),
   not from a SCAN of Redis' whole key space.
4. The queue's identity (``scheduler.record.epoch``, the verdict ``status`` gives):
   ``fleetsched_queue_epoch_ok`` 0 when Redis lost its epoch, holds another, or lacks tasks
   SQL calls active (SQL's side read with the record; Redis' in one more round trip: a GET
   and ``SAMPLE`` EXISTS); absent when either side cannot be read.
5. From SQL also: missed schedule occurrences recorded in the last hour. The database down,
   or not answering within the timeout: ``fleetsched_database_up 0``, the Redis figures are
   still given. The read runs on a thread of its own with a deadline, because a database that
   hangs (a stalled server, a frozen network path: no error, no TCP reset) would otherwise
   hang the scrape; while a read that missed its deadline is still stuck, no other is started,
   so hung reads never pile up.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from scheduler.config import Settings
from scheduler.queue.keys import PRIORITY_CLASSES
from scheduler.queue.shards import shards_of
from scheduler.redact import redact_exception

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from scheduler.record.epoch import SqlSide

log = logging.getLogger(__name__)

NS = "fleetsched_"
MISSED_WINDOW = timedelta(hours=1)
LIVE_TASK_STATES = ("accepted", "active", "paused")
LIVE_TASKS_MAX = 10_000  # a bound on one scrape's task reads, whatever the record holds

# Every metric this collector can give: name -> (type, help). The alert rules and the dashboard
# shipped in ansible/monitoring/ are checked against these names (tests/monitoring/test_monitoring_rules.py).
METRICS: dict[str, tuple[str, str]] = {
    "up": ("gauge", "1 if the exporter read Redis on this scrape, else 0."),
    "database_up": ("gauge", "1 if the exporter read the SQL record on this scrape, else 0."),
    "queue_due_now": ("gauge", "Jobs due now, by priority class (fleetsched top: due)."),
    "queue_overdue": ("gauge", "Jobs late by more than the overload threshold."),
    "queue_oldest_overdue_seconds": ("gauge", "Age of the oldest due job, seconds (0: none)."),
    "queue_later": ("gauge", "Jobs waiting for a later time: service windows (deferred), --at, "
                    "retry backoff (fleetsched top: later/windows)."),
    "jobs_running": ("gauge", "Jobs running on workers, over the live tasks."),
    "jobs_parked": ("gauge", "Jobs held back by their task's concurrency limit."),
    "jobs_held": ("gauge", "Jobs of paused tasks."),
    "jobs_dead": ("gauge", "Jobs in the dead letter set (failed for good)."),
    "tasks_live": ("gauge", "Tasks accepted, active or paused (SQL record)."),
    "queue_epoch_ok": ("gauge", "1 if Redis holds the queue's epoch and the newest tasks SQL "
                       "calls active; 0: Redis lost or replaced its data, run fleetsched "
                       "reconcile (fleetsched status: epoch)."),
    "recorder_lag_events": ("gauge", "Events not yet in SQL (fleetsched status: recorder)."),
    "recorder_pending_events": ("gauge", "Events read by a recorder, not yet committed."),
    "reorder_age_seconds": ("gauge", "Seconds since the last fair-share reorder (absent: none "
                            "yet)."),
    "reorders": ("counter", "Fair-share reorders run."),
    "schedule_missed_recent": ("gauge", "Missed schedule occurrences recorded in the last "
                               "hour."),
    "workers_live": ("gauge", "Worker nodes whose heartbeat is fresh."),
    "workers_silent": ("gauge", "Worker nodes that missed three heartbeats in a row, not yet "
                                "stale (killed or stuck)."),
    "workers_stale": ("gauge", "Worker nodes whose last heartbeat is older than two leases."),
    "workers_slots": ("gauge", "Slots of the live workers."),
    "workers_slots_busy": ("gauge", "Busy slots of the live workers."),
}


def _family(name: str, value: float | None = None, labels: list[str] | None = None) -> Metric:
    kind, doc = METRICS[name]
    cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
    if labels:
        return cls(NS + name, doc, labels=labels)
    return cls(NS + name, doc, value=value)


class FleetCollector(Collector):
    """Fleet-wide gauges for one exporter (see the module docstring)."""

    def __init__(self, settings: Settings, timeout_s: float = 3.0,
                 engine: Engine | None = None) -> None:
        self.settings = settings
        self.shards = shards_of(settings)
        self.timeout_s = timeout_s
        self.engine = engine
        self._stuck: threading.Thread | None = None  # a read that missed its deadline

    def describe(self) -> list[Metric]:
        return []  # the metrics depend on what is reachable: nothing is read at registration

    def collect(self) -> Iterator[Metric]:
        live_ids, sql, epoch = self._from_sql()
        yield _family("database_up", 1 if sql is not None else 0)
        if sql is not None:
            yield _family("tasks_live", len(live_ids))
            yield _family("schedule_missed_recent", sql)
        yield from self._from_redis(live_ids if sql is not None else None, epoch)

    # ------------------------------------------------------------------------------ SQL

    def _from_sql(self) -> tuple[list[str], int | None, SqlSide | None]:
        """(ids of the live tasks, missed occurrences of the last hour, SQL's side of the
        queue's identity); (.., None, None) if the record cannot be read within the timeout
        (the identity alone is None when its table cannot be read: a schema behind)."""
        if self.engine is None:
            return [], None, None
        if self._stuck is not None and self._stuck.is_alive():
            log.warning("scrape: the SQL record has not answered an earlier read yet")
            return [], None, None
        box: list[tuple[list[str], int | None, SqlSide | None]] = []
        # A daemon thread: one stuck for good never holds up the exporter's exit.
        read = threading.Thread(target=lambda: box.append(self._read_sql()), daemon=True,
                                name="scrape-sql")
        read.start()
        read.join(self.timeout_s)
        if read.is_alive():
            self._stuck = read
            log.warning("scrape: the SQL record did not answer within %.1fs", self.timeout_s)
            return [], None, None
        self._stuck = None
        return box[0] if box else ([], None, None)

    def _read_sql(self) -> tuple[list[str], int | None, SqlSide | None]:
        import sqlalchemy as sa

        from scheduler.record.epoch import read_sql
        from scheduler.record.models import Event, Task
        from scheduler.record.types import utcnow

        try:
            with self.engine.connect() as conn:
                ids = conn.execute(sa.select(Task.id).where(Task.state.in_(LIVE_TASK_STATES))
                                   .order_by(Task.id.desc()).limit(LIVE_TASKS_MAX)).scalars().all()
                missed = conn.execute(sa.select(sa.func.count()).select_from(Event).where(
                    Event.ts >= utcnow() - MISSED_WINDOW, Event.kind == "missed")).scalar_one()
        except sa.exc.SQLAlchemyError as exc:
            log.warning("scrape: cannot read the SQL record: %s",
                        redact_exception(exc, self.settings.database_url))
            return [], None, None
        try:  # on a connection of its own: a failed statement ends a PostgreSQL transaction
            with self.engine.connect() as conn:
                epoch: SqlSide | None = read_sql(conn, self.shards.prefix)
        except sa.exc.SQLAlchemyError as exc:
            log.warning("scrape: cannot read the queue's epoch: %s",
                        redact_exception(exc, self.settings.database_url))
            epoch = None
        return [str(i) for i in ids], int(missed), epoch

    # ---------------------------------------------------------------------------- Redis

    def _from_redis(self, live_ids: list[str] | None, epoch: SqlSide | None
                    ) -> Iterator[Metric]:
        from scheduler.errors import ConfigError
        from scheduler.health.checks import open_redis
        from scheduler.queue.sharded import recheck_shard_count
        from scheduler.redisdb.connect import REDIS_ERRORS

        client, where, why = open_redis(self.settings, timeout=self.timeout_s)
        if client is None:
            log.warning("scrape: redis at %s: %s", where, why)
            yield _family("up", 0)
            return
        try:
            recheck_shard_count(client, self.shards, missing_ok=True)
            metrics = list(self._read(client, live_ids, epoch))
        except ConfigError as exc:  # another queue_shards: its figures would be a part only
            log.warning("scrape: %s", exc)
            yield _family("up", 0)
            return
        except REDIS_ERRORS as exc:
            log.warning("scrape: reading redis at %s failed: %s", where,
                        redact_exception(exc, self.settings.redis_url))
            yield _family("up", 0)
            return
        finally:
            client.close()
        yield _family("up", 1)
        yield from metrics

    def _read(self, client: Any, live_ids: list[str] | None, epoch: SqlSide | None
              ) -> Iterator[Metric]:
        from scheduler.queue.depth import queue_counts
        from scheduler.queue.presence import read_workers, tally
        from scheduler.record.epoch import judge, read_redis
        from scheduler.record.sharded import total_backlog
        from scheduler.views.snapshot import TaskTotals, read_tasks, task_totals

        shards = self.shards
        counts = queue_counts(client, shards, self.settings.overload_threshold_ms)
        due = _family("queue_due_now", labels=["priority"])
        for prio in PRIORITY_CLASSES:
            due.add_metric([prio], counts.by_class.get(prio, 0))
        yield due
        yield _family("queue_overdue", counts.overdue)
        yield _family("queue_oldest_overdue_seconds", counts.oldest_late_ms / 1000)
        yield _family("jobs_dead", counts.dead)
        if live_ids is not None:
            tasks = [t for t in read_tasks(client, shards, live_ids, with_action=False)
                     if t is not None]
            totals = task_totals(client, shards, tasks)
        else:  # without the record the live tasks are unknown: the leases count the running
            totals = TaskTotals(running=sum(int(client.zcard(keys.leases))
                                            for keys in shards.all))
        yield _family("queue_later", totals.later(counts))
        yield _family("jobs_running", totals.running)
        if live_ids is not None:
            yield _family("jobs_parked", totals.parked)
            yield _family("jobs_held", totals.held)
        lag, pending = total_backlog(client, shards)
        yield _family("recorder_lag_events", lag)
        yield _family("recorder_pending_events", pending)
        reorder_at = int(counts.stats.get("reorder_at") or 0)
        if reorder_at:
            yield _family("reorder_age_seconds", max(0, counts.now_ms - reorder_at) / 1000)
        yield _family("reorders", int(counts.stats.get("reorder_count") or 0))
        workers = read_workers(client, shards.prefix)
        counted = tally(workers)
        yield _family("workers_live", len(counted.alive))
        yield _family("workers_silent", counted.silent)
        yield _family("workers_stale", counted.stale)
        yield _family("workers_slots", counted.slots)
        yield _family("workers_slots_busy", counted.busy)
        if epoch is not None:
            held, missing = read_redis(client, shards, epoch.active)
            verdict = judge(epoch, held, missing, shards.coord.epoch)
            if not verdict.ok:
                log.warning("scrape: %s", verdict.message)
            yield _family("queue_epoch_ok", 1 if verdict.ok else 0)


def exported_names() -> set[str]:
    """Every sample name the exporter can give (counters with their ``_total``)."""
    return {NS + n + ("_total" if kind == "counter" else "") for n, (kind, _) in METRICS.items()}


__all__ = ["FleetCollector", "METRICS", "exported_names"]
