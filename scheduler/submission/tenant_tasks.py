"""A customer's view of tasks: ``tasks list`` and ``tasks show`` over its own jobs only.

1. :func:`list_tenant_tasks`: the tasks with at least one job of the tenant
   (``record.tenancy.tenant_task_ids``, on ``ix_jobs_tenant_task_id``), newest first, paged in
   SQL; each row's counts and state are those of the tenant's jobs (the state filter too, in
   SQL), never the whole task's;
2. :func:`show_tenant_task`: one such task, its counts, jobs by state and failures over the
   tenant's jobs; a task without a job of the tenant is not found, as one that does not exist.

What a customer is not shown, because it would tell of other customers' hosts: the target
expression (it may name them), the live counters of the queue and the record's lag (whole-task
numbers), the control trail's job counts and errors, and a rollout's per-wave sizes.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.errors import NotFoundError, ValidationError
from scheduler.progress import Progress, from_job_states
from scheduler.record.models import Event, Job, Schedule, Task
from scheduler.record.tenancy import output_shown, tenant_task_ids
from scheduler.submission.taskinfo import (
    CONTROL_KINDS,
    FAILED_SHOWN,
    LIST_STATES,
    TRAIL_SHOWN,
    created_between,
    request,
    shown_state,
    summary_line,
)

__all__ = ["list_tenant_tasks", "show_tenant_task"]

_COUNTED = ("succeeded", "failed", "lost", "cancelled", "running")


def _count(tenant: str, state: str | None = None) -> sa.ScalarSelect[int]:
    """The number of the tenant's jobs of the task in the outer query (in ``state``)."""
    q = sa.select(sa.func.count()).select_from(Job).where(Job.task_id == Task.id,
                                                          Job.tenant == tenant)
    return (q if state is None else q.where(Job.state == state)).scalar_subquery()


def _progress(t: Task, counts: dict[str, int]) -> Progress:
    return replace(from_job_states(t.state, counts), rollout=t.wave_state or "")


def _row(t: Task, progress: Progress) -> dict[str, Any]:
    count = (t.waves or {}).get("count") if isinstance(t.waves, dict) else None
    wave = f"{t.wave}/{count or '?'} {t.wave_state or ''}".strip() if t.wave else ""
    return {"id": t.id, "name": t.name, "action": t.action, "target": None,
            "operator": t.operator, "priority": t.priority, **progress.counts(), "wave": wave,
            "created_at": t.created_at, "started_at": t.started_at,
            "finished_at": t.finished_at}


def list_tenant_tasks(session: Session, tenant: str, *, state: str | None = None,
                      operator: str | None = None, action: str | None = None, limit: int = 50,
                      offset: int = 0, since: datetime | None = None,
                      until: datetime | None = None) -> list[dict[str, Any]]:
    """The newest ``limit`` of ``tenant``'s tasks after the newest ``offset``, counted over its
    jobs (``state``: as the views name it, of those counts; ``since``/``until``: created in
    that time)."""
    n = {"total": _count(tenant), **{s: _count(tenant, s) for s in _COUNTED}}
    q = (sa.select(Task, *(expr.label(f"n_{name}") for name, expr in n.items()))
         .where(Task.id.in_(tenant_task_ids(tenant)), *created_between(since, until))
         .order_by(Task.id.desc()).limit(limit).offset(offset))
    if state:
        if state not in LIST_STATES:
            raise ValidationError(f"--state {state!r} must be one of {', '.join(LIST_STATES)}")
        q = q.where(shown_state(n) == state)
    if operator:
        q = q.where(Task.operator == operator)
    if action:
        q = q.where(Task.action == action)
    out = []
    for row in session.execute(q):
        t = row.Task
        counts = {s: getattr(row, f"n_{s}") for s in _COUNTED}
        counts["pending"] = row.n_total - sum(counts.values())  # the rest, to make the total
        out.append(_row(t, _progress(t, counts)))
    return out


def show_tenant_task(session: Session, task_id: int, tenant: str) -> dict[str, Any]:
    """What ``tasks show`` prints of task ``task_id``, over ``tenant``'s jobs only."""
    mine = sa.and_(Job.task_id == task_id, Job.tenant == tenant)
    jobs = dict(session.execute(sa.select(Job.state, sa.func.count()).where(mine)
                                .group_by(Job.state)).all())
    t = session.get(Task, task_id) if jobs else None
    if t is None:  # no job of the tenant: as if there were no task
        raise NotFoundError(f"no task {task_id}", hint="see `fleetsched tasks list`")
    progress = _progress(t, jobs)
    out = _row(t, progress)
    schedule = session.get(Schedule, t.schedule_id) if t.schedule_id is not None else None
    req = request(t, schedule.name if schedule else None)
    policy = dict(req["policy"])
    if policy.get("waves"):  # its sizes may name a first wave by a target term: only a count
        policy["waves"] = f"{(t.waves or {}).get('count')} waves"
    out.update({"params": req["params"], "executor": t.executor, "in_window": t.in_window,
                "ignore_windows": t.ignore_windows, "break_glass": t.break_glass,
                "start_at": t.start_at, "policy": policy, "origin": req["origin"],
                "windows": req["windows"], "jobs": {k: jobs[k] for k in sorted(jobs)},
                "live": None, "recorded_state": t.state,
                "summary": summary_line(progress, None, t.state),
                "record_behind": 0, "note": None})
    failed = session.execute(sa.select(Job.id, Job.host, Job.state, Job.attempts, Job.exit_code,
                                       Job.error)
                             .where(mine, Job.state.in_(("failed", "lost")))
                             .order_by(Job.seq).limit(FAILED_SHOWN)).all()
    shown = output_shown(session, task_id, tenant)
    out["failures"] = [{**r._mapping, "error": r.error if shown else None} for r in failed]
    out["output_withheld"] = not shown
    trail = session.execute(sa.select(Event.ts, Event.kind, Event.operator)
                            .where(Event.task_id == str(task_id),
                                   Event.kind.in_(CONTROL_KINDS))
                            .order_by(Event.ts, Event.id).limit(TRAIL_SHOWN)).all()
    out["trail"] = [{"ts": r.ts, "kind": r.kind, "operator": r.operator, "count": None,
                     "error": None} for r in trail]
    out["waves"] = ({"wave": t.wave, "waves": (t.waves or {}).get("count"),
                     "state": t.wave_state} if t.waves else None)
    return out
