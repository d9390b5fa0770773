"""The full event trail of a task, a job or a host, from the SQL ``events`` table, oldest first.

``event_trail(engine, task=..., host=..., job=..., limit=...)`` returns one flat row per event:
time, kind, task, job, host, worker, operator, attempt, exit code, duration, error (one line),
and for batch events how many jobs they covered. The host trail also finds the inventory
events (``host-add``, ``host-remove``) that name the host; with ``tenant``, only a host of that
customer has one (another's is not found, as one that does not exist), and of its jobs' events
only those of jobs run as that customer's.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.errors import NotFoundError
from scheduler.record.models import Event, Host, Job
from scheduler.record.tenancy import tenant_hosts

TRAIL_COLUMNS = ["ts", "kind", "task", "job", "host", "worker", "operator", "attempt",
                 "exit_code", "duration_ms", "detail"]
DEFAULT_LIMIT = 10_000


def _detail(kind: str, data: dict[str, Any]) -> str:
    error = data.get("error")
    if error:
        return " ".join(str(error).split())[:300]
    if kind == "enqueue" or "count" in data:
        n = data.get("count") or len(data.get("jobs") or [])
        return f"{n} job(s)" if n else ""
    if "due" in data and kind in ("defer", "release", "retry"):
        from scheduler.record.types import from_ms

        try:
            return f"due {from_ms(int(data['due'])):%Y-%m-%d %H:%M:%S}Z"
        except (TypeError, ValueError):
            return ""
    return ""


def event_trail(engine: Engine, *, task: int | str | None = None, host: str | None = None,
                job: str | None = None, limit: int = DEFAULT_LIMIT,
                offset: int = 0, tenant: str | None = None) -> list[dict[str, Any]]:
    """Events of a task (its own and its jobs'), a job, or a host; oldest first, at most
    ``limit`` (the newest ``limit`` when there are more, after the newest ``offset``)."""
    e = Event.__table__
    stmt = sa.select(e.c.ts, e.c.kind, e.c.task_id, e.c.job_id, e.c.host, e.c.worker,
                     e.c.operator, e.c.data, e.c.id)
    if task is not None:
        stmt = stmt.where(e.c.task_id == str(task))
    if job is not None:
        stmt = stmt.where(e.c.job_id == job)
    if host is not None:
        stmt = stmt.where(e.c.host == host)
    if tenant is not None:  # a customer's host trail (the only trail a customer reads)
        stmt = stmt.where(e.c.host.in_(tenant_hosts(tenant)), sa.or_(
            e.c.job_id.is_(None), e.c.job_id.in_(sa.select(Job.id).where(
                Job.tenant == tenant, Job.host == e.c.host))))
    stmt = stmt.order_by(e.c.ts.desc(), e.c.id.desc()).limit(limit).offset(offset)
    with engine.connect() as conn:
        rows = conn.execute(stmt).all()
        if host is not None and not rows:
            known = conn.execute(sa.select(Host.id).where(
                Host.name == host, *([Host.tenant == tenant] if tenant is not None else []))
            ).first()
            if known is None:
                raise NotFoundError(f"no host {host!r} and no event about it",
                                    hint="see `fleetsched hosts list`")
    out = []
    for ts, kind, task_id, job_id, h, worker, operator, data, _id in reversed(rows):
        data = data or {}
        out.append({"ts": ts, "kind": kind, "task": task_id, "job": job_id, "host": h,
                    "worker": worker, "operator": operator, "attempt": data.get("attempt"),
                    "exit_code": data.get("exit_code"), "duration_ms": data.get("duration_ms"),
                    "detail": _detail(kind, data)})
    return out


def for_table(rows: list[dict[str, Any]], columns: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Rows for a terminal table: times to the millisecond, columns empty in every row left
    out (JSON and CSV keep them all)."""
    shown = [c for c in columns if any(r.get(c) not in (None, "") for r in rows)] or columns
    out = [{**r, "ts": r["ts"].strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] if r.get("ts") else ""}
           for r in rows]
    return out, shown


__all__ = ["TRAIL_COLUMNS", "event_trail", "for_table"]
