"""Idempotency keys: a submit retried after a lost reply is recognised as a repeat.

A client that timed out cannot tell whether its submit ran. It sends the same request again
with the same key (``Idempotency-Key`` over HTTP, ``submit --idempotency-key`` at the shell),
and gets the first task back instead of a second one. What this module owns:

1. :func:`check_key`: what a key may be (1 to 160 printable characters, no spaces);
2. :func:`fingerprint`: the SHA-256 of the request as asked (a ``TaskRequest``, before
   anything is looked up), kept in the first task's ``submit`` event as ``request_sha256``;
3. :func:`first_of`: the task an operator already submitted under a key, if any, checked
   against the repeat's fingerprint: the same request is a :class:`Repeat`, another one a
   :class:`ConflictError` naming the key and the first task.

The key is stored in ``tasks.request_key``, unique per ``tasks.operator``: under a race the
unique constraint decides (``scheduler.submission.submit.submit`` turns the loser's insert
into a repeat of the winner's task).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from scheduler.errors import ConflictError, ValidationError
from scheduler.record.models import Event, Task

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

__all__ = ["MAX_KEY", "Repeat", "check_key", "fingerprint", "first_of"]

MAX_KEY = 160  # characters: tasks.request_key's width


@dataclass(frozen=True)
class Repeat:
    """The task a repeated submit gets back, as the record holds it now."""

    task_id: int
    jobs: int
    state: str  # "accepted": recorded but not queued yet (see docs/reliability.md)
    action: str


def check_key(key: str) -> str:
    """``key`` if it may be an idempotency key, else one ``ValidationError`` line."""
    if not key or len(key) > MAX_KEY or not key.isprintable() or any(c.isspace() for c in key):
        raise ValidationError(f"an idempotency key must be 1 to {MAX_KEY} printable characters "
                              "without spaces",
                              hint="e.g. a UUID, or the CI job's id and step")
    return key


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return str(value)


def fingerprint(request: Any) -> str:
    """The SHA-256 (hex) of ``request`` (a ``TaskRequest``, a dataclass: typed loosely, as
    ``scheduler.submission.submit`` imports this module) as asked: the same options, file or
    JSON body give the same fingerprint; any other value gives another. Fields left at their
    default are not part of it, so a field a later release adds (with a default) does not
    make a retry under an earlier key look like another request."""
    asked = json.dumps(_asked(request), sort_keys=True, default=_plain, separators=(",", ":"))
    return hashlib.sha256(asked.encode()).hexdigest()


def _asked(request: Any) -> dict[str, Any]:
    values = dataclasses.asdict(request)
    for f in dataclasses.fields(request):
        default = (f.default if f.default is not dataclasses.MISSING else
                   f.default_factory() if f.default_factory is not dataclasses.MISSING else
                   dataclasses.MISSING)
        if values[f.name] == default:
            del values[f.name]
    return values


def first_of(session: Session, operator: str, key: str, asked: str) -> Repeat | None:
    """The task ``operator`` submitted under ``key`` if its request's fingerprint is ``asked``;
    None when there is none; ``ConflictError`` when the first one asked something else (or its
    ``submit`` event, which holds the fingerprint, has been pruned)."""
    t = Task.__table__
    row = session.execute(sa.select(t.c.id, t.c.total, t.c.state, t.c.action).where(
        t.c.operator == operator, t.c.request_key == key)).first()
    if row is None:
        return None
    e = Event.__table__
    data = session.execute(sa.select(e.c.data).where(
        e.c.task_id == str(row.id), e.c.kind == "submit").limit(1)).scalar()
    first = (data or {}).get("request_sha256")
    if first != asked:
        why = "asked for something else" if first else "is no longer on record to compare"
        raise ConflictError(f"idempotency key {key!r} was used by task {row.id}, whose request "
                            f"{why}; nothing was submitted",
                            hint=f"use a new key for a new request (`fleetsched tasks show "
                                 f"{row.id}` shows the first)")
    return Repeat(task_id=int(row.id), jobs=int(row.total or 0), state=row.state,
                  action=row.action)
