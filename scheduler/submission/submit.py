"""Submitting a task: from an operator's request to a plan, a record in SQL, and the queue.

What it owns:

1. :class:`TaskRequest`, what an operator asks for (from ``fleetsched submit`` flags or a YAML
   task file, ``scheduler.submission.taskfile``), before anything is looked up;
2. :func:`plan_task`: everything checked and decided without writing: the action and its
   parameters (validated by the action, secret references kept as references), the executor
   and its options, the target resolved against the stored inventory (an empty selection is an
   error), when each host's job is due (now, ``--at``/``--in``, or its next service window:
   by default for an action that requires windows, unless ``--ignore-windows``; in every case
   after its host's freezes, unless ``--break-glass REASON``) and the rollout policy with
   percentages turned into counts (:class:`Plan`);
3. :func:`record_task`: the task row (state ``accepted``) and one job row per host (through
   ``scheduler.record.state``, the record's one writer) and a ``submit`` event holding the
   exact queue spec, in the caller's transaction: the record of what was asked;
4. :func:`submit`: connect to Redis first (a Redis that may evict keys, or holds another shard
   count, refuses the task before anything is written), plan and record in one transaction,
   then fan out to Redis (``scheduler.submission.fanout``), into the queue shard of the new
   task's id (``scheduler.queue.route.task_keys``); when Redis is unreachable or fails the task
   stays ``accepted`` in SQL and :class:`NotQueuedError` says so (``fleetsched reconcile``
   finishes the fan-out later); a submission with an idempotency key that its operator used
   before returns the first task and records nothing (``scheduler.submission.repeats``).

Job ids are ``"<task id>.<n>"`` with ``n`` the host's index in the sorted host list.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import redis
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from scheduler.errors import (FleetschedError, RedisUnavailableError, RedisUnsafeError,
                              ValidationError)
from scheduler.gcpause import gc_paused
from scheduler.notify.targets import parse_target as parse_notify_target
from scheduler.notify.targets import parse_targets
from scheduler.parse import Limit
from scheduler.principal import Principal
from scheduler.queue.client import JobSpec, TaskSpec
from scheduler.queue.keys import PRIORITY_CLASSES, Keys
from scheduler.queue.route import Where, task_keys
from scheduler.queue.types import COUNT_FAILURES
from scheduler.record.audit import record_event
from scheduler.record.models import Host
from scheduler.record.state import Submit, Waves, apply
from scheduler.record.types import due_ms, to_ms, utcnow
from scheduler.submission.repeats import Repeat, fingerprint, first_of
from scheduler.submission.targets import (
    Target,
    host_vars_map,
    parse_target,
    resolve_target,
    select_term,
)
from scheduler.submission.waves import WaveSpec, split

__all__ = [
    "CONFIRM_THRESHOLD", "HostConn", "NotQueuedError", "Plan", "PlannedJob", "Policy",
    "Submitted", "TaskRequest", "plan_task", "record_task", "submit",
]

CONFIRM_THRESHOLD = 25  # more hosts than this (or any `all` term) is fleet-wide: confirm first
DEFAULT_RETRIES = 2  # attempts = retries + 1
DEFAULT_BACKOFF_S = 1.0
DEFAULT_TIMEOUT_S = 3600.0
PAST_SLACK = timedelta(minutes=1)  # an --at this far in the past is a mistake, not "now"
MAX_NAME = 255


class NotQueuedError(FleetschedError):
    """The task is recorded in SQL (state ``accepted``) but Redis did not take all its jobs."""

    exit_code = 1

    def __init__(self, task_id: int, message: str) -> None:
        super().__init__(f"task {task_id} is recorded but not queued: {message}",
                         hint="run `fleetsched reconcile` once Redis is reachable; it "
                              "enqueues the rest")
        self.task_id = task_id


@dataclass(frozen=True)
class TaskRequest:
    """What an operator asks for, as typed (parsed values, nothing looked up yet)."""

    action: str
    target: str
    params: Mapping[str, Any] = field(default_factory=dict)
    at: datetime | None = None  # aware; not before this time
    delay: timedelta | None = None  # --in: not before now + delay
    in_window: bool = False
    ignore_windows: bool = False  # run outside the hosts' windows an action requires (recorded)
    break_glass: str | None = None  # the operator's reason to run through freezes (recorded)
    customer_output: bool = False  # customers read their own hosts' output (record.tenancy)
    max_concurrency: Limit | None = None
    max_failures: Limit | None = None
    count_failures: str = "attempts"  # what max_failures counts: see TaskSpec.count_failures
    timeout_s: float | None = None
    retries: int | None = None
    backoff_s: float | None = None
    name: str | None = None
    priority: str = "normal"
    executor: str | None = None
    executor_options: Mapping[str, Any] = field(default_factory=dict)
    idempotent: bool | None = None  # None: the action's own flag
    allow_overlap: bool | None = None  # None: the action's own overlap_safe flag
    notify: tuple[str, ...] = ()  # notification targets of this task (scheduler.notify)
    waves: WaveSpec | None = None  # roll out in waves (scheduler.submission.waves)
    template: str | None = None  # the saved template run (scheduler.templates), recorded
    template_version: int | None = None


@dataclass(frozen=True)
class HostConn:
    """How a worker reaches one host (copied into ``Keys.host``)."""

    name: str
    address: str | None
    port: int
    user: str | None
    vars: dict[str, Any]
    limits: tuple[str, ...] = ()  # the limited groups it is in (`groups limit`)


@dataclass(frozen=True)
class PlannedJob:
    seq: int
    host: str
    due: datetime | None  # None: now (by the Redis clock at enqueue)
    window: str | None = None  # the job's window field (windows, !freezes, break-glass)
    wclose: datetime | None = None
    frozen_until: datetime | None = None  # a freeze moved ``due`` here


@dataclass(frozen=True)
class Policy:
    """The rollout policy in effect, percentages already turned into counts."""

    max_running: int  # 0 = no limit
    max_failures: int  # 0 = never abort
    count_failures: str  # attempts | final
    max_attempts: int
    backoff_ms: int
    timeout_ms: int
    idempotent: bool
    idempotent_from: str  # "action" or "request"
    exclusive: bool = True  # one job per host at a time, across tasks

    def _failures(self, request: TaskRequest) -> str:
        if not self.max_failures:
            return "none"
        what = ("hosts failing any attempt" if self.count_failures == "attempts"
                else "jobs failed for good (after their retries)")
        asked = request.max_failures
        share = f" ({asked} of the hosts)" if asked and asked.percent else ""
        return f"{self.max_failures} {what}{share}, then abort"

    def describe(self, request: TaskRequest) -> dict[str, Any]:
        def limit(value: int, asked: Limit | None) -> str:
            if not value:
                return "none"
            return f"{value} ({asked} of the hosts)" if asked and asked.percent else str(value)
        return {
            "max_concurrency": limit(self.max_running, request.max_concurrency),
            "max_failures": self._failures(request),
            "attempts": self.max_attempts, "backoff_ms": self.backoff_ms,
            "timeout_ms": self.timeout_ms,
            "idempotent": f"{'yes' if self.idempotent else 'no'} (from the {self.idempotent_from})",
            "hosts": ("one job at a time: waits while another task's job runs on the host"
                      if self.exclusive else "may overlap with other tasks' jobs on a host"),
            "lost_job": ("run again (idempotent)" if self.idempotent
                         else "failed as lost, never run twice"),
        }


@dataclass(frozen=True)
class Plan:
    """A checked submission: what will be written and queued (nothing is written yet)."""

    request: TaskRequest
    target: Target
    operator: str
    action: str
    params: dict[str, Any]  # JSON form (secret references as references)
    executor: str
    executor_options: dict[str, Any]
    expected_ms: int
    policy: Policy
    hosts: list[HostConn]
    groups: list[str]  # the groups the selected hosts are in (blast radius)
    jobs: list[PlannedJob]
    start: datetime | None  # None: now
    notify: tuple[str, ...] = ()  # checked notification targets, as typed
    host_groups: dict[str, str] = field(default_factory=dict)  # host -> its first group
    in_window: bool = False  # each host's job waits for its windows (asked, or the action's)
    break_glass: str | None = None  # the checked reason to run through freezes
    principal: Principal | None = None  # who submits (its submit event says how authenticated)
    first_wave: frozenset[str] | None = None  # hosts a --waves first term picks (vars.x=y,...)

    def windows_text(self) -> str:
        """How windows and freezes apply, as the plan, ``tasks show`` and the report say it."""
        from scheduler.submission.taskinfo import windows_text

        return windows_text(self.in_window, self.request.ignore_windows, self.break_glass,
                            required_by=self.action if self.in_window and
                            not self.request.in_window else None)

    def waves(self, task_id: int | str) -> list[list[int]] | None:
        """The task's waves (job numbers), or None when it is not rolled out in waves (no
        --waves, or one wave holds every host). ``random`` order is seeded by ``--wave-seed``,
        else by ``task_id`` (a dry run passes the seed it drew)."""
        spec = self.request.waves
        if spec is None:
            return None
        seed = str(spec.seed if spec.seed is not None else task_id)
        out = split(spec, [j.host for j in self.jobs], seed=seed, groups=self.host_groups,
                    first=self.first_wave)
        return out if len(out) > 1 else None

    def wave_policy(self) -> dict[str, Any]:
        """What the wave controller reads (the task hash's ``wave_policy``): the spec's, and
        ``max_failures`` as asked (``10%`` of each wave's hosts, or a count) for the per-wave
        limit."""
        spec = self.request.waves
        asked = self.request.max_failures
        return {**(spec.policy() if spec else {}),
                "max_failures": str(asked) if asked else None}

    @property
    def fleet_wide(self) -> bool:
        """Many hosts, or an ``all`` term: confirm before submitting."""
        return len(self.hosts) > CONFIRM_THRESHOLD or any(
            s.kind == "all" and not s.exclude for s in self.target.selectors)

    def spec(self) -> dict[str, Any]:
        """The task spec the workers read (``TaskSpec.spec``)."""
        return {"action": self.action, "params": self.params, "executor": self.executor,
                "executor_options": self.executor_options, "expected_ms": self.expected_ms}

    def task_spec(self, task_id: int | str) -> TaskSpec:
        p = self.policy
        return TaskSpec(str(task_id), priority=self.request.priority, max_running=p.max_running,
                        max_failures=p.max_failures, max_attempts=p.max_attempts,
                        backoff_ms=p.backoff_ms, timeout_ms=p.timeout_ms,
                        idempotent=p.idempotent, spec=self.spec(), operator=self.operator,
                        count_failures=p.count_failures, exclusive=p.exclusive)

    def job_specs(self, task_id: int | str) -> list[JobSpec]:
        return [JobSpec(f"{task_id}.{j.seq}", j.host,
                        due_ms=0 if j.due is None else due_ms(j.due), window=j.window,
                        wclose_ms=None if j.wclose is None else to_ms(j.wclose))
                for j in self.jobs]


# ------------------------------------------------------------------------------------ plan


def _policy(request: TaskRequest, action: Any, hosts: int) -> Policy:
    def count(limit: Limit | None) -> int:
        return 0 if limit is None else min(limit.of(hosts), hosts)
    retries = DEFAULT_RETRIES if request.retries is None else request.retries
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100:
        raise ValidationError(f"retries {retries!r} must be a whole number from 0 to 100")
    timeout_s = DEFAULT_TIMEOUT_S if request.timeout_s is None else request.timeout_s
    backoff_s = DEFAULT_BACKOFF_S if request.backoff_s is None else request.backoff_s
    if timeout_s <= 0 or timeout_s > 7 * 86400:
        raise ValidationError(f"timeout {timeout_s:g}s must be longer than 0 and at most 7 days")
    if backoff_s < 0 or backoff_s > 86400:
        raise ValidationError(f"backoff {backoff_s:g}s must be from 0 to 1 day")
    idempotent = bool(action.idempotent) if request.idempotent is None else request.idempotent
    if request.count_failures not in COUNT_FAILURES:
        raise ValidationError(f"--count-failures {request.count_failures!r} must be one of "
                              f"{', '.join(COUNT_FAILURES)}")
    return Policy(max_running=count(request.max_concurrency),
                  max_failures=count(request.max_failures),
                  count_failures=request.count_failures, max_attempts=retries + 1,
                  backoff_ms=int(round(backoff_s * 1000)),
                  timeout_ms=max(1, int(math.ceil(timeout_s * 1000))), idempotent=idempotent,
                  idempotent_from="action" if request.idempotent is None else "request",
                  exclusive=not (bool(getattr(action, "overlap_safe", False))
                                 if request.allow_overlap is None else request.allow_overlap))


def _executor(request: TaskRequest, action: Any) -> tuple[str, dict[str, Any]]:
    from scheduler.errors import ConfigError
    from tasks.executors.options import EXECUTOR_DEFAULTS, EXECUTORS, read_options
    from tasks.executors.ssh.become import USER_HINT, is_user_name, password_ref

    name = request.executor or action.default_executor
    if name not in EXECUTORS:
        raise ValidationError(f"unknown executor {name!r}",
                              hint="choose one of: " + ", ".join(EXECUTORS))
    options = dict(request.executor_options)
    read_options(name, options, EXECUTOR_DEFAULTS[name])  # unknown names and bad values: one line
    user = options.get("become_user")
    if user and not is_user_name(str(user)):  # the worker's rule, before anything is written
        raise ValidationError(f"become_user {str(user)!r} is not a user name", hint=USER_HINT)
    if options.get("become_password"):  # a reference only: the value is read on the worker
        try:
            password_ref(options["become_password"], "executor option become_password")
        except ConfigError as exc:
            raise ValidationError(str(exc), hint=exc.hint) from None
    return name, options


def _start(request: TaskRequest, now: datetime) -> datetime | None:
    if request.at is not None and request.delay is not None:
        raise ValidationError("give --at or --in, not both")
    if request.delay is not None:
        return now + request.delay
    if request.at is not None:
        if request.at.tzinfo is None:
            raise ValidationError("--at needs a time zone (internal: naive datetime)")
        at = request.at.astimezone(timezone.utc)
        if at < now - PAST_SLACK:
            raise ValidationError(f"--at {at.isoformat()} is in the past",
                                  hint="leave --at out to run now")
        return at
    return None


def _hosts(session: Session, names: list[str],
           members: dict[str, set[str]]) -> list[HostConn]:
    from scheduler.inventory import limited_groups_of
    from scheduler.inventory.store import IN_CHUNK

    h = Host.__table__
    rows = {}
    for start in range(0, len(names), IN_CHUNK):  # only the selected hosts' rows (vars: JSON)
        rows.update((r.name, r) for r in session.execute(
            sa.select(h.c.name, h.c.address, h.c.port, h.c.user, h.c.vars)
            .where(h.c.name.in_(names[start:start + IN_CHUNK]))))
    limits = limited_groups_of(session, names, members)
    return [HostConn(n, rows[n].address, rows[n].port, rows[n].user, rows[n].vars or {},
                     tuple(limits[n])) for n in names]


MAX_REASON = 500  # characters of a --break-glass reason


def _break_glass(request: TaskRequest) -> str | None:
    """The checked --break-glass reason (None: freezes hold the task's jobs)."""
    if request.break_glass is None:
        return None
    reason = str(request.break_glass).strip()
    if not reason:
        raise ValidationError("--break-glass needs a reason (it is recorded with the task)",
                              hint='e.g. --break-glass "INC-4711: DNS down, fix during the '
                                   'year-end freeze"')
    if len(reason) > MAX_REASON or "\n" in reason or not reason.isprintable():
        raise ValidationError(f"--break-glass reason must be one line of at most {MAX_REASON} "
                              "printable characters")
    return reason


def _jobs(session: Session, hosts: list[str], start: datetime | None, now: datetime,
          expected_ms: int, *, in_window: bool, required_by: str | None,
          break_glass: bool) -> list[PlannedJob]:
    """Each host's job: due in its windows, or at the start; either way after its freezes."""
    from scheduler.windows.assignment import due_times_in_window, due_times_outside_freezes

    if in_window:
        due = due_times_in_window(session, hosts, start or now, expected_ms,
                                  break_glass=break_glass, required_by=required_by)
    else:
        due = due_times_outside_freezes(session, hosts, start, now, expected_ms,
                                        break_glass=break_glass)
    return [PlannedJob(i, h, due[h].due, due[h].field, due[h].wclose, due[h].frozen_until)
            for i, h in enumerate(hosts)]


def _tenant_scope(session: Session, request: TaskRequest,
                  principal: Principal | None) -> str | None:
    """The customer whose hosts alone a target is resolved against: a customer-scoped
    principal's, else a customer's template's (``request.template``); None: every host."""
    from scheduler.record.models import Template

    if principal is not None and principal.tenant is not None:
        return principal.tenant
    if request.template is not None:
        return session.scalar(sa.select(Template.tenant).where(
            Template.name == request.template))
    return None


def _scoped(session: Session, tenant: str, members: dict[str, set[str]],
            host_vars: dict[str, dict[str, Any]] | None
            ) -> tuple[dict[str, set[str]], dict[str, dict[str, Any]] | None]:
    """``members`` and ``host_vars`` as if ``tenant``'s hosts were the whole inventory: ``all``
    is its hosts, a group its members of it (a group without one does not exist), a ``vars.``
    term sees its hosts' values only; so no answer (a count, a name, "no group named", "selects
    no hosts") depends on another customer's hosts, groups or values."""
    from scheduler.record.tenancy import tenant_hosts

    mine = set(session.scalars(tenant_hosts(tenant)))
    scoped = {g: hs & mine for g, hs in members.items() if g != "all" and hs & mine}
    scoped["all"] = mine
    if host_vars is not None:
        host_vars = {h: v for h, v in host_vars.items() if h in mine}
    return scoped, host_vars


@gc_paused()
def plan_task(session: Session, request: TaskRequest, *, operator: Principal | str,
              now: datetime | None = None) -> Plan:
    """Check ``request`` against the action registry and the stored inventory; write nothing.

    Raises :class:`ValidationError` (or ``NotFoundError`` for an unknown action) with one line.
    """
    import tasks

    principal = operator if isinstance(operator, Principal) else None
    operator = str(operator)
    now = now or utcnow()
    action = tasks.get_action(request.action)
    typed = action.validate(dict(request.params))
    dumped = action.dump(typed) if hasattr(action, "dump") else dict(request.params)
    expected = int(action.estimate_ms(typed)) if hasattr(action, "estimate_ms") else int(
        action.expected_ms)
    if request.priority not in PRIORITY_CLASSES:
        raise ValidationError(f"priority {request.priority!r} is not one of "
                              f"{', '.join(PRIORITY_CLASSES)}")
    if request.name is not None and (not request.name.strip() or len(request.name) > MAX_NAME):
        raise ValidationError(f"name must be 1 to {MAX_NAME} characters")
    if not operator or len(operator) > MAX_NAME:
        raise ValidationError("the operator name must be 1 to 255 characters (--as)")
    executor, options = _executor(request, action)
    notify = tuple(t.spec for t in parse_targets(request.notify))  # one line if one is bad
    start = _start(request, now)
    if request.in_window and request.ignore_windows:
        raise ValidationError("give --in-window or --ignore-windows, not both")
    glass = _break_glass(request)
    # Windows apply by default to the actions that need them; --ignore-windows is the
    # explicit, recorded way out (docs/reliability.md, "Windows and freezes by default").
    in_window = request.in_window or (action.requires_window and not request.ignore_windows)

    from scheduler.inventory import group_member_map, group_member_map_of

    target = parse_target(request.target)
    wave_term = request.waves.first if request.waves else None
    named = [s.pattern for s in target.selectors if s.kind == "host" and not s.is_glob]
    if len(named) == len(target.selectors) and wave_term is None:  # just these hosts' groups
        members = group_member_map_of(session, named)
    else:
        members = group_member_map(session)
    host_vars = (host_vars_map(session) if target.needs_vars or (
        wave_term is not None and wave_term.kind == "var") else None)
    scope = _tenant_scope(session, request, principal)
    if scope is not None:  # a customer's universe: its hosts, groups and values only
        members, host_vars = _scoped(session, scope, members, host_vars)
    every = members.get("all", set())
    names = resolve_target(target, every, members, host_vars)
    selected = set(names)
    first_wave = (frozenset(select_term(wave_term, names, members, host_vars))
                  if wave_term is not None else None)
    groups = sorted(g for g, hs in members.items()
                    if g not in ("all", "ungrouped") and not hs.isdisjoint(selected))
    policy = _policy(request, action, len(names))
    jobs = _jobs(session, names, start, now, expected, in_window=in_window,
                 required_by=action.name if in_window and not request.in_window else None,
                 break_glass=glass is not None)
    first_group = {}
    for g in sorted(members):
        if g not in ("all", "ungrouped"):
            for h in members[g] & selected:
                first_group.setdefault(h, g)
    plan = Plan(request=request, target=target, operator=operator, action=action.name,
                params=dumped, executor=executor, executor_options=options,
                expected_ms=expected, policy=policy, hosts=_hosts(session, names, members),
                groups=groups, jobs=jobs, start=start, notify=notify, host_groups=first_group,
                in_window=in_window, break_glass=glass, principal=principal,
                first_wave=first_wave)
    plan.waves("plan")  # refuses a spec that makes too many waves before anything is written
    return plan


# ---------------------------------------------------------------------------------- record


@gc_paused()
def record_task(session: Session, plan: Plan, *, now: datetime | None = None,
                request_key: str | None = None) -> int:
    """Write the task (``accepted``), its job rows and a ``submit`` event; return the task id.
    ``request_key``: the submission's idempotency key, kept on the task with the request's
    fingerprint in the event (``scheduler.submission.repeats``)."""

    now = now or utcnow()
    p, r = plan.policy, plan.request
    task_id = apply(session, Submit(dict(
        name=r.name, request_key=request_key, action=plan.action, params=plan.params,
        executor=plan.executor,
        target=str(plan.target), operator=plan.operator, priority=r.priority,
        max_running=p.max_running, max_failures=p.max_failures,
        count_failures=p.count_failures, max_attempts=p.max_attempts,
        backoff_ms=p.backoff_ms, timeout_s=max(1, math.ceil(p.timeout_ms / 1000)),
        idempotent=p.idempotent, exclusive=p.exclusive, in_window=plan.in_window,
        ignore_windows=r.ignore_windows, break_glass=plan.break_glass, start_at=plan.start,
        customer_output=r.customer_output, template=r.template,
        template_version=r.template_version,
        notify=list(plan.notify) or None), plan.jobs, now))
    waves = plan.waves(task_id)
    if r.waves is not None:
        counts = [len(w) for w in waves] if waves else [len(plan.jobs)]
        apply(session, Waves(task_id, {**plan.wave_policy(), "count": len(counts),
                                       "counts": counts}, "running" if waves else "done"))
    spec = plan.task_spec(task_id)
    record_event(session, "submit", operator=plan.principal or plan.operator, task_id=task_id,
                 at=now, data={
        "name": r.name, "target": str(plan.target), "hosts": len(plan.hosts),
        "groups": plan.groups[:50], "in_window": plan.in_window,
        "ignore_windows": r.ignore_windows, "break_glass": plan.break_glass,
        "customer_output": r.customer_output, "windows": plan.windows_text(),
        "start": plan.start.isoformat() if plan.start else None,
        "notify": [parse_notify_target(t).shown for t in plan.notify] or None,
        "waves": {**plan.wave_policy(), "waves": [[f"{task_id}.{n}" for n in w] for w in waves]}
        if waves and r.waves else None,
        "queue": {"priority": spec.priority, "max_running": spec.max_running,
                  "max_failures": spec.max_failures, "count_failures": spec.count_failures,
                  "max_attempts": spec.max_attempts,
                  "backoff_ms": spec.backoff_ms, "timeout_ms": spec.timeout_ms,
                  "idempotent": spec.idempotent, "exclusive": spec.exclusive,
                  "spec": spec.spec},
        **({"template": {"name": r.template, "version": r.template_version}}
           if r.template else {}),
        **({"request_key": request_key, "request_sha256": fingerprint(r)}
           if request_key else {})})
    return int(task_id)


# ---------------------------------------------------------------------------------- submit


def _connect_first(connect: Callable[[], redis.Redis]) -> redis.Redis | Exception:
    """A client, or why Redis cannot be reached now. A Redis that answers but refuses to
    serve as this queue raises: waiting for it would not help."""
    try:
        return connect()
    except RedisUnsafeError:
        raise
    except (RedisUnavailableError, redis.RedisError, OSError) as exc:
        return exc


def _reason(exc: BaseException) -> str:
    """Why Redis did not take the task, in one line (no password)."""
    from scheduler.redact import redact_exception

    reason = str(exc) if isinstance(exc, FleetschedError) else (
        f"{type(exc).__name__}: {redact_exception(exc)}")
    return reason.splitlines()[0] if reason else "Redis failed"


@dataclass(frozen=True)
class Submitted:
    task_id: int
    jobs: int
    plan: Plan | None  # None for a repeat found before planning
    repeat: Repeat | None = None  # the first task of this idempotency key: nothing was queued


def _record(session: Session, plan: Plan, request_key: str | None) -> int | Repeat:
    """The new task's id, or the :class:`Repeat` of the task that took ``request_key`` first.

    A concurrent submit under the same key may commit between our look and our insert (on
    PostgreSQL; SQLite's BEGIN IMMEDIATE serialises the two): the unique constraint refuses
    the insert, the savepoint rolls it back, and the winner's task is looked up again."""
    if request_key is None:
        return record_task(session, plan)
    asked = fingerprint(plan.request)
    first = first_of(session, plan.operator, request_key, asked)
    if first is not None:
        return first
    try:
        with session.begin_nested():
            return record_task(session, plan, request_key=request_key)
    except sa.exc.IntegrityError:
        first = first_of(session, plan.operator, request_key, asked)
        if first is None:
            raise
        return first


@gc_paused()
def submit(engine: Engine, connect: Callable[[], redis.Redis], request: TaskRequest, *,
           operator: str, keys: Where = Keys(), plan: Plan | None = None,
           request_key: str | None = None) -> Submitted:
    """Connect, plan and record the task in one transaction, then enqueue it
    (``scheduler.submission.fanout``).

    ``connect`` is called once, before anything is written: a Redis that would lose jobs
    (``RedisUnsafeError``: it may evict keys) or belongs to another queue (``ConfigError``: another
    shard count) refuses the task unrecorded. An unreachable Redis does not: the task is
    recorded and :class:`NotQueuedError` says so (``fleetsched reconcile`` queues it later).
    ``plan``: one the caller made already (and showed the operator) in this same database; it
    is recorded as it is. ``keys``: one shard's keys, or the queue's ``Shards`` (the task goes
    to the shard of its id). ``request_key``: an idempotency key; when ``operator`` already
    submitted this request under it, the first task is returned (``Submitted.repeat``) and
    nothing is recorded or queued again (``scheduler.submission.repeats``).
    """
    from scheduler.record.session import transaction
    from scheduler.submission.fanout import fan_out, mark_queued

    client = _connect_first(connect)
    with transaction(engine) as session:
        if plan is None:
            plan = plan_task(session, request, operator=operator)
        recorded = _record(session, plan, request_key)
    if isinstance(recorded, Repeat):
        return Submitted(task_id=recorded.task_id, jobs=recorded.jobs, plan=plan,
                         repeat=recorded)
    task_id = recorded
    if isinstance(client, Exception):
        raise NotQueuedError(task_id, _reason(client))
    try:
        waves = plan.waves(task_id)
        fan_out(client, task_keys(keys, task_id), plan.task_spec(task_id), plan.hosts, plan.job_specs(task_id),
                waves=waves, wave_policy=plan.wave_policy() if waves else None)
    except (FleetschedError, redis.RedisError, OSError) as exc:
        raise NotQueuedError(task_id, _reason(exc)) from None
    with transaction(engine) as session:
        mark_queued(session, task_id)
    return Submitted(task_id=task_id, jobs=len(plan.jobs), plan=plan)
