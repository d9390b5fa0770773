"""The service windows' verbs: add, assign, unassign, approve, remove, sync; list, show, next.

1. Each change is checked and recorded by ``scheduler.windows.store`` as the principal's
   (``window-add``, ``window-assign`` ...), then the definition is copied to every shard of the
   queue. ``approve``, ``deny`` and ``revoke`` are each party's verbs (a customer's, or the
   team's: ``scheduler.windows.approvals``): their events name the principal and the version.
2. After an assignment changes (or a window goes), the hosts' freezes follow in Redis
   (``windows.freezes.push_or_warn``), so a freeze holds queued jobs at once.
3. Redis being down is not a failure of a change: the record is right, and the result's
   ``notes`` say what Redis did not take. ``sync`` is the exception: copying to Redis is all it
   does, so there it is ``RedisUnavailableError``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from scheduler.principal import Principal
from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from scheduler.windows.store import WindowSpec

__all__ = ["Approval", "WindowAdded", "WindowChange", "add", "approve", "assign", "deny", "edit", "freeze", "list_",
           "next_", "openings", "remove", "revoke", "show", "sync", "timeline", "unassign",
           "waiting"]


@dataclass(frozen=True)
class WindowAdded:
    """A window added: its kind (recurring, one-off or freeze), its next opening in UTC (None:
    it never opens again), whether it waits for an approval, by whom; ``notes``: what Redis
    did not take."""

    name: str
    kind: str
    next_open_utc: datetime | None
    requires_approval: bool
    by: str
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The summary ``windows add --output json`` prints."""
        return {"name": self.name, "kind": self.kind, "next_open_utc": self.next_open_utc}


@dataclass(frozen=True)
class WindowChange:
    """What a window verb did: ``count`` assignments added or removed, ``by`` whom;
    ``notes``: what Redis did not take."""

    window: str
    verb: str
    by: str
    count: int = 0
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Approval:
    """A decision on a window as recorded: ``decision`` (approved, denied, revoked) of
    ``party`` (a customer, or None: the team) on ``version``, ``by`` whom, ``at`` when (UTC);
    ``approval``: what the window allows after it (``approved``, or who is still awaited);
    ``notes``: what Redis did not take (the workers see it once copied: ``windows sync``)."""

    window: str
    by: str
    at: datetime
    decision: str = "approved"
    party: str | None = None
    version: int = 1
    approval: str = ""
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"window": self.window, "decision": self.decision, "party": self.party,
                "version": self.version, "by": self.by, "at": self.at.isoformat(),
                "approval": self.approval, "notes": list(self.notes)}


def add(stores: Stores, principal: Principal, spec: WindowSpec) -> WindowAdded:
    """Add a recurring or one-off window, or a freeze; nothing is written if it is invalid."""
    from scheduler.windows.store import add_window

    with stores.database() as engine:
        summary, warning = add_window(engine, stores.connect, spec, operator=principal,
                                      keys=stores.shards)
    return WindowAdded(name=summary["name"], kind=summary["kind"],
                       next_open_utc=summary["next_open_utc"],
                       requires_approval=spec.requires_approval, by=principal.name,
                       notes=_notes(warning))


def freeze(stores: Stores, principal: Principal, name: str, *, start: str, end: str,
           tz: str = "UTC", hosts: list[str] | None = None, groups: list[str] | None = None,
           description: str | None = None) -> WindowAdded:
    """Declare a freeze over hosts and groups at once. A customer's (``principal.tenant``) is
    named ``<tenant>:<name>`` and may cover only its own hosts
    (``scheduler.windows.customer_freezes``); everything is checked before anything is
    written."""
    from scheduler.windows.customer_freezes import check_owned, freeze_name
    from scheduler.windows.store import WindowSpec, build

    stored = freeze_name(principal.tenant, name)
    spec = WindowSpec(name=stored, tz=tz, start=start, end=end, freeze=True,
                      description=description)
    build(spec)  # a bad definition is refused before the hosts are looked at
    with stores.reading() as session:
        check_owned(session, principal.tenant, hosts or [], groups or [])
    added = add(stores, principal, spec)
    change = assign(stores, principal, stored, hosts=hosts, groups=groups)
    return WindowAdded(name=stored, kind=added.kind, next_open_utc=added.next_open_utc,
                       requires_approval=False, by=principal.name,
                       notes=added.notes + change.notes)


