"""Recurring schedules: define, list, pause, resume and remove them (firing is scheduler/schedules/firing.py).

A schedule is a task (an action, its parameters, a target and the task options of
``fleetsched submit``), or a saved template with its parameters' values (``--template NAME``:
its newest version at each firing; ``NAME@N``: that version), with a timing and two policies:

1. timing: a cron expression in an IANA zone (``scheduler.calendar.cron``, Debian cron's DST rules),
   or ``--every D`` for intervals finer than cron's minute: fires at whole multiples of ``D``
   since the Unix epoch (``@every 1s`` on every second, ``@every 1h`` on every whole UTC hour;
   zone-independent), stored in the ``cron`` column as ``@every <seconds>s``;
2. catch-up after downtime (``skip``, ``latest``, ``all`` within ``--catch-up-window``), by
   ``scheduler.calendar.catchup.catch_up``; an occurrence at most :func:`grace` late is on time;
3. overlap: ``skip`` (an occurrence whose previous task still runs is not run: a ``missed``
   event) or ``allow``.

Every change is written to SQL first (with an event: ``schedule-add``, ``schedule-pause``,
``schedule-resume``, ``schedule-remove``), then the schedule's due entry is armed or disarmed in
Redis (``scheduler.queue.schedules``). Occurrences that fall while a schedule is paused are
recorded as ``missed`` events when it resumes: none is dropped silently.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, cast

import redis
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from scheduler.calendar.catchup import Policy, catch_up
from scheduler.calendar.cron import CronSchedule, parse_cron
from scheduler.calendar.recurrence import as_utc, zone
from scheduler.errors import FleetschedError, NotFoundError, ValidationError
from scheduler.parse import format_duration, parse_limit
from scheduler.principal import Principal
from scheduler.progress import from_task_row
from scheduler.queue.keys import Keys
from scheduler.queue.route import Where
from scheduler.record.audit import record_event
from scheduler.record.models import CATCHUP_POLICIES, OVERLAP_POLICIES, Event, Schedule, Task
from scheduler.record.types import to_ms, utcnow
from scheduler.submission.submit import TaskRequest

__all__ = [
    "EVERY", "Every", "LIST_COLUMNS", "NAME_RE", "ScheduleSpec", "add_schedule", "as_cron", "grace",
    "list_schedules",
    "next_occurrences", "pause_schedule", "remove_schedule", "request_of", "resume_schedule",
    "schedule_request", "show_schedule", "timing", "timing_of", "upcoming_rows",
]

EVERY = "@every "
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
MAX_EVERY_S = 366 * 86400
MISSED_LIMIT = 1000  # missed occurrences listed one event each; older ones as one range


@dataclass(frozen=True)
class Every:
    """Fires at whole multiples of ``seconds`` since the Unix epoch (any zone)."""

    seconds: int
    tz: str = "UTC"

    @property
    def expr(self) -> str:
        return f"{EVERY}{self.seconds}s"

    def starts(self, from_utc: datetime) -> Iterator[datetime]:
        """Fires at or after ``from_utc``, increasing, in UTC."""
        at = as_utc(from_utc)
        micros = (at - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)
        step = self.seconds * 1_000_000
        k = -(-micros // step)
        while True:
            yield datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=k * step)
            k += 1

    def explain(self) -> str:
        size = f"{self.seconds}s" if self.seconds < 60 else format_duration(self.seconds)
        return f"every {size} (on whole multiples since the epoch)"


Timing = CronSchedule | Every


def timing(cron: str | None, every: str | None, tz: str, *,
           now: datetime | None = None) -> Timing:
    """The timing an operator typed: ``--cron EXPR`` or ``--every D`` (one of them), in ``tz``."""
    from scheduler.parse import parse_duration

    zone(tz)
    if (cron is None) == (every is None):
        raise ValidationError("give --cron EXPR or --every DURATION (one of them)",
                              hint="e.g. --cron '0 3 * * SUN' --tz Europe/Berlin, or --every 30s")
    if every is not None:
        d = parse_duration(every, "--every")
        seconds = d.total_seconds()
        if seconds != int(seconds) or not 1 <= seconds <= MAX_EVERY_S:
            raise ValidationError(f"--every {every!r} must be whole seconds from 1s to 366d")
        return Every(int(seconds), tz)
    return parse_cron(cron or "", tz, now=now)


def timing_of(expr: str, tz: str) -> Timing:
    """The timing stored in a schedule row's ``cron`` column (no ten-year check)."""
    if expr.startswith(EVERY):
        return Every(int(expr[len(EVERY):].rstrip("s")), tz)
    return parse_cron(expr, tz, check_future=False)


