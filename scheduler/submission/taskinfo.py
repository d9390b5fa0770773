"""What ``fleetsched tasks list`` and ``tasks show`` read: the SQL record of tasks, with the
live counters of the task hash in Redis where it can be reached.

1. :func:`list_tasks`: newest first, filtered by state, operator or action;
2. :func:`show_task`: one task's request, rollout policy, counters (SQL, and live from Redis),
   jobs by state, the failed jobs with their errors, and the control trail (submit, create,
   pause, resume, cancel, abort, retry-failed, reprioritize events with their operators);
3. :func:`summary_line`: the honest one-line outcome, including failures that arrived after
   the abort threshold from jobs already running (the task hash's ``overshoot``).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.errors import NotFoundError
from scheduler.record.models import Event, Job, Task

__all__ = ["CONTROL_KINDS", "LIST_COLUMNS", "list_tasks", "show_task", "summary_line"]

LIST_COLUMNS = ["id", "name", "action", "target", "operator", "priority", "state", "total",
                "succeeded", "failed", "running", "created_at"]
CONTROL_KINDS = ("submit", "create", "pause", "resume", "cancel", "abort", "retry-failed",
                 "reprioritize", "reconcile")
FAILED_SHOWN = 20
TRAIL_SHOWN = 200


def _row(t: Any) -> dict[str, Any]:
    return {"id": t.id, "name": t.name, "action": t.action, "target": t.target,
            "operator": t.operator, "priority": t.priority, "state": t.state, "total": t.total,
            "succeeded": t.succeeded, "failed": t.failed, "running": t.running,
            "lost": t.lost, "cancelled": t.cancelled, "created_at": t.created_at,
            "started_at": t.started_at, "finished_at": t.finished_at}


def list_tasks(session: Session, *, state: str | None = None, operator: str | None = None,
               action: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    q = sa.select(Task).order_by(Task.id.desc()).limit(limit)
    if state:
        q = q.where(Task.state == state)
    if operator:
        q = q.where(Task.operator == operator)
    if action:
        q = q.where(Task.action == action)
    return [_row(t) for t in session.scalars(q)]


def _int(live: dict[str, str], key: str) -> int:
    try:
        return int(live.get(key) or 0)
    except ValueError:
        return 0


def summary_line(task: dict[str, Any], live: dict[str, str] | None) -> str:
    """One honest sentence about where the task stands."""
    total = task["total"]
    if live:
        done = {k: _int(live, k) for k in ("succeeded", "failed", "cancelled", "running")}
        state = live.get("state", task["state"])
    else:
        done = {k: task[k] for k in ("succeeded", "failed", "cancelled", "running")}
        state = task["state"]
    text = (f"{state}: {done['succeeded']} of {total} succeeded, {done['failed']} failed, "
            f"{done['cancelled']} cancelled, {done['running']} running")
    if live and state == "aborted":
        limit, over = _int(live, "max_failures"), _int(live, "overshoot")
        text += (f"; aborted at {limit} failures, and {over} more failure(s) came in after the "
                 "threshold from jobs already running")
    if task["state"] == "accepted" and not live:
        text += "; recorded but not queued (run `fleetsched reconcile`)"
    return text


def show_task(session: Session, task_id: int, live: dict[str, str] | None) -> dict[str, Any]:
    """Everything ``tasks show`` prints; ``live`` is the Redis task hash (None: unreachable)."""
    t = session.get(Task, task_id)
    if t is None:
        raise NotFoundError(f"no task {task_id}", hint="see `fleetsched tasks list`")
    out = _row(t)
    out.update({
        "params": t.params, "executor": t.executor, "in_window": t.in_window,
        "start_at": t.start_at,
        "policy": {"max_concurrency": t.max_running or "none",
                   "max_failures": t.max_failures or "none", "attempts": t.max_attempts,
                   "backoff_ms": t.backoff_ms, "timeout_s": t.timeout_s,
                   "idempotent": t.idempotent},
    })
    jobs = dict(session.execute(sa.select(Job.state, sa.func.count()).where(
        Job.task_id == task_id).group_by(Job.state)).all())
    out["jobs"] = {k: jobs[k] for k in sorted(jobs)}
    failed = session.execute(sa.select(Job.id, Job.host, Job.state, Job.attempts, Job.exit_code,
                                       Job.error).where(Job.task_id == task_id,
                                                        Job.state.in_(("failed", "lost")))
                             .order_by(Job.seq).limit(FAILED_SHOWN)).all()
    out["failures"] = [dict(r._mapping) for r in failed]
    if live:
        out["live"] = {k: live[k] for k in (
            "state", "prio", "total", "running", "succeeded", "failed", "cancelled", "lost",
            "overshoot", "max_running", "max_failures") if k in live}
    else:
        out["live"] = None
    trail = session.execute(sa.select(Event.ts, Event.kind, Event.operator, Event.data)
                            .where(Event.task_id == str(task_id),
                                   Event.kind.in_(CONTROL_KINDS))
                            .order_by(Event.ts, Event.id).limit(TRAIL_SHOWN)).all()
    out["trail"] = [{"ts": r.ts, "kind": r.kind, "operator": r.operator,
                     "count": (r.data or {}).get("count"), "error": (r.data or {}).get("error")}
                    for r in trail]
    out["summary"] = summary_line(out, live)
    return out
