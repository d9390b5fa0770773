"""Each opening of a window, with the approval state the approvals give it: what the web
console's calendar and window pages draw (``verbs.windows.timeline`` and ``verbs.windows.openings``).

1. The openings come from the calendar core (``calendar.windows.openings`` over a period,
   ``upcoming`` for the next few) of the window as listed, whatever its approval.
2. An opening's ``state`` is never worked out here from the decisions: it is ``approved`` when
   the calendar core lets a job start at its start under the window's effective approval
   (``approvals.effective`` -> ``assignment.window_from_row`` -> ``is_open``), ``denied``
   when it was refused (one by one, or a party denied the version), else ``pending``; a window
   that needs no approval has ``open`` openings, a freeze ``freeze`` ones.
3. With each opening, ``said``: each party's newest standing decision on the current version
   that speaks to it (the series, or that one opening), with who and the comment. A customer
   (``tenant``) is shown its own party's decisions only, and another party's denial as
   ``pending`` (as ``windows.tenant_view`` says "awaiting others").
4. :func:`lanes`: the calendar's rows, one per assignment target (``group:NAME``,
   ``host:NAME``) with the windows on it, from ``windows list``'s rows (already scoped to a
   customer by the caller).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.calendar.windows import Opening, Window, is_open, openings, upcoming
from scheduler.errors import NotFoundError
from scheduler.record.models import Window as WindowRow
from scheduler.windows.approvals import Approval, effective, party_name
from scheduler.windows.assignment import window_from_row

__all__ = ["UNASSIGNED", "lanes", "next_states", "period_states"]

UNASSIGNED = "(assigned to nothing)"


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def period_states(session: Session, names: Sequence[str], start_utc: datetime,
                  end_utc: datetime, *, tenant: str | None = None,
                  now: datetime | None = None) -> dict[str, list[dict[str, Any]]]:
    """Each named window's openings overlapping ``[start_utc, end_utc)``, with their states
    (the caller chose names the viewer may see)."""
    rows = session.scalars(sa.select(WindowRow).where(WindowRow.name.in_(list(names)))).all()
    approvals = effective(session, rows, now)
    return {row.name: [_state(row, approvals[row.id], o, tenant, used)
                       for o in openings(window_from_row(row), start_utc, end_utc)]
            for row in rows
            for used in [window_from_row(row, approvals[row.id])]}


def next_states(session: Session, name: str, count: int, *, tenant: str | None = None,
                now: datetime | None = None) -> list[dict[str, Any]]:
    """Window ``name``'s next ``count`` openings (one in progress first), with their states."""
    from scheduler.record.types import utcnow

    row = session.scalars(sa.select(WindowRow).where(WindowRow.name == name)).first()
    if row is None:
        raise NotFoundError(f"no window named {name!r}", hint="see `fleetsched windows list`")
    approval = effective(session, [row], now)[row.id]
    used = window_from_row(row, approval)
    return [_state(row, approval, o, tenant, used)
            for o in upcoming(window_from_row(row), now or utcnow(), count)]


def _state(row: WindowRow, approval: Approval, opening: Opening, tenant: str | None,
           used: Window) -> dict[str, Any]:
    """``opening``'s state and decisions; ``used``: the window as its approval lets it be
    used (``window_from_row(row, approval)``)."""
    said = _said(row, approval, opening.start_utc, tenant)
    if row.kind == "freeze":
        state = "freeze"
    elif not approval.parties:
        state = "open"
    elif is_open([used], opening.start_utc):
        state = "approved"
    elif any(d["decision"] == "denied" for d in said) or (tenant is None and (
            approval.denied or opening.start_utc in approval.refused)):
        state = "denied"
    else:
        state = "pending"
    return {"window": row.name, "start_utc": opening.start_utc, "end_utc": opening.end_utc,
            "start_local": opening.start_local, "end_local": opening.end_local,
            "tz": opening.tz, "state": state, "said": said}


def _said(row: WindowRow, approval: Approval, start: datetime,
          tenant: str | None) -> list[dict[str, Any]]:
    """Each party's newest live decision on the current version for the series or ``start``."""
    parties = [p for p in approval.parties if tenant is None or p == tenant]
    newest: dict[str | None, Any] = {}
    for d in row.approvals:  # oldest first: the newest wins
        if d.version != row.version or d.revoked_at is not None or d.tenant not in parties:
            continue
        if d.occurrence is not None and _utc(d.occurrence) != start:
            continue
        newest[d.tenant] = d
    return [{"party": party_name(p), "decision": d.decision, "by": d.decided_by,
             "at": _utc(d.decided_at), "comment": d.comment,
             "occurrence": d.occurrence is not None} for p, d in newest.items()]


def lanes(rows: Sequence[dict[str, Any]], *, group: str | None = None
          ) -> list[tuple[str, list[dict[str, Any]]]]:
    """``windows list`` rows by assignment target (groups first, then hosts, then windows
    assigned to nothing), each target's windows by name; ``group``: that group's only."""
    by_target: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        targets = [t for t in str(row.get("assigned") or "").split(", ") if t]
        for target in targets or [UNASSIGNED]:
            by_target[target].append(row)
    if group is not None:
        by_target = {t: ws for t, ws in by_target.items() if t == f"group:{group}"}
    order = sorted(by_target, key=lambda t: (not t.startswith("group:"), t == UNASSIGNED, t))
    return [(t, sorted(by_target[t], key=lambda r: r["name"])) for t in order]