def as_cron(t: Timing) -> CronSchedule:
    """``t`` for ``catch_up``, which needs only ``starts()`` (``Every`` has it too)."""
    return cast(CronSchedule, t)


def grace(t: Timing) -> timedelta:
    """How late an occurrence may fire and still count as on time (runs under every policy)."""
    if isinstance(t, Every):  # half the period: a late claim is not taken for the next fire
        return timedelta(seconds=min(60, t.seconds / 2))
    return timedelta(minutes=1)


def next_occurrences(t: Timing, after: datetime, count: int) -> list[datetime]:
    """The next ``count`` occurrences strictly after ``after``."""
    out: list[datetime] = []
    for at in t.starts(as_utc(after) + timedelta(microseconds=1)):
        if len(out) >= count:
            break
        out.append(at)
    return out


# -------------------------------------------------------------------------- definition


@dataclass(frozen=True)
class ScheduleSpec:
    """What ``schedules add`` asks for, as typed (validated by :func:`add_schedule`)."""

    name: str
    request: TaskRequest | None  # at/delay must be None: the occurrence is the start
    tz: str = "UTC"
    cron: str | None = None
    every: str | None = None
    catchup: str = "latest"
    catchup_window_s: int = 3600
    overlap: str = "skip"
    # Or a saved template (``NAME``: its newest version at each firing; ``NAME@N``: pinned)
    # with its parameters' values, instead of ``request``.
    template: str | None = None
    template_params: Mapping[str, Any] = field(default_factory=dict)


def _options(r: TaskRequest) -> dict[str, Any]:
    return {"max_concurrency": str(r.max_concurrency) if r.max_concurrency else None,
            "max_failures": str(r.max_failures) if r.max_failures else None,
            "count_failures": r.count_failures,
            "timeout_s": r.timeout_s, "retries": r.retries, "backoff_s": r.backoff_s,
            "priority": r.priority, "in_window": r.in_window,
            "ignore_windows": r.ignore_windows, "executor": r.executor,
            "executor_options": dict(r.executor_options), "idempotent": r.idempotent,
            "allow_overlap": r.allow_overlap,
            "notify": list(r.notify)}


def request_of(row: Any) -> TaskRequest:
    """The task request a schedule's occurrence submits (task name: the schedule's)."""
    o = row.options or {}
    return TaskRequest(
        action=row.action, target=row.target, params=dict(row.params or {}),
        in_window=bool(o.get("in_window")), ignore_windows=bool(o.get("ignore_windows")),
        max_concurrency=parse_limit(o["max_concurrency"]) if o.get("max_concurrency") else None,
        max_failures=parse_limit(o["max_failures"]) if o.get("max_failures") else None,
        # schedules stored before count_failures existed counted final failures
        count_failures=o.get("count_failures") or "final",
        timeout_s=o.get("timeout_s"), retries=o.get("retries"), backoff_s=o.get("backoff_s"),
        name=f"schedule {row.name}", priority=o.get("priority") or "normal",
        executor=o.get("executor"), executor_options=dict(o.get("executor_options") or {}),
        idempotent=o.get("idempotent"), allow_overlap=o.get("allow_overlap"),
        notify=tuple(o.get("notify") or ()))


def schedule_request(session: Session, row: Any) -> TaskRequest:
    """The task request an occurrence submits: ``request_of(row)``, or for a schedule of a
    template that template's (the newest version now, or the one pinned) with the values
    stored, the task named after the schedule."""
    from dataclasses import replace

    from scheduler.templates.store import run_request

    held = (row.options or {}).get("template")
    if not held:
        return request_of(row)
    ref = held["name"] + (f"@{held['version']}" if held.get("version") else "")
    # The creator's role, checked again against the template's run roles as they are now
    # (None: added by the local CLI, which may run every template, or before roles were kept).
    creator = Principal(name=row.created_by or f"schedule:{row.name}",
                        via=f"schedule:{row.name}", role=held.get("role"))
    request = run_request(session, ref, held.get("params") or {}, principal=creator)
    return replace(request, name=f"schedule {row.name}")


