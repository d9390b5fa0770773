"""Who must approve a service window, what each decided, and what that allows.

1. A window's **parties** are the owners of the hosts it covers (assigned directly, or through a
   group and its child groups): each customer (``hosts.tenant``), and the team (``None``) for
   hosts of no customer; a window assigned to nothing answers to the team. A party must approve
   when the window ``requires_approval``, or when the customer's settings say so
   (``tenants.approval_required``). Freezes never need approval.
2. A **decision** (``window_approvals``: approved or denied, with a comment, the principal, its
   source address) binds to the window's ``version``: an edit bumps the version, and every
   earlier decision stops counting. It covers the whole series or one occurrence (the start of
   one opening), and an approval may carry an expiry or be revoked. A party's standing series
   decision is its newest one for the version that is not revoked (an expired approval leaves
   the party pending); its occurrence approvals count when they are newer than its last series
   denial and not expired.
3. :func:`effective` turns the decisions of every party into what the calendar model needs
   (``Window.approved``, ``approved_until``, ``approved_starts``): every opening when each party
   approved the series (cut at the first expiry), else only the occurrences each party approved;
   and which parties are still to decide (``pending``) or said no (``denied``).
4. :func:`decide` and :func:`revoke` write a decision; the caller copies the window to Redis.
   The proposer of a version (whoever added or last edited the window) may not approve it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.errors import ForbiddenError, NotFoundError, ValidationError
from scheduler.record.audit import record_event
from scheduler.record.models import (
    Host,
    Tenant,
    WindowApproval,
    WindowAssignment,
    group_children,
    group_hosts,
)
from scheduler.record.models import Window as WindowRow
from scheduler.record.types import utcnow

__all__ = ["TEAM", "Approval", "check_visible", "decide", "effective", "party_name",
           "revoke"]

TEAM = None  # the party of the hosts no customer owns


def party_name(party: str | None) -> str:
    return "the team" if party is None else f"customer {party}"


@dataclass(frozen=True)
class Approval:
    """What a window's decisions allow now: every opening (``approved``) until ``until`` but
    those starting at ``refused``, or only the openings starting at ``starts``; ``parties``
    that must approve, ``pending`` ones that have not, ``denied`` ones that refused."""

    approved: bool = True
    until: datetime | None = None
    starts: frozenset[datetime] = frozenset()
    parties: tuple[str | None, ...] = ()
    pending: tuple[str | None, ...] = ()
    denied: tuple[str | None, ...] = ()
    refused: frozenset[datetime] = frozenset()  # openings denied one by one

    def describe(self) -> str:
        """One line for ``windows list``: not required, approved (until), or who is awaited."""
        if not self.parties:
            return "not required"
        if self.approved:
            return ("approved" + (f" until {self.until:%Y-%m-%d %H:%M} UTC" if self.until else "")
                    + (f"; {len(self.refused)} occurrence(s) denied" if self.refused else ""))
        said = []
        if self.denied:
            said.append("DENIED by " + ", ".join(party_name(p) for p in self.denied))
        if self.pending:
            said.append("PENDING " + ", ".join(party_name(p) for p in self.pending))
        if self.starts:
            said.append(f"{len(self.starts)} occurrence(s) approved")
        return "; ".join(said)


# ------------------------------------------------------------------------------ parties


def _owners(session: Session, window_ids: Iterable[int]) -> dict[int, set[str | None]]:
    """The owners of the hosts each window covers (None: a host of no customer)."""
    wanted = set(window_ids)
    children: dict[int, set[int]] = defaultdict(set)
    for parent, child in session.execute(
            sa.select(group_children.c.parent_id, group_children.c.child_id)):
        children[parent].add(child)
    members: dict[int, set[int]] = defaultdict(set)
    for gid, hid in session.execute(sa.select(group_hosts.c.group_id, group_hosts.c.host_id)):
        members[gid].add(hid)
    tenant: dict[int, str | None] = {hid: t for hid, t in session.execute(sa.select(Host.id, Host.tenant))}
    covered: dict[int, set[int]] = defaultdict(set)
    a = WindowAssignment.__table__
    for wid, hid, gid in session.execute(sa.select(a.c.window_id, a.c.host_id, a.c.group_id)):
        if wid not in wanted:
            continue
        if hid is not None:
            covered[wid].add(hid)
            continue
        todo, seen = [gid], set()
        while todo:
            g = todo.pop()
            if g not in seen:
                seen.add(g)
                covered[wid].update(members.get(g, ()))
                todo.extend(children.get(g, ()))
    return {wid: ({tenant.get(h) for h in covered[wid]} if covered.get(wid) else {TEAM})
            for wid in wanted}


def _parties(row: Any, owners: set[str | None],
             asking: set[str]) -> tuple[str | None, ...]:
    if row.kind == "freeze":
        return ()
    if row.requires_approval:
        chosen = owners
    else:
        chosen = {o for o in owners if o is not None and o in asking}
    return tuple(sorted(chosen, key=lambda p: (p is not None, p or "")))


# ------------------------------------------------------------------------------ decisions


def _standing(decisions: list[Any], now: datetime) -> tuple[Any | None, set[datetime],
                                                              set[datetime], bool]:
    """(standing series approval, approved and denied occurrence starts, series denied) of one
    party's decisions on the current version, oldest first.

    The newest series decision stands: an approval that expired or was revoked leaves the
    party pending, however an older one read. Each occurrence's newest decision stands too;
    an occurrence approval counts when it is newer than the last series denial."""
    kept = [d for d in decisions if d.revoked_at is None]
    series = next((d for d in reversed(kept) if d.occurrence is None), None)
    denied = series is not None and series.decision == "denied"
    if series is not None and (series.decision == "denied" or (
            series.expires_at is not None and series.expires_at <= now)):
        series = None
    last_denial = max((d.id for d in kept if d.occurrence is None and d.decision == "denied"),
                      default=0)
    newest: dict[datetime, Any] = {}
    for d in kept:
        if d.occurrence is not None:
            newest[d.occurrence] = d
    approved = {at for at, d in newest.items() if d.decision == "approved" and d.id > last_denial}
    refused = {at for at, d in newest.items() if d.decision == "denied"}
    return series, approved, refused, denied


def effective(session: Session, rows: Iterable[Any],
              now: datetime | None = None) -> dict[int, Approval]:
    """Each window's :class:`Approval` now (see the module docstring), by window id."""
    rows = list(rows)
    now = now or utcnow()
    owners = _owners(session, [r.id for r in rows])
    asking = set(session.scalars(sa.select(Tenant.name).where(Tenant.approval_required)))
    d = WindowApproval.__table__
    by_window: dict[int, list[Any]] = defaultdict(list)
    if rows:
        for dec in session.execute(sa.select(d).where(d.c.window_id.in_([r.id for r in rows]))
                                   .order_by(d.c.id)):
            by_window[dec.window_id].append(dec)
    out = {}
    for row in rows:
        parties = _parties(row, owners[row.id], asking)
        out[row.id] = _combine(row, parties, by_window[row.id], now)
    return out


