"""Service windows between SQL, the calendar core and Redis: what submission and claim use.

The calendar arithmetic is ``scheduler.calendar.windows`` (pure); this module owns the glue:

1. :func:`window_from_row`: a ``windows`` row -> ``scheduler.calendar.windows.Window`` (kind ``freeze``
   -> ``freeze=True``; ``starts_at``/``ends_at`` -> ``start``/``end``; ``duration_s`` ->
   ``duration``; approved as ``scheduler.windows.approvals`` says);
2. :func:`effective`: each host's windows and freezes from the stored assignments (host beats
   its deepest group, beats fleet-wide; freezes add up), via ``effective_window``;
3. :func:`due_times_in_window`: for a task in windows (``--in-window``, or an action that
   requires them), each host's :class:`Due`: its next opening at or after the start that fits
   the expected duration outside every freeze, the job's ``window`` field and the opening's
   close; refuses hosts without a window, or without an approved opening;
   :func:`due_times_outside_freezes`: for every other task, the start unless a freeze of the
   host holds the job (then the freeze's end): freezes hold every job of every task, unless
   it was submitted with ``--break-glass``;
4. the job's ``window`` field (:func:`window_field`; read by ``wire.parse_window_field``): the names of
   every window and freeze that applied at submission, space-separated, freezes as ``!name``
   (window names never hold spaces nor start with ``!``);
5. Redis copies of the definitions (``Keys.window``) for the claim-time check
   (``workers.deferral``): ``publish``, ``unpublish``, ``window_from_hash``, with
   ``parse_window_field``, live in ``scheduler.windows.wire`` (no SQL: the claim path loads
   them without SQLAlchemy).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.calendar.windows import (
    Assignment,
    EffectiveWindows,
    Opening,
    Window,
    effective_window,
    next_opening,
    upcoming,
)
from scheduler.errors import ValidationError
from scheduler.record.models import Group, Host, WindowAssignment, group_children, group_hosts
from scheduler.record.models import Window as WindowRow
from scheduler.record.tenancy import freeze_tenant
from scheduler.windows.approvals import Approval
from scheduler.windows.approvals import effective as effective_approvals
from scheduler.windows.wire import BREAK_GLASS, FREEZE_MARK

__all__ = [
    "MAX_LISTED", "Due", "due_times_in_window", "due_times_outside_freezes", "effective",
    "host_groups", "load_assignments", "window_field", "window_from_row",
]

MAX_LISTED = 20  # host names listed in one refusal line
MAX_FIELD = 255  # characters of a job's window field (jobs.window is String(255))


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value


def window_from_row(row: Any, approval: Approval | None = None) -> Window:
    """The calendar model of a stored window (read back without the ten-year check), approved
    as ``approval`` says (``scheduler.windows.approvals.effective``; None: as approved, for
    listing its openings)."""
    approval = approval or Approval()
    return Window(
        name=row.name, tz=row.tz or "UTC", rrule=row.rrule, cron=row.cron,
        duration=timedelta(seconds=row.duration_s) if row.duration_s is not None else None,
        end_time=row.end_time, start=_utc(row.starts_at), end=_utc(row.ends_at),
        approved=approval.approved, approved_until=approval.until,
        approved_starts=approval.starts, denied_starts=approval.refused,
        freeze=row.kind == "freeze")


# --------------------------------------------------------------------------- assignments


def _group_depths(session: Session) -> dict[str, int]:
    """Each stored group's depth: the longest chain of parents above it (``all`` 0, top 1)."""
    g = Group.__table__
    names = {gid: name for gid, name in session.execute(sa.select(g.c.id, g.c.name))}
    children: dict[str, list[str]] = defaultdict(list)
    indegree = dict.fromkeys(names.values(), 0)
    for parent, child in session.execute(
            sa.select(group_children.c.parent_id, group_children.c.child_id)):
        children[names[parent]].append(names[child])
        indegree[names[child]] += 1
    depth = dict.fromkeys(names.values(), 1)
    depth["all"] = 0
    ready = [n for n, k in indegree.items() if k == 0]
    while ready:  # Kahn's order; a loop (refused at import) just keeps depth 1
        name = ready.pop()
        for child in children.get(name, ()):
            depth[child] = max(depth[child], depth[name] + 1)
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    return depth