def _template_request(session: Session, spec: ScheduleSpec,
                      operator: Principal | str) -> tuple[TaskRequest, dict[str, Any] | None]:
    """The request ``spec`` schedules, and what the row keeps of its template (None: none)."""
    from scheduler.templates.store import parse_ref, run_request

    if spec.template is None:
        if spec.request is None:
            raise ValidationError("a schedule needs a task: an action, or --template NAME")
        return spec.request, None
    if spec.request is not None:
        raise ValidationError("give the schedule's task as an action or as --template, not both")
    name, version = parse_ref(spec.template)
    principal = operator if isinstance(operator, Principal) else None
    request = run_request(session, spec.template, spec.template_params, principal=principal)
    return request, {"name": name, "version": version, "params": dict(spec.template_params),
                     "role": principal.role if principal is not None else None}


def _check(spec: ScheduleSpec, request: TaskRequest, now: datetime) -> Timing:
    if not isinstance(spec.name, str) or not NAME_RE.fullmatch(spec.name):
        raise ValidationError(f"schedule name {spec.name!r} must be 1-64 letters, digits, '-' "
                              "or '_', starting with a letter or digit")
    t = timing(spec.cron, spec.every, spec.tz, now=now)
    if spec.catchup not in CATCHUP_POLICIES:
        raise ValidationError(f"--catch-up {spec.catchup!r} is not one of "
                              f"{', '.join(CATCHUP_POLICIES)}")
    if spec.overlap not in OVERLAP_POLICIES:
        raise ValidationError(f"--overlap {spec.overlap!r} is not one of "
                              f"{', '.join(OVERLAP_POLICIES)}")
    if not 0 < spec.catchup_window_s <= 366 * 86400:
        raise ValidationError("--catch-up-window must be longer than 0 and at most 366 days")
    if request.at is not None or request.delay is not None:
        raise ValidationError("a schedule's tasks start at their occurrence: no --at or --in")
    return t


def _row(session: Session, name: str) -> Schedule:
    row = session.scalars(sa.select(Schedule).where(Schedule.name == name)).first()
    if row is None:
        raise NotFoundError(f"no schedule named {name!r}", hint="see `fleetsched schedules list`")
    return row


def _event(session: Session, kind: str, operator: Principal | str, data: dict[str, Any],
           at: datetime | None = None) -> None:
    record_event(session, kind, operator=operator, data=data, at=at)


class NotArmedError(FleetschedError):
    """The schedule change is recorded in SQL but Redis did not take the due entry."""

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"schedule {name} is recorded but not armed in Redis: {why}",
                         hint=f"run `fleetsched schedules resume {name}` once Redis answers")


def _arm(connect: Any, keys: Where, name: str, at: datetime | None, replace: bool) -> None:
    from scheduler.queue.schedules import arm, disarm

    try:
        client = connect()
        try:
            if at is None:
                disarm(client, keys, name)
            else:
                arm(client, keys, name, to_ms(at), replace=replace)
        finally:
            client.close()
    except (FleetschedError, redis.RedisError, OSError) as exc:
        why = str(exc).splitlines()[0] if str(exc) else "Redis failed"
        raise NotArmedError(name, why) from None


def add_schedule(engine: Engine, connect: Any, spec: ScheduleSpec, *, operator: Principal | str,
                 keys: Where = Keys(), now: datetime | None = None) -> dict[str, Any]:
    """Check everything (the task as ``submit`` would plan it), record, then arm the entry."""
    from scheduler.record.session import transaction
    from scheduler.submission.submit import plan_task

    from scheduler.templates.store import check_plan

    now = now or utcnow()
    with transaction(engine) as session:
        request, template = _template_request(session, spec, operator)
        if request.break_glass is not None:
            raise ValidationError("a schedule cannot run through freezes: --break-glass is for "
                                  "one task an operator submits", hint="submit that run by hand")
        t = _check(spec, request, now)
        first = next(iter(t.starts(now)), None)
        if session.scalars(sa.select(Schedule.id).where(Schedule.name == spec.name)).first():
            raise ValidationError(f"a schedule named {spec.name!r} exists",
                                  hint="remove it first, or choose another name")
        plan = plan_task(session, request, operator=operator, now=now)
        check_plan(session, request, plan)
        options = _options(request)
        if template is not None:
            options["template"] = template
        row = Schedule(name=spec.name, cron=t.expr,
                       tz=spec.tz, action=plan.action, params=dict(request.params),
                       target=str(plan.target), options=options,
                       catchup=spec.catchup, catchup_window_s=spec.catchup_window_s,
                       overlap=spec.overlap, paused=False, created_by=str(operator),
                       created_at=now)
        session.add(row)
        _event(session, "schedule-add", operator, {
            "schedule": spec.name, "cron": row.cron, "tz": spec.tz, "action": plan.action,
            "target": row.target, "hosts": len(plan.hosts), "catchup": spec.catchup,
            "overlap": spec.overlap, **({"template": template} if template else {})})
    _arm(connect, keys, spec.name, first, replace=False)
    return {"name": spec.name, "cron": t.expr, "tz": spec.tz, "explain": t.explain(),
            "next": first, "hosts": len(plan.hosts)}