def assign(stores: Stores, principal: Principal, name: str, *, hosts: list[str] | None = None,
           groups: list[str] | None = None) -> WindowChange:
    """Assign window ``name`` to hosts and groups (a host's own assignment beats its groups');
    ``count``: the new assignments."""
    from scheduler.windows.store import assign_window, copy_windows

    with stores.database() as engine:
        added = assign_window(engine, name, hosts=hosts or [], groups=groups or [],
                              operator=principal)
        # the window's parties, hence its approval, may have changed; a freeze holds queued
        # jobs at once
        warning = copy_windows(engine, stores.connect, [name], stores.shards) or \
            _push_freezes(stores, engine)
    return WindowChange(window=name, verb="assign", by=principal.name, count=added,
                        notes=_notes(warning))


def unassign(stores: Stores, principal: Principal, name: str, *,
             hosts: list[str] | None = None, groups: list[str] | None = None) -> WindowChange:
    """Remove window ``name``'s assignments to hosts and groups (each must hold one, or nothing
    is removed); jobs already queued keep their window. ``count``: the assignments removed."""
    from scheduler.windows.store import unassign_window

    with stores.database() as engine:
        removed, warning = unassign_window(engine, stores.connect, name, hosts=hosts or [],
                                           groups=groups or [], operator=principal,
                                           keys=stores.shards)
        warning = warning or _push_freezes(stores, engine)
    return WindowChange(window=name, verb="unassign", by=principal.name, count=removed,
                        notes=_notes(warning))


def approve(stores: Stores, principal: Principal, name: str, *, comment: str | None = None,
            occurrence: str | None = None, expires: str | None = None,
            version: int | None = None, decision: str = "approved") -> Approval:
    """Record ``principal``'s decision on window ``name`` for its party (its tenant, or the
    team): the whole series, or one ``occurrence`` (an opening's start), until ``expires_at``.
    Jobs run in the window once every party approved (``scheduler.windows.approvals``). A
    window that needs no approval of the principal's party is refused (``ValidationError``),
    and so is the approval of its own proposer (``ForbiddenError``). ``occurrence``: an ISO
    time (naive: the window's zone); ``expires``: a duration from now (``30d``) or an ISO
    time; ``version``: the version the decider read (refused, ``ConflictError``, when the
    window changed since)."""
    from scheduler.windows.store import decide_window

    with stores.database() as engine:
        done, warning = decide_window(engine, stores.connect, name, principal, decision,
                                      comment=comment, occurrence=occurrence,
                                      expires=expires, version=version, keys=stores.shards)
    return Approval(window=name, by=principal.name, at=done["at"], decision=decision,
                    party=done["party"], version=done["version"], approval=done["approval"],
                    notes=_notes(warning))


def deny(stores: Stores, principal: Principal, name: str, *, comment: str,
         occurrence: str | None = None, version: int | None = None) -> Approval:
    """Record ``principal``'s denial (with the ``comment`` saying why): no job runs in the
    window until its party approves a version."""
    return approve(stores, principal, name, comment=comment, occurrence=occurrence,
                   version=version, decision="denied")


def revoke(stores: Stores, principal: Principal, name: str) -> Approval:
    """Revoke the standing approvals of ``principal``'s party: jobs stop being started in the
    window from the next claim on (those running go on)."""
    from scheduler.record.types import utcnow
    from scheduler.windows.store import revoke_window_approval

    with stores.database() as engine:
        done, warning = revoke_window_approval(engine, stores.connect, name, principal,
                                               keys=stores.shards)
    return Approval(window=name, by=principal.name, at=utcnow(), decision="revoked",
                    party=principal.tenant, approval=done["approval"], notes=_notes(warning))


def edit(stores: Stores, principal: Principal, name: str, *, version: int | None = None,
         **changes: Any) -> WindowChange:
    """Change window ``name``'s definition (``WindowSpec`` fields): a new version, which every
    party must approve again; ``count``: the new version. ``version``: the version the changer
    read (refused, ``ConflictError``, when the window changed since)."""
    from scheduler.windows.store import edit_window

    with stores.database() as engine:
        version, warning = edit_window(engine, stores.connect, name, changes,
                                       operator=principal, version=version,
                                       keys=stores.shards)
    return WindowChange(window=name, verb="edit", by=principal.name, count=version,
                        notes=_notes(warning))


def remove(stores: Stores, principal: Principal, name: str) -> WindowChange:
    """Remove window ``name`` and its assignments (queued jobs naming it wait; cancel them)."""
    from scheduler.windows.store import remove_window

    with stores.database() as engine:
        warning = remove_window(engine, stores.connect, name, operator=principal,
                                keys=stores.shards) or _push_freezes(stores, engine)
    return WindowChange(window=name, verb="remove", by=principal.name, notes=_notes(warning))


