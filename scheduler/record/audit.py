"""The one way to write an audit event that does not come from the Redis stream.

Operator commands and services (inventory import, submission, control, windows, schedules,
reconcile) record what they changed with :func:`record_event`, in the caller's transaction, so
the change and its event commit together. Their ids, ``<ms>-L<16 hex>``, sort by time with the
stream's ids (``<ms>-<seq>``) and can never collide with one (models rule 4).

An operator's verb passes its :class:`~scheduler.principal.Principal` as ``operator``: the event
stores its name as ``operator`` and, in ``data``, ``principal``: how it was authenticated, its
role, tenant and address (``Principal.audit``). A bare name is a service's own (``reconcile``,
a schedule's firing) or a caller that has no principal.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.principal import Principal
from scheduler.record.models import Event
from scheduler.record.types import to_ms, utcnow

__all__ = ["event_id", "record_event"]


def event_id(ts_ms: int) -> str:
    """An id for an event that does not come from the stream."""
    return f"{ts_ms}-L{uuid.uuid4().hex[:16]}"


def record_event(db: Session | sa.Connection, kind: str, *, operator: Principal | str | None,
                 data: dict[str, Any], task_id: int | str | None = None,
                 host: str | None = None, at: datetime | None = None) -> str:
    """Append one audit event in ``db``'s transaction; returns its id. ``operator``: the acting
    principal (its name is stored, and ``data["principal"]`` says who it is), or a name."""
    if isinstance(operator, Principal):
        data = {**data, "principal": operator.audit()}
        operator = operator.name
    ts = at or utcnow()
    eid = event_id(to_ms(ts))
    db.execute(sa.insert(Event.__table__).values(
        id=eid, ts=ts, kind=kind, operator=operator, data=data, host=host,
        task_id=None if task_id is None else str(task_id)))
    return eid