def host_groups(session: Session, hosts: Iterable[str]) -> dict[str, dict[str, int]]:
    """Every group each host is in, directly or through parents, with its depth (plus ``all``)."""
    wanted = set(hosts)
    g, h = Group.__table__, Host.__table__
    ids = {gid: name for gid, name in session.execute(sa.select(g.c.id, g.c.name))}
    parents: dict[str, set[str]] = defaultdict(set)
    for parent, child in session.execute(
            sa.select(group_children.c.parent_id, group_children.c.child_id)):
        parents[ids[child]].add(ids[parent])
    direct: dict[str, set[str]] = defaultdict(set)
    for hname, gid in session.execute(
            sa.select(h.c.name, group_hosts.c.group_id).join(h, h.c.id == group_hosts.c.host_id)):
        if hname in wanted:
            direct[hname].add(ids[gid])
    depth = _group_depths(session)
    out: dict[str, dict[str, int]] = {}
    for host in wanted:
        seen: set[str] = set()
        todo = list(direct.get(host, ()))
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(parents.get(name, ()))
        seen.add("all")
        out[host] = {name: depth.get(name, 1) for name in seen}
    return out


def load_assignments(session: Session) -> list[Assignment]:
    """Every stored assignment, with its window as the calendar model."""
    a, h, g = WindowAssignment.__table__, Host.__table__, Group.__table__
    rows = list(session.execute(sa.select(WindowRow.__table__)))
    approvals = effective_approvals(session, rows)
    windows = {row.id: window_from_row(row, approvals[row.id]) for row in rows}
    rows = session.execute(
        sa.select(a.c.window_id, h.c.name.label("host"), g.c.name.label("group"))
        .select_from(a).outerjoin(h, h.c.id == a.c.host_id).outerjoin(g, g.c.id == a.c.group_id)
        .order_by(a.c.id))
    return [Assignment(windows[r.window_id], host=r.host, group=r.group) for r in rows]


def effective(session: Session, hosts: Iterable[str]) -> dict[str, EffectiveWindows]:
    """Each host's windows and freezes (``scheduler.calendar.windows.effective_window``)."""
    names = list(hosts)
    groups = host_groups(session, names)
    assignments = load_assignments(session)
    tenant_of: dict[str, str | None] = {
        name: tenant for name, tenant in session.execute(sa.select(Host.name, Host.tenant))}
    tenants = {t for t in tenant_of.values() if t}
    out = {}
    for h in names:
        eff = effective_window(h, groups.get(h, {"all": 0}), assignments)
        # A customer's own freeze holds its own hosts only, even in a group that has come to
        # hold another customer's hosts since it was declared (record.tenancy.freeze_tenant).
        own = tuple(f for f in eff.freezes
                    if freeze_tenant(f.name, tenants) in (None, tenant_of.get(h)))
        out[h] = eff if own == eff.freezes else replace(eff, freezes=own)
    return out


# ------------------------------------------------------------------------- submission


def window_field(eff: EffectiveWindows) -> str:
    """The job's ``window`` field: window names, then ``!freeze`` names, space-separated."""
    return " ".join([w.name for w in eff.windows] + [FREEZE_MARK + f.name for f in eff.freezes])


def _listed(hosts: list[str]) -> str:
    shown = ", ".join(hosts[:MAX_LISTED])
    return shown + (f" and {len(hosts) - MAX_LISTED} more" if len(hosts) > MAX_LISTED else "")


@dataclass(frozen=True)
class Due:
    """When one host's job is due, as a submission plans it.

    ``due``: None for "now" (no freeze holds it); ``field``: the job's ``window`` field (None:
    nothing to check at claim beyond the host's freezes since); ``wclose``: the close of its
    opening (jobs in windows only); ``frozen_until``: set when a freeze moved the due time
    (the instant the job may start)."""

    due: datetime | None
    field: str | None
    wclose: datetime | None = None
    frozen_until: datetime | None = None


def _check_field(host: str, field: str) -> None:
    if len(field) > MAX_FIELD:
        raise ValidationError(f"host {host} has too many windows and freezes to queue "
                              f"({len(field)} characters of names, at most {MAX_FIELD})")


def _later(found: Opening | None, unfrozen: Opening | None) -> datetime | None:
    """The start a freeze imposed: ``found`` (with freezes) later than without them."""
    if found is None or unfrozen is None or found.start_utc <= unfrozen.start_utc:
        return None
    return found.start_utc