def sync(stores: Stores) -> int:
    """Copy every window definition, and the hosts' freezes, into Redis again (after Redis
    lost them); returns how many definitions. Redis failing is ``RedisUnavailableError``."""
    from scheduler.errors import RedisUnavailableError
    from scheduler.windows.store import sync_windows

    with stores.database() as engine:
        count, warning = sync_windows(engine, stores.connect, stores.shards)
        warning = warning or _push_freezes(stores, engine)
    if warning:
        raise RedisUnavailableError(warning)
    return count


def list_(stores: Stores, *, tenant: str | None = None) -> list[dict[str, Any]]:
    """Every window: rule, length, zone, approval, assignments, next opening
    (``windows.store.list_windows``; its columns: ``LIST_COLUMNS``). ``tenant``: the windows
    of that customer's hosts and groups, with only its assignments (``windows.tenant_view``)."""
    from scheduler.windows.store import list_windows

    with stores.reading() as session:
        rows = list_windows(session, tenant=tenant)
        if tenant is not None:
            from scheduler.windows.tenant_view import scoped_rows

            rows = scoped_rows(session, tenant, rows)
        return rows


def show(stores: Stores, name: str, *, tenant: str | None = None) -> dict[str, Any]:
    """One window: definition, approval, assignments, next three openings. ``tenant``: only a
    window of that customer's hosts or groups (another is not found), with its assignments."""
    from scheduler.windows.store import show_window

    with stores.reading() as session:
        if tenant is None:
            return show_window(session, name)
        from scheduler.windows.tenant_view import check_visible, scoped_window

        check_visible(session, name, tenant)
        return scoped_window(session, tenant, show_window(session, name))


def next_(stores: Stores, name: str, count: int = 5, *,
          tenant: str | None = None) -> list[dict[str, Any]]:
    """The next ``count`` openings (1 to 1000), in the window's zone and in UTC, approved or
    not. ``tenant``: only a window of that customer's hosts or groups (another is not
    found)."""
    from scheduler.windows.store import next_openings

    with stores.reading() as session:
        if tenant is not None:
            from scheduler.windows.tenant_view import check_visible

            check_visible(session, name, tenant)
        return next_openings(session, name, count)


def timeline(stores: Stores, start_utc: datetime, end_utc: datetime, *,
             tenant: str | None = None, group: str | None = None) -> list[dict[str, Any]]:
    """The windows and freezes per assignment target (``windows.timeline.lanes``), each
    window's ``windows list`` row with ``openings``: those overlapping ``[start_utc,
    end_utc)``, each with its approval state (``windows.timeline``). ``tenant``: that
    customer's windows, assignments and decisions only; ``group``: that group's row only."""
    from scheduler.windows.store import list_windows
    from scheduler.windows.timeline import lanes, period_states

    with stores.reading() as session:
        rows = list_windows(session, tenant=tenant)
        if tenant is not None:
            from scheduler.windows.tenant_view import scoped_rows

            rows = scoped_rows(session, tenant, rows)
        states = period_states(session, [r["name"] for r in rows], start_utc, end_utc,
                               tenant=tenant)
    return [{"target": target, "windows": [{**w, "openings": states.get(w["name"], [])}
                                           for w in ws]}
            for target, ws in lanes(rows, group=group)]


def openings(stores: Stores, name: str, count: int = 5, *,
             tenant: str | None = None) -> list[dict[str, Any]]:
    """The next ``count`` openings (1 to 1000) of window ``name``, each with its approval
    state and the decisions that speak to it (``windows.timeline``). ``tenant``: only a
    window of that customer's hosts or groups, with its own party's decisions."""
    from scheduler.errors import ValidationError
    from scheduler.windows.timeline import next_states

    if not 1 <= count <= 1000:
        raise ValidationError(f"--count {count} must be from 1 to 1000")
    with stores.reading() as session:
        if tenant is not None:
            from scheduler.windows.tenant_view import check_visible

            check_visible(session, name, tenant)
        return next_states(session, name, count, tenant=tenant)


def waiting(stores: Stores, name: str, *, tenant: str | None = None, limit: int = 50,
            offset: int = 0) -> list[dict[str, Any]]:
    """The unfinished jobs whose window field names window ``name`` (``windows.waiting``),
    soonest due first. ``tenant``: only a window of that customer's, and its own jobs."""
    from scheduler.windows.waiting import jobs_waiting

    with stores.reading() as session:
        if tenant is not None:
            from scheduler.windows.tenant_view import check_visible

            check_visible(session, name, tenant)
        return jobs_waiting(session, name, tenant=tenant, limit=limit, offset=offset)


def _push_freezes(stores: Stores, engine: Engine) -> str | None:
    from scheduler.windows.freezes import push_or_warn

    return push_or_warn(engine, stores.connect, stores.shards)


def _notes(warning: str | None) -> list[str]:
    return [f"warning: {warning}"] if warning else []