def _combine(row: Any, parties: tuple[str | None, ...], decisions: list[Any],
             now: datetime) -> Approval:
    if not parties:
        return Approval()
    series_until: list[datetime | None] = []
    occurrence_sets: list[set[datetime]] = []
    refused: set[datetime] = set()
    pending, denied = [], []
    for party in parties:
        mine = [x for x in decisions if x.tenant == party and x.version == row.version]
        series, starts, no, said_no = _standing(mine, now)
        refused |= no
        if party is TEAM and row.version == 1 and row.approved_at is not None and \
                not any(x.tenant is None for x in decisions):
            series_until.append(None)  # approved before decisions were recorded (0011)
        elif series is not None:
            series_until.append(series.expires_at)
        elif starts:
            occurrence_sets.append(starts)
        elif said_no:
            denied.append(party)
        else:
            pending.append(party)
    expiries = [u for u in series_until if u is not None]
    until = min(expiries) if expiries else None
    if pending or denied:
        return Approval(False, until, frozenset(), parties, tuple(pending), tuple(denied))
    if not occurrence_sets:
        return Approval(True, until, frozenset(), parties, refused=frozenset(refused))
    starts = set.intersection(*occurrence_sets) - refused
    starts = {s for s in starts if until is None or s < until}
    return Approval(False, until, frozenset(starts), parties)