def due_times_in_window(session: Session, hosts: Iterable[str], start_utc: datetime,
                        expected_ms: int, *, break_glass: bool = False,
                        required_by: str | None = None) -> dict[str, Due]:
    """Each host's :class:`Due`: its next opening at or after ``start_utc`` in which a job of
    ``expected_ms`` fits (outside every freeze, unless ``break_glass``).

    Raises ``ValidationError`` (one line, nothing written) listing the hosts without a window,
    else those whose windows have no approved opening that fits within two years.
    ``required_by``: the action whose windows are applied by default (named in the refusal).
    """
    names = sorted(set(hosts))
    eff = effective(session, names)
    without = [h for h in names if not eff[h].windows]
    if without:
        what = f"{len(without)} of {len(names)} hosts have no service window: {_listed(without)}"
        if required_by:
            raise ValidationError(
                f"action {required_by} runs inside service windows, and {what}",
                hint="assign them one (fleetsched windows assign NAME --host H | --group G), "
                     "or add --ignore-windows to run outside windows (recorded)")
        raise ValidationError(what, hint="assign one (fleetsched windows assign NAME --host H | "
                                         "--group G) or submit without --in-window")
    need = timedelta(milliseconds=max(0, int(expected_ms)))
    out: dict[str, Due] = {}
    cache: dict[str, tuple[datetime, datetime, datetime | None] | None] = {}
    unfit: list[str] = []
    for host in names:
        e = eff[host]
        freezes = () if break_glass else e.freezes
        field = window_field(EffectiveWindows(e.windows, tuple(freezes), e.source))
        if break_glass:
            field = f"{field} {BREAK_GLASS}"
        _check_field(host, field)
        if field not in cache:  # hosts of one group share their windows: compute once
            found = next_opening(list(e.windows), start_utc, need, freezes=list(freezes))
            unfrozen = next_opening(list(e.windows), start_utc, need) if freezes else found
            cache[field] = None if found is None else (found.start_utc, found.end_utc,
                                                       _later(found, unfrozen))
        slot = cache[field]
        if slot is None:
            unfit.append(host)
        else:
            out[host] = Due(slot[0], field, slot[1], slot[2])
    if unfit:
        raise ValidationError(
            f"{len(unfit)} hosts have no approved opening long enough "
            f"({need.total_seconds():g}s) in the next two years: {_listed(unfit)}",
            hint="see who must approve their windows (fleetsched windows list), or "
                 "lengthen them")
    return out


def due_times_outside_freezes(session: Session, hosts: Iterable[str], start_utc: datetime | None,
                              now: datetime, expected_ms: int, *,
                              break_glass: bool = False) -> dict[str, Due]:
    """Each host's :class:`Due` for a job that needs no window: ``start_utc`` (None: now),
    unless a freeze of the host covers it or begins before ``expected_ms`` would end: then the
    first instant after that the job fits outside every freeze.

    The job's field names the host's freezes that are not over (the claim checks them again,
    with the host's freezes assigned since); ``break_glass``: no freeze holds it, and the
    field says so (:data:`~scheduler.windows.wire.BREAK_GLASS`)."""
    names = sorted(set(hosts))
    if break_glass:
        return {h: Due(start_utc, BREAK_GLASS) for h in names}
    if session.execute(sa.select(WindowRow.__table__.c.id).where(
            WindowRow.__table__.c.kind == "freeze").limit(1)).first() is None:
        return {h: Due(start_utc, None) for h in names}  # no freeze anywhere: nothing to read
    at = start_utc or now
    eff = effective(session, names)
    need = timedelta(milliseconds=max(0, int(expected_ms)))
    out: dict[str, Due] = {}
    cache: dict[str, Due] = {}
    ahead: dict[str, bool] = {}  # freeze name -> not over yet at `at`
    for host in names:
        for f in eff[host].freezes:
            if f.name not in ahead:
                ahead[f.name] = bool(upcoming(f, at, 1))
        live = tuple(f for f in eff[host].freezes if ahead[f.name])
        field = " ".join(FREEZE_MARK + f.name for f in live)
        _check_field(host, field)
        if field not in cache:
            held = None
            if live:
                found = next_opening(None, at, need, freezes=list(live))
                if found is None:
                    raise ValidationError(f"host {host}: its freezes leave no time for the job "
                                          "in the next two years",
                                          hint="see `fleetsched windows list`")
                held = found.start_utc if found.start_utc > at else None
            cache[field] = Due(held or start_utc, field or None, None, held)
        out[host] = cache[field]
    return out


# ------------------------------------------------------------------------- Redis copies