# ------------------------------------------------------------------------------ control


def pause_schedule(engine: Engine, connect: Any, name: str, *, operator: Principal | str,
                   keys: Where = Keys()) -> bool:
    """Pause: no occurrence fires until resume. False: it was paused already."""
    from scheduler.record.session import transaction
    from scheduler.queue.schedules import disarm

    with transaction(engine) as session:
        row = _row(session, name)
        if row.paused:
            return False
        row.paused = True
        held = None
        try:
            client = connect()
            try:
                held = disarm(client, keys, name)
            finally:
                client.close()
        except (FleetschedError, redis.RedisError, OSError):
            held = None  # the firing worker sees `paused` and records the occurrence as missed
        _event(session, "schedule-pause", operator, {"schedule": name, "occurrence": held})
    return True


def _paused_from(session: Session, row: Schedule) -> datetime:
    """The first occurrence the pause held back (from the pause event), else the last fire."""
    e = Event.__table__
    # task_id IS NULL (schedule events name no task) lets ix_events_kind_task_id_ts serve the
    # newest first, rather than the ts index reading events of every kind.
    for data in session.scalars(sa.select(e.c.data).where(e.c.kind == "schedule-pause",
                                                          e.c.task_id.is_(None))
                                .order_by(e.c.ts.desc()).limit(200)):
        if isinstance(data, dict) and data.get("schedule") == row.name:
            if data.get("occurrence"):
                return datetime.fromtimestamp(int(data["occurrence"]) / 1000, timezone.utc)
            break
    base = row.last_occurrence or row.created_at
    return as_utc(base) + timedelta(microseconds=1)


def resume_schedule(engine: Engine, connect: Any, name: str, *, operator: Principal | str,
                    keys: Where = Keys(), now: datetime | None = None) -> dict[str, Any]:
    """Resume (or re-arm a schedule whose entry Redis lost): occurrences that fell while it
    was paused are recorded as ``missed``; the entry goes to the next occurrence."""
    from scheduler.record.session import transaction

    now = now or utcnow()
    with transaction(engine) as session:
        row = _row(session, name)
        t = timing_of(row.cron, row.tz)
        missed = 0
        if row.paused:
            start = _paused_from(session, row)
            cu = catch_up(as_cron(t), start - timedelta(microseconds=1), now, Policy.SKIP,
                          grace=timedelta(0), limit=MISSED_LIMIT)
            for at in cu.missed:
                _event(session, "missed", operator, {"schedule": name, "occurrence": str(to_ms(at)),
                                                     "error": "the schedule was paused"}, now)
            if cu.unlisted:
                _event(session, "missed", operator, {
                    "schedule": name, "error": "the schedule was paused",
                    "detail": {"unlisted_from": to_ms(cu.unlisted[0]),
                               "unlisted_to": to_ms(cu.unlisted[1])}}, now)
            missed = len(cu.missed)
        resumed = row.paused
        if resumed:
            row.paused = False
            _event(session, "schedule-resume", operator, {"schedule": name, "missed": missed})
        first = next(iter(t.starts(now)), None)
    _arm(connect, keys, name, first, replace=False)
    return {"name": name, "missed": missed, "next": first, "resumed": resumed}


