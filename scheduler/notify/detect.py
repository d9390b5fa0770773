"""Deciding, in the recorder's transaction, what operators must be told; writing it to the outbox.

:class:`Detector` is handed to ``scheduler.record.recorder.Recorder`` (``on_batch``) and called
with each batch right after the fold, in the same transaction, so a notice commits together with
the rows that show its cause, or not at all. It writes ``notifications`` rows (one per target,
state ``pending``) and sends nothing. Causes, each with a key that a replayed or re-read batch
computes again (``notifications.key`` is unique: nothing is told twice):

1. ``aborted``: an ``abort`` event (key: the event's stream id);
2. ``lost``: the first job of a task lost for good (a ``lost`` event with outcome ``failed``;
   key: the task, once per task);
3. ``failed``: a task of the batch whose row is now ``failed`` (key: the task and its
   ``finished_at``, so a task failed again after ``retry-failed`` is told again);
4. ``missed``: a ``missed`` event of a schedule (key: the event's stream id);
5. ``stopped``: a ``wave-stop`` event: a rollout in waves stopped and waits for an operator
   (key: the event's stream id; the notice has the ``wave`` and why, as ``error``).

:func:`scan_windows` is the one cause that is not an event: a window awaiting an approval;
each customer awaited is told at once at its contacts, the global targets when it opens within
``lead``; the outbox loop calls it now and then.

Who is told: the global targets (``Policy``), plus the task's own (``tasks.notify``, which a
schedule's occurrence copies from the schedule), or, for ``missed``, the schedule's own
(``schedules.options["notify"]``); only the kinds in ``notify_on``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from scheduler.notify.message import FAILED_HOSTS_MAX, payload
from scheduler.notify.targets import Policy
from scheduler.progress import from_task_row
from scheduler.record.fold import BatchResult, StreamEvent, sql_task_id
from scheduler.record.models import Job, Notification, Schedule, Task, Window
from scheduler.record.types import from_ms, to_ms, utcnow

__all__ = ["Detector", "enqueue", "scan_windows", "task_facts"]

log = logging.getLogger(__name__)

# A task notice's counts (scheduler.progress: failed by the host, lost with the worker)
NOTICE_COUNTS = ("total", "succeeded", "failed", "lost", "cancelled", "running")


class Detector:
    """The recorder's ``on_batch`` hook: notices for one folded batch (module docstring)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy

    def __call__(self, conn: sa.Connection, events: Sequence[StreamEvent],
                 result: BatchResult) -> int:
        """Write the batch's notices in a savepoint: if that fails for any reason but a lost
        connection, the notices are lost and logged, and the batch is recorded all the same
        (a bug here must never stall the record)."""
        try:
            with conn.begin_nested():
                return self._detect(conn, events, result)
        except (sa.exc.OperationalError, sa.exc.InterfaceError):
            raise  # the database is away: the whole batch is retried
        except Exception:
            log.exception("notify: the notices of a batch of %d events were not written",
                          len(events))
            return 0

    def _detect(self, conn: sa.Connection, events: Sequence[StreamEvent],
                result: BatchResult) -> int:
        causes: list[tuple[str, str, int]] = []  # (kind, key, task id)
        extra: dict[str, dict[str, Any]] = {}  # key -> facts of the event itself
        missed: list[StreamEvent] = []
        lost_tasks: set[int] = set()
        for ev in events:
            kind = ev.fields.get("kind")
            if kind == "missed":
                missed.append(ev)
                continue
            tid = sql_task_id(ev.fields.get("task"))
            if tid is None:
                continue
            if kind == "abort":
                causes.append(("aborted", f"aborted:{ev.id}", tid))
            elif kind == "wave-stop":
                causes.append(("stopped", f"stopped:{ev.id}", tid))
                extra[f"stopped:{ev.id}"] = {"wave": ev.fields.get("wave"),
                                             "error": ev.fields.get("error")}
            elif kind == "lost" and ev.fields.get("outcome") == "failed" \
                    and tid not in lost_tasks:
                lost_tasks.add(tid)
                causes.append(("lost", f"lost:{tid}", tid))
        if result.task_ids and "failed" in self.policy.kinds:
            t = Task.__table__
            rows = conn.execute(sa.select(t.c.id, t.c.finished_at).where(
                t.c.id.in_(sorted(result.task_ids)), t.c.state == "failed",
                t.c.finished_at.is_not(None)))
            causes += [("failed", f"failed:{tid}:{to_ms(fin)}", tid) for tid, fin in rows]
        written = 0
        for kind, key, tid in causes:
            written += self._task_notice(conn, kind, key, tid, extra.get(key))
        for ev in missed:
            written += self._missed_notice(conn, ev)
        return written

    def _task_notice(self, conn: sa.Connection, kind: str, key: str, task_id: int,
                     extra: dict[str, Any] | None = None) -> int:
        if kind not in self.policy.kinds:
            return 0
        t = Task.__table__
        row = conn.execute(sa.select(t).where(t.c.id == task_id)).first()
        if row is None:
            return 0
        targets = self.policy.targets_for(row.notify, kind)
        if not targets:
            return 0
        doc = payload(kind, **task_facts(conn, row), **(extra or {}))
        return enqueue(conn, key, kind, [t.spec for t in targets], doc, task_id=str(task_id),
                       schedule=doc.get("schedule"))

    def _missed_notice(self, conn: sa.Connection, ev: StreamEvent) -> int:
        if "missed" not in self.policy.kinds:
            return 0
        f = ev.fields
        name = f.get("schedule") or ""
        options = conn.execute(sa.select(Schedule.options).where(
            Schedule.name == name)).scalar_one_or_none() or {}
        targets = self.policy.targets_for(options.get("notify"), "missed")
        if not targets:
            return 0
        at = from_ms(f["occurrence"]) if (f.get("occurrence") or "").isdigit() else None
        doc = payload("missed", schedule=name, occurrence=at.isoformat() if at else None,
                      error=f.get("error"), at=_iso(from_ms(ev.pos // 1_000_000)))
        return enqueue(conn, f"missed:{ev.id}", "missed", [t.spec for t in targets], doc,
                       schedule=name[:255])


def task_facts(conn: sa.Connection, row: Any) -> dict[str, Any]:
    """What a task notice says about the task ``row`` (a ``tasks`` row) and its failed hosts."""
    j = Job.__table__
    bad = conn.execute(sa.select(j.c.host).where(
        j.c.task_id == row.id, j.c.state.in_(("failed", "lost")))
        .order_by(j.c.seq).limit(FAILED_HOSTS_MAX)).scalars().all()
    progress = from_task_row(row)  # the counters were just recounted from the rows
    more = progress.unsuccessful - len(bad)
    schedule = None
    if row.schedule_id is not None:
        schedule = conn.execute(sa.select(Schedule.name).where(
            Schedule.id == row.schedule_id)).scalar_one_or_none()
    return {"task_id": str(row.id), "name": row.name, "action": row.action,
            "operator": row.operator, "state": row.state, "target": row.target,
            "counts": {k: v for k, v in progress.counts().items() if k in NOTICE_COUNTS},
            "failed_hosts": list(bad), "failed_hosts_more": more if more > 0 else None,
            "schedule": schedule, "occurrence": _iso(row.occurrence),
            "finished_at": _iso(row.finished_at)}


def enqueue(conn: sa.Connection, key: str, kind: str, targets: Iterable[str],
            doc: dict[str, Any], *, task_id: str | None = None, schedule: str | None = None,
            now: datetime | None = None) -> int:
    """One pending outbox row per target for the cause ``key``, in ``conn``'s transaction;
    a row whose key exists is left alone. Returns the rows written."""
    now = now or utcnow()
    rows = [{"key": f"{key[:140]} {_digest(target)}", "kind": kind, "target": target,
             "task_id": task_id, "schedule": schedule, "payload": doc, "state": "pending",
             "attempts": 0, "next_at": now, "created_at": now} for target in targets]
    if not rows:
        return 0
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    stmt = insert(Notification.__table__).on_conflict_do_nothing(index_elements=["key"])
    written = 0
    for row in rows:  # one by one: rowcount of each tells whether it was new
        written += conn.execute(stmt.values(**row)).rowcount or 0
    return written


def scan_windows(conn: sa.Connection, policy: Policy, lead: timedelta,
                 now: datetime | None = None) -> int:
    """Outbox rows for windows awaiting an approval (``scheduler.windows.approvals``):

    - each customer awaited is told once per version of the window, as soon as it is awaited,
      at its contacts (``tenants.contacts``; key: window, version, customer);
    - the global targets are told when such a window opens within ``lead`` (key: the window
      and the opening's start), naming who is awaited.
    """
    from scheduler.calendar.windows import upcoming
    from scheduler.errors import FleetschedError
    from scheduler.record.models import Tenant
    from scheduler.windows.approvals import effective, party_name
    from scheduler.windows.assignment import window_from_row

    if "approval" not in policy.kinds:
        return 0
    now = now or utcnow()
    written = 0
    w_ = Window.__table__
    rows = conn.execute(sa.select(w_).where(w_.c.kind != "freeze")).all()
    approvals = effective(conn, rows, now)  # type: ignore[arg-type]
    contacts = {t.name: list(t.contacts or []) for t in conn.execute(sa.select(Tenant.__table__))}
    for w in rows:
        approval = approvals[w.id]
        if approval.approved or not approval.pending:
            continue
        try:
            nxt = upcoming(window_from_row(w), now, 1)
        except (FleetschedError, ValueError):
            continue
        if not nxt:
            continue
        start = nxt[0].start_utc
        facts = dict(window=w.name, opens=start.isoformat(), closes=nxt[0].end_utc.isoformat(),
                     version=w.version)
        doc = payload("approval", **facts, awaited=[party_name(p) for p in approval.pending])
        for tenant in (p for p in approval.pending if p is not None):
            # a customer is told that it is awaited, and nothing of the other parties
            own = payload("approval", **facts, awaited=[party_name(tenant)])
            written += enqueue(conn, f"approval-request:{w.name[:90]}:{w.version}:{tenant[:30]}",
                               "approval", contacts.get(tenant, []), own, now=now)
        if policy.targets and start - now <= lead:
            written += enqueue(conn, f"approval:{w.name[:100]}:{to_ms(start)}", "approval",
                               [t.spec for t in policy.targets], doc, now=now)
    return written


def _digest(target: str) -> str:
    return hashlib.sha256(target.encode()).hexdigest()[:16]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