def check_visible(session: Session, row: Any, who: Any) -> None:
    """``NotFoundError`` when ``who`` is a customer that owns none of the window's hosts: the
    answer for a window that is not there, given before anything describes it."""
    party = getattr(who, "tenant", None)
    if party is not None and party not in _owners(session, [row.id])[row.id]:
        raise NotFoundError(f"no window named {row.name!r}", hint="see `fleetsched windows list`")


def decide(session: Session, row: WindowRow, who: Any, decision: str, *,
           comment: str | None = None, occurrence: datetime | None = None,
           expires_at: datetime | None = None, now: datetime | None = None) -> WindowApproval:
    """Record ``who``'s decision (``approved`` or ``denied``) on the window's current version
    for its party (its tenant, or the team), with a ``window-approve``/``window-deny`` event.
    An ``occurrence`` must be the start of one of its openings (the caller checks it)."""
    now = now or utcnow()
    party = getattr(who, "tenant", None)
    check_visible(session, row, who)
    if row.kind == "freeze":
        raise ValidationError(f"window {row.name!r} is a freeze: freezes need no approval")
    approval = effective(session, [row], now)[row.id]
    if party not in approval.parties:
        awaited = approval.parties if party is None else ()  # a customer learns of no other
        raise ValidationError(f"window {row.name!r} needs no approval from {party_name(party)}",
                              hint="awaited: " + ", ".join(party_name(p) for p in awaited)
                              if awaited else "it is in use already" if not approval.parties
                              else None)
    if decision == "approved" and who.name == (row.changed_by or row.created_by):
        raise ForbiddenError(f"{who.name} proposed version {row.version} of window "
                             f"{row.name!r} and may not approve it",
                             hint="another person of the party approves it")
    if decision == "denied" and not (comment or "").strip():
        raise ValidationError("a denial needs a comment saying why",
                              hint="e.g. --comment 'not during our quarter close'")
    if expires_at is not None and occurrence is not None:
        raise ValidationError("an approval of one occurrence ends with it: give --expires or "
                              "--occurrence, not both")
    if expires_at is not None and expires_at <= now:
        raise ValidationError(f"the expiry {expires_at.astimezone(timezone.utc):%Y-%m-%d %H:%M} "
                              "UTC is not in the future")
    made = WindowApproval(window_id=row.id, tenant=party, version=row.version, decision=decision,
                          occurrence=occurrence, comment=comment, decided_by=who.name,
                          via=getattr(who, "via", None), source=getattr(who, "source", None),
                          decided_at=now, expires_at=expires_at)
    session.add(made)
    if party is TEAM and occurrence is None:  # shown by `windows list`: the team's standing one
        approved = decision == "approved"
        row.approved_by, row.approved_at = (who.name, now) if approved else (None, None)
    session.flush()
    record_event(session, "window-approve" if decision == "approved" else "window-deny",
                 operator=who, data={
                     "window": row.name, "version": row.version, "tenant": party,
                     "occurrence": occurrence.isoformat() if occurrence else None,
                     "expires_at": expires_at.isoformat() if expires_at else None,
                     "comment": comment})
    return made


def revoke(session: Session, row: WindowRow, who: Any, now: datetime | None = None) -> int:
    """Revoke the party's standing approvals of the current version (``window-revoke``);
    returns how many. None standing is ``NotFoundError``."""
    now = now or utcnow()
    party = getattr(who, "tenant", None)
    check_visible(session, row, who)
    live = session.scalars(sa.select(WindowApproval).where(
        WindowApproval.window_id == row.id, WindowApproval.version == row.version,
        WindowApproval.decision == "approved", WindowApproval.revoked_at.is_(None),
        WindowApproval.tenant.is_(None) if party is None else WindowApproval.tenant == party
    )).all()
    legacy = party is TEAM and row.approved_at is not None
    if not live and not legacy:
        raise NotFoundError(f"{party_name(party)} has no standing approval of window "
                            f"{row.name!r}", hint=f"see `fleetsched windows show {row.name}`")
    for decision in live:
        decision.revoked_at, decision.revoked_by = now, who.name
    if party is TEAM:
        row.approved_by, row.approved_at = None, None
    record_event(session, "window-revoke", operator=who, data={
        "window": row.name, "version": row.version, "tenant": party, "revoked": len(live)})
    return len(live)
