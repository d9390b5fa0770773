"""The jobs waiting on a window: those not finished whose ``window`` field names it (what the
web console's window page lists under "waiting on it"), in SQL.

A job's ``window`` field holds the names of every window and freeze that applied when it was
submitted, space-separated, freezes as ``!name`` (``windows.assignment.window_field``): a job
waits on window ``name`` when one of those words is ``name`` or ``!name``. A customer
(``tenant``) gets its own jobs only (``jobs.tenant``).
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.record.models import JOB_FINAL_STATES, Job

__all__ = ["jobs_waiting"]

_J = Job.__table__


def _like(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"% {escaped} %"


def jobs_waiting(session: Session, name: str, *, tenant: str | None = None, limit: int = 50,
                 offset: int = 0) -> list[dict[str, Any]]:
    """Up to ``limit`` unfinished jobs naming window ``name``, soonest due first."""
    padded = sa.literal(" ") + _J.c.window + sa.literal(" ")
    chosen = (sa.select(_J.c.id, _J.c.task_id, _J.c.host, _J.c.state, _J.c.due_at)
              .where(_J.c.state.not_in(JOB_FINAL_STATES), _J.c.window.is_not(None),
                     sa.or_(padded.like(_like(name), escape="\\"),
                            padded.like(_like(f"!{name}"), escape="\\")))
              .order_by(_J.c.due_at, _J.c.id).limit(limit).offset(offset))
    if tenant is not None:
        chosen = chosen.where(_J.c.tenant == tenant)
    return [{"job": r.id, "task": r.task_id, "host": r.host, "state": r.state,
             "due_at": r.due_at} for r in session.execute(chosen)]
