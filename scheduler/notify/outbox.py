"""The outbox's sender: delivers pending notices, retries them with backoff, records each try.

A :class:`Sender` runs in a thread of its own next to every recorder (``fleetsched recorder``,
and every worker node, beside its recorder process), never inside the recorder's fold or the queue's scripts:
a receiver that is down slows nothing but this loop. Each :meth:`Sender.run_once`:

1. now and then, writes notices for windows awaiting approval (``detect.scan_windows``);
2. up to ``batch`` times: reads the oldest pending row whose ``next_at`` has come (one not yet
   tried in this pass);
3. claims it with a guarded UPDATE (``attempts`` + 1, ``next_at`` pushed a lease ahead of the
   clock at the claim), so two senders never send one row at the same moment; a sender that
   dies mid-send leaves the row to another once the lease ends (delivery is at least once);
4. delivers it outside any transaction (``scheduler.notify.deliver``, 5 s timeouts);
5. records the outcome and its audit event in one transaction: ``sent`` (``notify-sent``), or
   ``pending`` again after a backoff doubling from ``backoff_s`` up to ``backoff_max_s``
   (``notify-failed`` with ``retry_at``), or ``failed`` after ``max_attempts`` tries
   (``notify-failed`` with ``gave_up``). Events and errors show the target without its secret
   (``Target.shown``).

:func:`list_notifications` is what ``fleetsched notify list`` shows.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.errors import ValidationError
from scheduler.notify.deliver import TIMEOUT_S, DeliveryError, send
from scheduler.notify.detect import scan_windows
from scheduler.notify.targets import Policy, parse_target
from scheduler.record.audit import record_event
from scheduler.record.models import NOTIFICATION_STATES, Notification
from scheduler.record.types import utcnow

__all__ = ["Sender", "SenderStats", "list_notifications"]

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 8  # tries before a notice is given up (about 2 h with the backoff below)
BACKOFF_S = 30.0  # wait after the first failed try, doubling
BACKOFF_MAX_S = 3600.0
LEASE_S = 60.0  # a claimed row is this sender's for this long (well above the 5 s timeouts)
APPROVAL_LEAD = timedelta(hours=24)  # tell about an unapproved window this long before it opens
SCAN_EVERY_S = 300.0


@dataclass
class SenderStats:
    sent: int = 0
    failed: int = 0  # tries that failed (retried or given up)
    gave_up: int = 0
    errors: int = 0  # the database did not answer


class Sender:
    """Delivers the outbox (see the module docstring)."""

    def __init__(self, engine: Engine, policy: Policy, *, max_attempts: int = MAX_ATTEMPTS,
                 backoff_s: float = BACKOFF_S, backoff_max_s: float = BACKOFF_MAX_S,
                 batch: int = 20, lease_s: float = LEASE_S, idle_s: float = 2.0,
                 timeout_s: float = TIMEOUT_S, approval_lead: timedelta = APPROVAL_LEAD,
                 scan_every_s: float = SCAN_EVERY_S) -> None:
        self.engine = engine
        self.policy = policy
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.backoff_max_s = backoff_max_s
        self.batch = batch
        self.lease_s = lease_s
        self.idle_s = idle_s
        self.timeout_s = timeout_s
        self.approval_lead = approval_lead
        self.scan_every_s = scan_every_s
        self.stats = SenderStats()
        self._next_scan = 0.0

    def run(self, stop_event: threading.Event) -> None:
        """Send until ``stop_event`` is set; a database outage is waited out, and any other
        error is logged and the loop goes on (this thread must not die quietly)."""
        while not stop_event.is_set():
            try:
                done = self.run_once()
            except sa.exc.SQLAlchemyError as exc:
                self.stats.errors += 1
                log.warning("notify sender: %s", str(getattr(exc, "orig", exc)).splitlines()[0])
                done = 0
            except Exception:
                self.stats.errors += 1
                log.exception("notify sender: unexpected error; going on")
                done = 0
            if done == 0:
                stop_event.wait(self.idle_s)

    def run_once(self, now: datetime | None = None) -> int:
        """One pass; returns the rows tried (0: nothing was due).

        Rows are read and claimed one at a time, each right before it is sent, and the lease
        and any retry time are reckoned from the clock at that moment: a pass whose earlier
        rows took longer than the lease never claims a later one with a lease already ended
        (which another sender would then deliver too). ``now`` fixes the clock (tests)."""
        def clock() -> datetime:
            return now if now is not None else utcnow()

        if time.monotonic() >= self._next_scan:
            self._next_scan = time.monotonic() + self.scan_every_s
            with self.engine.begin() as conn:
                scan_windows(conn, self.policy, self.approval_lead, clock())
        tried = 0
        seen: list[int] = []  # each row at most once a pass (a backoff of 0 makes it due again)
        for _ in range(self.batch):
            row = self._next_due(clock(), seen)
            if row is None:
                break
            seen.append(row.id)
            if self._claim(row, clock()):
                self._deliver(row, clock)
                tried += 1
        return tried

    def _next_due(self, now: datetime, seen: list[int]) -> Any | None:
        n = Notification.__table__
        query = sa.select(n).where(n.c.state == "pending", n.c.next_at <= now)
        if seen:
            query = query.where(n.c.id.not_in(seen))
        with self.engine.connect() as conn:
            return conn.execute(query.order_by(n.c.next_at, n.c.id).limit(1)).first()

    def _claim(self, row: Any, now: datetime) -> bool:
        """Take ``row`` for ``lease_s`` from ``now`` (the time of the claim, not of the pass)."""
        n = Notification.__table__
        with self.engine.begin() as conn:
            claimed = conn.execute(sa.update(n).where(
                n.c.id == row.id, n.c.state == "pending", n.c.attempts == row.attempts)
                .values(attempts=row.attempts + 1,
                        next_at=now + timedelta(seconds=self.lease_s))).rowcount
        return claimed == 1

    def _deliver(self, row: Any, clock: Callable[[], datetime]) -> None:
        attempt = row.attempts + 1
        try:
            target = parse_target(row.target)
        except ValidationError as exc:  # stored before a stricter check: give it up at once
            self._failed(row, attempt, str(exc), "(invalid target)", give_up=True, now=clock())
            return
        try:
            send(target, row.payload, self.policy.smtp, self.timeout_s)
        except DeliveryError as exc:
            self._failed(row, attempt, str(exc), target.shown,
                         give_up=attempt >= self.max_attempts, now=clock())
            return
        n = Notification.__table__
        with self.engine.begin() as conn:
            conn.execute(sa.update(n).where(n.c.id == row.id).values(
                state="sent", sent_at=utcnow(), last_error=None))
            record_event(conn, "notify-sent", operator=None, task_id=row.task_id,
                         data=self._data(row, attempt, target.shown))
        self.stats.sent += 1
        log.info("notify: %s %s sent to %s", row.kind, row.id, target.shown)

    def _failed(self, row: Any, attempt: int, error: str, shown: str, *, give_up: bool,
                now: datetime) -> None:
        n = Notification.__table__
        data = {**self._data(row, attempt, shown), "error": error}
        if give_up:
            values: dict[str, Any] = {"state": "failed", "last_error": error}
            data["gave_up"] = True
        else:
            delay = min(self.backoff_s * 2 ** (attempt - 1), self.backoff_max_s)
            retry_at = now + timedelta(seconds=delay)
            values = {"next_at": retry_at, "last_error": error}
            data["retry_at"] = retry_at.isoformat()
        with self.engine.begin() as conn:
            conn.execute(sa.update(n).where(n.c.id == row.id).values(**values))
            record_event(conn, "notify-failed", operator=None, task_id=row.task_id, data=data)
        self.stats.failed += 1
        self.stats.gave_up += int(give_up)
        log.warning("notify: %s %s to %s, try %d: %s%s", row.kind, row.id, shown, attempt, error,
                    "; given up" if give_up else "")

    @staticmethod
    def _data(row: Any, attempt: int, shown: str) -> dict[str, Any]:
        data = {"notification": row.id, "notice": row.kind, "target": shown, "attempt": attempt}
        if row.schedule:
            data["schedule"] = row.schedule
        return data


def list_notifications(engine: Engine, *, state: str | None = None,
                       limit: int = 50) -> list[dict[str, Any]]:
    """The newest outbox rows (of ``state`` if given), targets shown without secrets."""
    if state is not None and state not in NOTIFICATION_STATES:
        raise ValidationError(f"--state {state!r} is not one of {', '.join(NOTIFICATION_STATES)}")
    n = Notification.__table__
    query = sa.select(n).order_by(n.c.id.desc()).limit(limit)
    if state is not None:
        query = query.where(n.c.state == state)
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    out = []
    for r in rows:
        try:
            shown = parse_target(r.target).shown
        except ValidationError:
            shown = "(invalid target)"
        out.append({"id": r.id, "kind": r.kind, "state": r.state, "target": shown,
                    "task": r.task_id, "schedule": r.schedule, "attempts": r.attempts,
                    "next_at": r.next_at if r.state == "pending" else None,
                    "created_at": r.created_at, "sent_at": r.sent_at,
                    "last_error": r.last_error, "text": (r.payload or {}).get("text")})
    return out
