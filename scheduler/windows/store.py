"""Stored service windows: what ``fleetsched windows`` adds, assigns, approves, lists and removes.

Every change is checked in full before anything is written (the calendar core validates the
model: ``scheduler.calendar.windows.Window``, ``check_future``), written to SQL with an audit event
(``window-add``, ``window-assign``, ``window-unassign``, ``window-approve`` with who and when,
``window-remove``) in
one transaction, then copied into Redis (``Keys.window``, ``scheduler.windows.wire.publish``) for
the claim-time check, into every shard of the queue. If Redis does not answer, the SQL change
stands and the command says to run ``fleetsched windows sync``, which copies every definition
again.

Approval: a window added with ``requires_approval`` is listed but never used (no job is due in
it, none starts in it) until ``approve``. Freezes (``--freeze``) apply without approval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, time, timedelta, timezone
from typing import Any

import redis
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from scheduler.calendar.recurrence import localize, zone
from scheduler.calendar.windows import Window, upcoming
from scheduler.errors import ConflictError, FleetschedError, NotFoundError, ValidationError
from scheduler.principal import Principal
from scheduler.queue.keys import Keys
from scheduler.queue.presence import redis_now_ms
from scheduler.queue.route import Where, coord, every_shard
from scheduler.record.audit import record_event
from scheduler.record.models import Group, Host, WindowAssignment
from scheduler.record.models import Window as WindowRow
from scheduler.record.types import utcnow
from scheduler.windows.approvals import Approval
from scheduler.windows.approvals import effective as effective_approvals
from scheduler.windows.assignment import window_from_row
from scheduler.windows.wire import FREEZE_MARK, REMOVED, publish, unpublish

__all__ = [
    "LIST_COLUMNS", "WindowSpec", "add_window", "assign_window", "copy_windows", "decide_window",
    "copy_windows_awaiting", "edit_window", "revoke_window_approval",
    "list_windows", "next_openings", "remove_window", "show_window", "sync_windows",
    "unassign_window",
]

LIST_COLUMNS = ["name", "kind", "rule", "length", "tz", "approval", "assigned", "next_open_utc"]


@dataclass(frozen=True)
class WindowSpec:
    """A window as typed: times as ISO text (naive = wall time in ``tz``), durations as text."""

    name: str
    tz: str = "UTC"
    rrule: str | None = None
    cron: str | None = None
    duration: str | None = None
    end_time: str | None = None
    start: str | None = None
    end: str | None = None
    freeze: bool = False
    requires_approval: bool = False
    description: str | None = None


def _when(text: str, what: str) -> datetime:
    try:
        return datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValidationError(f"{what} {text!r} is not an ISO time", hint="e.g. "
                              "2026-12-01T22:00 (in --tz) or 2026-12-01T22:00+01:00") from None


MAX_WINDOW = timedelta(days=366)  # a yearly window in a leap year; longer is a typo (876000h)


def _duration(text: str) -> timedelta:
    from scheduler.parse import parse_duration

    if text.strip().startswith("-"):
        raise ValidationError(f"--duration {text!r} must be positive", hint="e.g. --duration 4h")
    d = parse_duration(text, "--duration")
    if d > MAX_WINDOW:
        raise ValidationError(f"--duration {text!r} is longer than a window may last (366d)",
                              hint="a window that stays open: --start and --end")
    if d.total_seconds() != int(d.total_seconds()):
        raise ValidationError(f"--duration {text!r} must be whole seconds")
    return d


def _instant(value: datetime | None, tz: str) -> datetime | None:
    if value is None:
        return None
    return localize(value, zone(tz)) if value.tzinfo is None else value


def build(spec: WindowSpec, now: datetime | None = None) -> tuple[Window, dict[str, Any]]:
    """The validated model and the SQL row values; ``ValidationError`` (one line) otherwise."""
    if isinstance(spec.name, str) and spec.name.startswith(FREEZE_MARK):
        raise ValidationError(f"window name {spec.name!r} must not start with {FREEZE_MARK!r}")
    zone(spec.tz)
    start = _when(spec.start, "--start") if spec.start else None
    end = _when(spec.end, "--end") if spec.end else None
    duration = _duration(spec.duration) if spec.duration else None
    window = Window(name=spec.name, tz=spec.tz, rrule=spec.rrule, cron=spec.cron,
                    duration=duration, end_time=spec.end_time, start=start, end=end,
                    approved=not spec.requires_approval, freeze=spec.freeze)
    window.check_future(now)
    kind = "freeze" if spec.freeze else "recurring" if window.recurring else "oneoff"
    values = {"name": spec.name, "kind": kind, "rrule": spec.rrule, "cron": spec.cron,
              "duration_s": int(duration.total_seconds()) if duration else None,
              "end_time": _clock(window),
              "tz": spec.tz, "starts_at": _instant(start, spec.tz),
              "ends_at": _instant(end, spec.tz), "requires_approval": spec.requires_approval,
              "description": spec.description}
    return window, values


def _clock(window: Window) -> str | None:
    end = window.end_time
    return end.strftime("%H:%M:%S") if isinstance(end, time) else None


def _row(session: Session, name: str, *, lock: bool = False) -> WindowRow:
    """The window ``name``; ``lock``: for a change (``FOR UPDATE`` on PostgreSQL; SQLite's
    write transaction already holds the database), so two changes of one window, say an edit
    and an approval, apply one after the other and the second sees the first."""
    chosen = sa.select(WindowRow).where(WindowRow.name == name)
    row = session.scalars(chosen.with_for_update() if lock else chosen).first()
    if row is None:
        raise NotFoundError(f"no window named {name!r}", hint="see `fleetsched windows list`")
    return row


def _event(session: Session, kind: str, operator: Any, data: dict[str, Any]) -> None:
    record_event(session, kind, operator=operator, data=data)


COPY_LOCK_MS = 10_000  # longer than any copy takes; a holder that died frees it by then
COPY_WAIT_S = 15.0


def _copy(engine: Engine, connect: Any, keys: Where, names: Sequence[str] = (),
          gone: Sequence[str] = (), every: bool = False) -> str | None:
    """Copy the windows ``names`` (``every``: all, and tombstones for copies of windows SQL no
    longer has, a removal Redis missed) and the tombstones ``gone`` to Redis (every shard);
    returns a warning (the SQL change stands) or None.

    The rows are read from SQL again while holding ``Keys.window_copy_lock``: of two changes
    copied at once, the copy made last read the record after both committed, so an older copy
    (an approval) never lands over a newer one (its revocation)."""
    import time
    import uuid

    try:
        client = connect()
        try:
            lock, mine = coord(keys).window_copy_lock(), uuid.uuid4().hex
            deadline = time.monotonic() + COPY_WAIT_S
            while not client.set(lock, mine, nx=True, px=COPY_LOCK_MS):
                if time.monotonic() > deadline:
                    raise FleetschedError("another copy of the windows holds its lock")
                time.sleep(0.02)
            try:
                with Session(engine) as session:
                    chosen = sa.select(WindowRow)
                    if not every:
                        chosen = chosen.where(WindowRow.name.in_(list(names)))
                    rows = _Copy.each(session, session.scalars(chosen).all()) \
                        if every or names else []
                if every:
                    known = {r.name for r in rows}
                    found = [n for shard in every_shard(keys)
                             for n in _stale_copies(client, shard, known)]
                    gone = [*gone, *dict.fromkeys(found)]
                publish(client, keys, rows)
                unpublish(client, keys, gone, redis_now_ms(client, coord(keys)))
            finally:
                if client.get(lock) in (mine, mine.encode()):  # not one taken after ours expired
                    client.delete(lock)
        finally:
            client.close()
    except (FleetschedError, redis.RedisError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"recorded, but Redis did not take the copy ({first}); run `fleetsched windows sync`"
    return None


def _stale_copies(client: Any, keys: Keys, known: set[str]) -> list[str]:
    """Names of live window copies in Redis that SQL no longer stores."""
    prefix = keys.window("")
    names = []
    for key in client.scan_iter(match=keys.window("*"), count=1_000):
        name = (key.decode() if isinstance(key, bytes) else key)[len(prefix):]
        if name not in known and not client.hexists(key, REMOVED):
            names.append(name)
    return names


def add_window(engine: Engine, connect: Any, spec: WindowSpec, *, operator: Principal | str,
               keys: Where = Keys(),
               now: datetime | None = None) -> tuple[dict[str, Any], str | None]:
    """Validate, record (``window-add``), copy to Redis. Returns (summary, warning)."""
    from scheduler.record.session import transaction

    now = now or utcnow()
    window, values = build(spec, now)
    with transaction(engine) as session:
        if session.scalars(sa.select(WindowRow.id).where(WindowRow.name == spec.name)).first():
            raise ValidationError(f"a window named {spec.name!r} exists",
                                  hint="remove it first, or choose another name")
        row = WindowRow(**values, created_by=str(operator))
        session.add(row)
        session.flush()
        # The definition as added, so the audit (and a history check) knows it after removal
        _event(session, "window-add", operator, {
            "window": spec.name, "kind": values["kind"],
            "requires_approval": spec.requires_approval,
            "definition": {k: (v.isoformat() if isinstance(v, datetime) else v)
                           for k, v in values.items() if v is not None}})
    nxt = upcoming(window, now, 1)
    return ({"name": spec.name, "kind": values["kind"],
             "next_open_utc": nxt[0].start_utc if nxt else None},
            _copy(engine, connect, keys, [spec.name]))


@dataclass(frozen=True)
class _Copy:
    """The fields ``publish`` reads, detached from the session."""

    name: str
    kind: str
    rrule: str | None
    cron: str | None
    duration_s: int | None
    end_time: str | None
    tz: str
    starts_at: datetime | None
    ends_at: datetime | None
    approval: Approval

    @classmethod
    def of(cls, row: Any, approval: Approval) -> _Copy:
        return cls(row.name, row.kind, row.rrule, row.cron, row.duration_s, row.end_time,
                   row.tz, row.starts_at, row.ends_at, approval)

    @classmethod
    def each(cls, session: Session, rows: Sequence[Any]) -> list[_Copy]:
        """Copies of ``rows``, each with what its approvals allow now."""
        approvals = effective_approvals(session, rows)
        return [cls.of(row, approvals[row.id]) for row in rows]


def assign_window(engine: Engine, name: str, *, hosts: Sequence[str] = (),
                  groups: Sequence[str] = (), operator: Principal | str) -> int:
    """Assign the window to hosts and groups (``window-assign``); returns the new assignments."""
    from scheduler.record.session import transaction

    if not hosts and not groups:
        raise ValidationError("give --host or --group (repeatable)",
                              hint="e.g. fleetsched windows assign sun-night --group customer-acme")
    added = 0
    with transaction(engine) as session:
        row = _row(session, name, lock=True)
        have = {(a.host_id, a.group_id) for a in row.assignments}
        for what, model, names in (("host", Host, hosts), ("group", Group, groups)):
            for n in names:
                target = session.scalars(sa.select(model).where(model.name == n)).first()
                if target is None:
                    raise NotFoundError(f"no {what} named {n!r}",
                                        hint=f"see `fleetsched {what}s list`")
                key = (target.id, None) if what == "host" else (None, target.id)
                if key in have:
                    continue
                have.add(key)
                session.add(WindowAssignment(window_id=row.id, host_id=key[0], group_id=key[1]))
                added += 1
        _event(session, "window-assign", operator, {"window": name, "hosts": list(hosts),
                                                    "groups": list(groups), "added": added})
    return added


def unassign_window(engine: Engine, connect: Any, name: str, *, hosts: Sequence[str] = (),
                    groups: Sequence[str] = (), operator: Principal | str,
                    keys: Where = Keys()) -> tuple[int, str | None]:
    """Remove assignments (``window-unassign``), then copy the definition to Redis again.

    Every named host or group must hold an assignment of this window, or nothing is removed
    (``NotFoundError``). Jobs already queued with the window keep it. Returns (removed, warning)."""
    from scheduler.record.session import transaction

    if not hosts and not groups:
        raise ValidationError("give --host or --group (repeatable)",
                              hint="e.g. fleetsched windows unassign sun-night --group customer-acme")
    with transaction(engine) as session:
        row = _row(session, name, lock=True)
        by_key = {(a.host_id, a.group_id): a for a in row.assignments}
        drop: dict[tuple[int | None, int | None], WindowAssignment] = {}
        for what, model, names in (("host", Host, hosts), ("group", Group, groups)):
            for n in names:
                target = session.scalars(sa.select(model).where(model.name == n)).first()
                if target is None:
                    raise NotFoundError(f"no {what} named {n!r}",
                                        hint=f"see `fleetsched {what}s list`")
                key = (target.id, None) if what == "host" else (None, target.id)
                if key not in by_key:
                    raise NotFoundError(f"window {name!r} is not assigned to {what} {n!r}",
                                        hint=f"see `fleetsched windows show {name}`")
                drop[key] = by_key[key]
        for assignment in drop.values():
            session.delete(assignment)
        _event(session, "window-unassign", operator, {"window": name, "hosts": list(hosts),
                                                      "groups": list(groups),
                                                      "removed": len(drop)})
    return len(drop), _copy(engine, connect, keys, [name])


def decide_window(engine: Engine, connect: Any, name: str, who: Any, decision: str, *,
                  comment: str | None = None, occurrence: str | None = None,
                  expires: str | None = None, version: int | None = None,
                  keys: Where = Keys()) -> tuple[dict[str, Any], str | None]:
    """Record ``who``'s decision on the window's current version (``version``: the one the
    decider read, refused if it is no longer current) for its party
    (``scheduler.windows.approvals.decide``) and copy what the window now allows to Redis.
    Returns (the decision and the window's approval after it, warning)."""
    from scheduler.record.session import transaction
    from scheduler.windows.approvals import check_visible, decide, effective

    now = utcnow()
    with transaction(engine) as session:
        row = _row(session, name, lock=True)
        check_visible(session, row, who)  # before anything that would describe the window
        _check_version(row, version, "decide")
        occurrence_at = _opening_start(row, occurrence) if occurrence else None
        expires_at = _expiry(expires, row.tz, now) if expires else None
        made = decide(session, row, who, decision, comment=comment, occurrence=occurrence_at,
                      expires_at=expires_at, now=now)
        done = {"window": name, "version": made.version, "decision": decision,
                "party": made.tenant, "occurrence": occurrence_at, "expires_at": expires_at,
                "at": made.decided_at,
                "approval": _approval(row, effective(session, [row], now)[row.id])}
    return done, _copy(engine, connect, keys, [name])


def _check_version(row: WindowRow, version: int | None, verb: str) -> None:
    """``ConflictError`` unless the window is still at ``version`` (the one its changer or
    decider read; None: no check)."""
    if version is not None and version != row.version:
        raise ConflictError(f"window {row.name!r} is at version {row.version}, not {version}: "
                            "it changed since you read it",
                            hint=f"see `fleetsched windows show {row.name}`, then {verb} again")


def copy_windows_awaiting(engine: Engine, connect: Any, keys: Where = Keys()) -> str | None:
    """Copy again every window an approval may govern (one that requires approval, or any
    window once a customer asks for approvals): after the inventory changed, their parties may
    have; nothing (no connection) when none may. Returns a warning or None."""
    from scheduler.record.models import Tenant

    with Session(engine) as session:
        asking = session.scalars(sa.select(Tenant.name).where(Tenant.approval_required)
                                 .limit(1)).first() is not None
        chosen = sa.select(WindowRow.name).where(WindowRow.kind != "freeze")
        if not asking:
            chosen = chosen.where(WindowRow.requires_approval)
        names = list(session.scalars(chosen))
    return copy_windows(engine, connect, names, keys) if names else None


def _opening_start(row: WindowRow, text: str) -> datetime:
    """``--occurrence``: the start of one of the window's openings (naive: in its zone)."""
    from scheduler.calendar.windows import openings

    at = _instant(_when(text, "--occurrence"), row.tz)
    assert at is not None
    found = openings(window_from_row(row), at - timedelta(seconds=1), at + timedelta(seconds=1))
    if not any(o.start_utc == at for o in found):
        raise ValidationError(f"window {row.name!r} has no opening starting at "
                              f"{at.astimezone(timezone.utc):%Y-%m-%d %H:%M:%S} UTC",
                              hint=f"see `fleetsched windows next {row.name}`")
    return at


def _expiry(text: str, tz: str, now: datetime) -> datetime:
    """``--expires``: a duration from now (``30d``) or an ISO time (naive: in ``tz``)."""
    from scheduler.parse import parse_duration

    if text.strip()[:1].isdigit() and "-" not in text and ":" not in text:
        return now + parse_duration(text, "--expires")
    return _instant(_when(text, "--expires"), tz)  # type: ignore[return-value]


def revoke_window_approval(engine: Engine, connect: Any, name: str, who: Any,
                           keys: Where = Keys()) -> tuple[dict[str, Any], str | None]:
    """Revoke ``who``'s party's standing approvals of the window and copy it to Redis."""
    from scheduler.record.session import transaction
    from scheduler.windows.approvals import revoke

    with transaction(engine) as session:
        row = _row(session, name, lock=True)
        count = revoke(session, row, who)
        done = {"window": name, "revoked": count,
                "approval": _approval(row, effective_approvals(session, [row])[row.id])}
    return done, _copy(engine, connect, keys, [name])


def copy_windows(engine: Engine, connect: Any, names: Sequence[str],
                 keys: Where = Keys()) -> str | None:
    """Copy the named windows to Redis again (after a change of what they cover: their
    parties, hence their approval, may have changed); returns a warning or None."""
    return _copy(engine, connect, keys, names)


RULE_FIELDS = {"rrule": "cron", "cron": "rrule", "duration": "end_time", "end_time": "duration"}


def _spec_of(row: WindowRow) -> WindowSpec:
    """The stored window as ``windows add`` would have been given it."""
    return WindowSpec(name=row.name, tz=row.tz, rrule=row.rrule, cron=row.cron,
                      duration=f"{row.duration_s}s" if row.duration_s else None,
                      end_time=row.end_time,
                      start=row.starts_at.isoformat() if row.starts_at else None,
                      end=row.ends_at.isoformat() if row.ends_at else None,
                      freeze=row.kind == "freeze", requires_approval=row.requires_approval,
                      description=row.description)


def edit_window(engine: Engine, connect: Any, name: str, changes: dict[str, Any], *,
                operator: Principal | str, version: int | None = None,
                keys: Where = Keys()) -> tuple[int, str | None]:
    """Change a window's definition (``WindowSpec`` fields; a rule replaces the other kind of
    rule, a duration an end time): validated in full, then a new version (``window-edit``)
    that every party must approve again (``version``: the one the changer read, refused if it
    is no longer current). Returns (the new version, warning)."""
    from dataclasses import replace

    from scheduler.record.session import transaction

    unknown = sorted(set(changes) - {f for f in WindowSpec.__dataclass_fields__} - {"name"})
    if unknown or "name" in changes or "freeze" in changes:
        raise ValidationError(f"cannot edit {', '.join(unknown or ['name/freeze'])} of a window",
                              hint="remove it and add it again")
    if not changes:
        raise ValidationError("nothing to change", hint="give the options to change")
    with transaction(engine) as session:
        row = _row(session, name, lock=True)
        _check_version(row, version, "edit")
        given = {k: v for k, v in changes.items()}
        for key, other in RULE_FIELDS.items():
            if given.get(key) is not None and other not in given:
                given[other] = None
        _window, values = build(replace(_spec_of(row), **given))
        before = {k: getattr(row, k) for k in values}
        for key, value in values.items():
            setattr(row, key, value)
        row.version += 1
        row.changed_by, row.approved_by, row.approved_at = str(operator), None, None
        _event(session, "window-edit", operator, {
            "window": name, "version": row.version,
            "changed": {k: [_plain(before[k]), _plain(values[k])] for k in values
                        if before[k] != values[k]}})
        version = row.version
    return version, _copy(engine, connect, keys, [name])


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def remove_window(engine: Engine, connect: Any, name: str, *, operator: Principal | str,
                  keys: Where = Keys()) -> str | None:
    """Delete the window and its assignments (``window-remove``); returns a warning or None.

    Jobs already queued with it wait (``workers.deferral`` finds no definition) until the
    operator cancels them or adds a window of that name again."""
    from scheduler.record.session import transaction

    with transaction(engine) as session:
        row = _row(session, name, lock=True)
        session.delete(row)
        _event(session, "window-remove", operator, {"window": name})
    return _copy(engine, connect, keys, gone=[name])


def sync_windows(engine: Engine, connect: Any, keys: Where = Keys()) -> tuple[int, str | None]:
    """Copy every stored definition into Redis again."""
    with Session(engine) as session:
        count = session.scalar(sa.select(sa.func.count()).select_from(WindowRow)) or 0
    return count, _copy(engine, connect, keys, every=True)


# ------------------------------------------------------------------------------ reading


def _rule(row: Any) -> str:
    if row.rrule:
        return f"RRULE {row.rrule}"
    if row.cron:
        return f"cron {row.cron}"
    return f"{row.starts_at:%Y-%m-%d %H:%M:%S} UTC" if row.starts_at else ""


def _length(row: Any) -> str:
    from scheduler.parse import format_duration

    if row.duration_s:
        return format_duration(row.duration_s)
    if row.end_time:
        return f"until {row.end_time[:5]}"
    if row.starts_at and row.ends_at:
        return format_duration((row.ends_at - row.starts_at).total_seconds())
    return ""


def _approval(row: Any, approval: Approval) -> str:
    if approval.approved and approval.parties == (None,) and row.approved_at is not None:
        return f"by {row.approved_by} at {row.approved_at:%Y-%m-%d %H:%M} UTC"
    return approval.describe()


def _decisions(row: WindowRow) -> list[dict[str, Any]]:
    """The decisions on the window, newest first, each with the version it was for."""
    from scheduler.windows.approvals import party_name

    return [{"version": d.version, "party": party_name(d.tenant), "decision": d.decision,
             "occurrence": d.occurrence, "by": d.decided_by, "via": d.via,
             "at": d.decided_at, "comment": d.comment, "expires_at": d.expires_at,
             "revoked_at": d.revoked_at, "current": d.version == row.version}
            for d in reversed(row.approvals)]


def _assigned(session: Session, row: WindowRow) -> list[str]:
    return sorted([f"host:{a.host.name}" for a in row.assignments if a.host] +
                  [f"group:{a.group.name}" for a in row.assignments if a.group])


def list_windows(session: Session, now: datetime | None = None, *,
                 tenant: str | None = None) -> list[dict[str, Any]]:
    """Every window (``tenant``: those of the customer's hosts and groups, in SQL)."""
    from scheduler.windows.approvals import party_name

    now = now or utcnow()
    chosen = sa.select(WindowRow).order_by(WindowRow.name)
    if tenant is not None:
        from scheduler.record.tenancy import tenant_windows

        chosen = chosen.where(WindowRow.id.in_(tenant_windows(tenant)))
    out = []
    rows = session.scalars(chosen).all()
    approvals = effective_approvals(session, rows, now)
    for row in rows:
        nxt = upcoming(window_from_row(row), now, 1)
        out.append({"name": row.name, "kind": row.kind, "rule": _rule(row),
                    "length": _length(row), "tz": row.tz,
                    "approval": _approval(row, approvals[row.id]),
                    "pending": [party_name(p) for p in approvals[row.id].pending],
                    "denied": [party_name(p) for p in approvals[row.id].denied],
                    "assigned": ", ".join(_assigned(session, row)),
                    "next_open_utc": nxt[0].start_utc if nxt else None})
    return out


def next_openings(session: Session, name: str, count: int,
                  now: datetime | None = None) -> list[dict[str, Any]]:
    """The next ``count`` openings (one in progress first), in the window's zone and in UTC."""
    if not 1 <= count <= 1000:
        raise ValidationError(f"--count {count} must be from 1 to 1000")
    window = window_from_row(_row(session, name))
    return [{"start_local": o.start_local, "end_local": o.end_local, "tz": o.tz,
             "start_utc": o.start_utc, "end_utc": o.end_utc}
            for o in upcoming(window, now or utcnow(), count)]


def show_window(session: Session, name: str, now: datetime | None = None) -> dict[str, Any]:
    from scheduler.windows.approvals import party_name

    row = _row(session, name)
    approval = effective_approvals(session, [row], now)[row.id]
    return {"name": row.name, "kind": row.kind, "rrule": row.rrule, "cron": row.cron,
            "duration_s": row.duration_s, "end_time": row.end_time, "tz": row.tz,
            "starts_at": row.starts_at, "ends_at": row.ends_at,
            "requires_approval": row.requires_approval, "approved_by": row.approved_by,
            "approved_at": row.approved_at, "approval": _approval(row, approval),
            "version": row.version, "changed_by": row.changed_by or row.created_by,
            "parties": [party_name(p) for p in approval.parties],
            "pending": [party_name(p) for p in approval.pending],
            "denied": [party_name(p) for p in approval.denied],
            "decisions": _decisions(row),
            "created_by": row.created_by, "created_at": row.created_at,
            "description": row.description, "assigned": _assigned(session, row),
            "next": next_openings(session, name, 3, now)}
