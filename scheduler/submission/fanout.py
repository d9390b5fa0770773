"""Fan-out: the Redis half of a submission, after its record is in SQL.

What it owns:

1. :func:`fan_out`: host hashes (``scheduler.queue.hosts.write_hosts``: each host's
   connection data, which workers read at claim time), then ``Queue.create_task`` (a no-op if
   the task exists), then ``Queue.enqueue`` in batches (duplicates are skipped by the
   script), so running it again after a failure finishes the job instead of doubling it;
2. :func:`mark_queued`: once Redis has every job, the SQL task leaves ``accepted`` (it becomes
   ``active``: queued) and its ``accepted`` job rows become ``pending``;
3. the pieces ``scheduler.submission.reconcile`` needs to finish a fan-out from SQL alone:
   :func:`recorded_spec` (the exact queue spec kept in the task's ``submit`` event),
   :func:`recorded_waves` (its waves' job ids) and :func:`host_conns` (connection data of
   stored hosts).

Order of a submission (``scheduler.submission.submit.submit``): SQL first (task ``accepted``, jobs, a
``submit`` event), then this module, then ``mark_queued``. A crash or a Redis outage in between
leaves the task ``accepted`` in SQL: ``fleetsched status`` lists it, ``fleetsched reconcile``
enqueues what Redis lacks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

import redis
import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.gcpause import gc_paused
from scheduler.queue.client import JobSpec, Queue, TaskSpec
from scheduler.queue.hosts import write_hosts
from scheduler.queue.keys import Keys
from scheduler.record.models import Event, Host
from scheduler.record.state import Queued, apply

__all__ = ["fan_out", "host_conns", "mark_queued", "recorded_spec", "recorded_waves"]


@gc_paused()
def fan_out(client: redis.Redis, keys: Keys, spec: TaskSpec, hosts: Iterable[Any],
            jobs: Sequence[JobSpec], *, waves: Sequence[Sequence[int]] | None = None,
            wave_policy: dict[str, Any] | None = None) -> int:
    """Host hashes, the task hash, then the jobs; returns how many jobs were newly queued.

    ``waves`` (job numbers per wave, ``Plan.waves``): only wave 1's jobs are queued; then every
    job is listed by wave and those of later waves are staged (``scheduler.queue.waves.stage``)
    until the wave controller releases them."""
    write_hosts(client, keys, hosts)
    queue = Queue(client, keys)
    try:
        queue.create_task(spec)
        if not waves:
            return queue.enqueue(spec.task_id, jobs)
        from scheduler.queue.waves import stage

        by_seq = {int(j.job_id.rsplit(".", 1)[1]): j for j in jobs}
        queued = queue.enqueue(spec.task_id, [by_seq[n] for n in waves[0]])
        staged = [(by_seq[n], k) for k, wave in enumerate(waves, 1) for n in wave]
        policy = {**(wave_policy or {}), "counts": [len(w) for w in waves]}
        stage(queue, spec.task_id, len(waves), policy, staged)
        return queued
    finally:
        queue.close()


def mark_queued(session: Session, task_id: int) -> bool:
    """Redis has every job of the task: ``accepted`` -> ``active`` (``scheduler.record.state``,
    ``Queued``); False if it had moved on."""
    return apply(session, Queued(task_id))


def _submit_data(conn: sa.Connection | Session, task_id: int | str) -> dict[str, Any]:
    """The data of the task's ``submit`` event ({} for a task submitted another way)."""
    e = Event.__table__
    data = conn.execute(sa.select(e.c.data).where(e.c.task_id == str(task_id),
                                                  e.c.kind == "submit")
                        .order_by(e.c.ts).limit(1)).scalar()
    if isinstance(data, str):
        data = json.loads(data)
    return data if isinstance(data, dict) else {}


def recorded_spec(conn: sa.Connection | Session, task_id: int | str) -> dict[str, Any] | None:
    """The queue part of the task's ``submit`` event (priority, limits, ``spec`` with executor
    options and expected duration), or None for a task submitted another way."""
    queue = _submit_data(conn, task_id).get("queue")
    return queue if isinstance(queue, dict) else None


def recorded_waves(conn: sa.Connection | Session, task_id: int | str) -> list[list[str]] | None:
    """The job ids of each wave, as the task's ``submit`` event recorded them (None: the task
    is not rolled out in waves)."""
    waves = (_submit_data(conn, task_id).get("waves") or {}).get("waves")
    return waves if isinstance(waves, list) and len(waves) > 1 else None


def host_conns(conn: sa.Connection | Session, names: Iterable[str]) -> list[Any]:
    """Stored connection data (name, address, port, user, vars, and the limited groups the host
    is in) of the named hosts that exist."""
    from types import SimpleNamespace

    from scheduler.inventory import limited_groups_of

    wanted = set(names)
    h = Host.__table__
    rows = [r for r in conn.execute(sa.select(h.c.name, h.c.address, h.c.port, h.c.user,
                                              h.c.vars)) if r.name in wanted]
    limits = limited_groups_of(conn, [r.name for r in rows])  # type: ignore[arg-type]
    return [SimpleNamespace(**r._mapping, limits=tuple(limits.get(r.name, ()))) for r in rows]