def remove_schedule(engine: Engine, connect: Any, name: str, *, operator: Principal | str,
                    keys: Where = Keys()) -> None:
    """Remove the schedule (its tasks stay, with their record); the entry leaves Redis."""
    from scheduler.record.session import transaction
    from scheduler.record.state import Unscheduled, apply

    with transaction(engine) as session:
        row = _row(session, name)
        apply(session, Unscheduled(row.id))
        session.delete(row)
        _event(session, "schedule-remove", operator, {"schedule": name})
    try:
        _arm(connect, keys, name, None, replace=True)
    except NotArmedError:
        pass  # a firing worker finds no schedule row and drops the entry


# ------------------------------------------------------------------------------ reading


def _summary(row: Schedule, now: datetime) -> dict[str, Any]:
    t = timing_of(row.cron, row.tz)
    nxt = None if row.paused else next(iter(t.starts(now)), None)
    return {"name": row.name, "timing": row.cron, "tz": row.tz, "action": row.action,
            "target": row.target, "catchup": row.catchup, "overlap": row.overlap,
            "paused": row.paused, "last": row.last_occurrence, "next": nxt}


LIST_COLUMNS = ["name", "timing", "tz", "action", "target", "catchup", "overlap", "paused",
                "last", "next"]


def list_schedules(session: Session, now: datetime | None = None) -> list[dict[str, Any]]:
    now = now or utcnow()
    return [_summary(r, now) for r in session.scalars(sa.select(Schedule).order_by(Schedule.name))]


def show_schedule(session: Session, name: str, now: datetime | None = None,
                  limit: int = 10) -> dict[str, Any]:
    """One schedule: definition, options, its latest tasks and its latest missed occurrences."""
    now = now or utcnow()
    row = _row(session, name)
    t = timing_of(row.cron, row.tz)
    tk = Task.__table__
    # Each occurrence's task counted as every view counts it (scheduler.progress: failed by
    # the host, lost with the worker, each job once).
    tasks = [{"task": r.id, "occurrence": r.occurrence,
              **{k: v for k, v in from_task_row(r).counts().items() if k != "done"}}
             for r in session.execute(sa.select(tk).where(tk.c.schedule_id == row.id)
                                      .order_by(tk.c.occurrence.desc()).limit(limit))]
    e = Event.__table__
    missed = []
    for ts, data in session.execute(sa.select(e.c.ts, e.c.data)
                                    .where(e.c.kind == "missed", e.c.task_id.is_(None))
                                    .order_by(e.c.ts.desc()).limit(5000)):
        if isinstance(data, dict) and data.get("schedule") == name and len(missed) < limit:
            occ = data.get("occurrence")
            missed.append({"recorded": ts,
                           "occurrence": datetime.fromtimestamp(int(occ) / 1000, timezone.utc)
                           if str(occ or "").isdigit() else None,
                           "why": data.get("error")})
    options = dict(row.options or {})
    if options.get("notify"):  # a webhook URL may hold a token: shown without it
        options["notify"] = [_shown(v) for v in options["notify"]]
    held = options.pop("template", None)
    return {**_summary(row, now), "explain": t.explain(), "options": options,
            **({"template": _template_text(held)} if held else {}),
            "params": row.params, "catchup_window_s": row.catchup_window_s,
            "created_by": row.created_by, "created_at": row.created_at,
            "tasks": tasks, "missed": missed}


def _template_text(held: dict[str, Any]) -> str:
    """A schedule's template as ``schedules show`` says it: which version, with which values."""
    which = (f"{held['name']}@{held['version']}" if held.get("version")
             else f"{held['name']} (its newest version at each firing)")
    values = " ".join(f"{k}={v}" for k, v in (held.get("params") or {}).items())
    return f"{which}{', with ' + values if values else ''}"


def _shown(target: str) -> str:
    from scheduler.notify.targets import parse_target

    try:
        return parse_target(target).shown
    except ValidationError:
        return "(invalid target)"


def upcoming_rows(session: Session, name: str, count: int,
                  now: datetime | None = None) -> list[dict[str, Any]]:
    """``schedules next``: the next ``count`` occurrences in the schedule's zone and in UTC."""
    if not 1 <= count <= 1000:
        raise ValidationError(f"--count {count} must be from 1 to 1000")
    row = _row(session, name)
    tz = zone(row.tz)
    return [{"local": at.astimezone(tz), "tz": row.tz, "utc": at}
            for at in next_occurrences(timing_of(row.cron, row.tz), now or utcnow(), count)]
