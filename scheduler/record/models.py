"""The SQL system of record: typed SQLAlchemy 2 models of hosts, groups, windows, schedules,
tasks, jobs, saved templates and the append-only event history.

Redis holds the live state; these tables hold the record (docs/architecture.md, "System of
record"). Rules kept here:

1. One ``DeclarativeBase`` with a naming convention, so constraint names are stable across
   dialects and Alembic migrations can name what they drop.
2. Every time is an aware UTC datetime (``UTCDateTime``).
3. ``jobs.host`` and ``events.*`` hold names and ids as text, not foreign keys: the record of a
   job outlives the host row, and the queue may be used without SQL fan-out.
4. ``events.id`` is the Redis stream id (``"<ms>-<seq>"``), so a replayed batch inserts nothing
   twice. Events that do not come from the stream (``reconcile``) use ``"<ms>-L<hex>"``.
5. ``(tasks.schedule_id, tasks.occurrence)`` is unique: a schedule fires each occurrence once.
6. ``notifications.key`` is unique: a cause is notified to a target once, however often the
   recorder folds the events that show it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from scheduler.record.types import JSONDoc, UTCDateTime, json_default, utcnow

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Value sets, also used by check constraints and by the CLI for validation.
WINDOW_KINDS = ("recurring", "oneoff", "freeze")
CATCHUP_POLICIES = ("skip", "latest", "all")
OVERLAP_POLICIES = ("skip", "allow")
PRIORITIES = ("urgent", "normal", "bulk")
TASK_STATES = ("accepted", "active", "paused", "succeeded", "failed", "cancelled", "aborted")
TASK_FINAL_STATES = ("succeeded", "failed", "cancelled", "aborted")
JOB_STATES = ("accepted", "pending", "running", "parked", "held",
              "succeeded", "failed", "lost", "cancelled")
JOB_FINAL_STATES = ("succeeded", "failed", "lost", "cancelled")
NOTIFICATION_STATES = ("pending", "sent", "failed")


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    """The one declarative base of fleetsched's tables."""

    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSONDoc()}


class Timestamped:
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


# ------------------------------------------------------------------------------ hosts, groups


group_hosts = sa.Table(
    "group_hosts",
    Base.metadata,
    sa.Column("group_id", sa.ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("host_id", sa.ForeignKey("hosts.id", ondelete="CASCADE"), primary_key=True,
              index=True),
)
"""Membership: a host in a group."""

group_children = sa.Table(
    "group_children",
    Base.metadata,
    sa.Column("parent_id", sa.ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("child_id", sa.ForeignKey("groups.id", ondelete="CASCADE"), primary_key=True,
              index=True),
    sa.CheckConstraint("parent_id <> child_id", name="not_self"),
)
"""Nesting: every host of ``child`` is also a host of ``parent`` (Ansible ``children``)."""


class Host(Timestamped, Base):
    """One machine of the fleet and how to reach it."""

    __tablename__ = "hosts"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(255), unique=True)
    address: Mapped[str | None] = mapped_column(sa.String(255))  # None: connect to `name`
    port: Mapped[int] = mapped_column(default=22)
    user: Mapped[str | None] = mapped_column(sa.String(64))
    vars: Mapped[dict[str, Any]] = mapped_column(default=json_default)
    # Where the row came from ("inventory:<path>", "cli"): an import may prune only its own.
    source: Mapped[str | None] = mapped_column(sa.String(255))
    # The customer that owns the host (the inventory's `fleetsched_tenant`); None: the team's.
    tenant: Mapped[str | None] = mapped_column(sa.String(255), index=True)

    groups: Mapped[list[Group]] = relationship(
        secondary=group_hosts, back_populates="hosts", order_by="Group.name")

    def __repr__(self) -> str:
        return f"Host({self.name!r})"


class Group(Timestamped, Base):
    """A named set of hosts; may contain other groups."""

    __tablename__ = "groups"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(255), unique=True)
    vars: Mapped[dict[str, Any]] = mapped_column(default=json_default)
    source: Mapped[str | None] = mapped_column(sa.String(255))
    # Most jobs running at once on the group's hosts, across all tasks: "N" or "P%" as the
    # operator gave it (`groups limit`); None: no limit.
    max_busy: Mapped[str | None] = mapped_column(sa.String(16))

    hosts: Mapped[list[Host]] = relationship(
        secondary=group_hosts, back_populates="groups", order_by="Host.name")
    children: Mapped[list[Group]] = relationship(
        secondary=group_children,
        primaryjoin=lambda: Group.id == group_children.c.parent_id,
        secondaryjoin=lambda: Group.id == group_children.c.child_id,
        back_populates="parents",
        order_by="Group.name",
    )
    parents: Mapped[list[Group]] = relationship(
        secondary=group_children,
        primaryjoin=lambda: Group.id == group_children.c.child_id,
        secondaryjoin=lambda: Group.id == group_children.c.parent_id,
        back_populates="children",
        order_by="Group.name",
    )

    def __repr__(self) -> str:
        return f"Group({self.name!r})"


# ----------------------------------------------------------------------------------- windows


class Window(Timestamped, Base):
    """A service window: recurring (RRULE or cron + length), one-off, or a freeze (no work)."""

    __tablename__ = "windows"
    __table_args__ = (
        sa.CheckConstraint(_in("kind", WINDOW_KINDS), name="kind"),
        sa.CheckConstraint("rrule IS NULL OR cron IS NULL", name="one_rule"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(255), unique=True)
    kind: Mapped[str] = mapped_column(sa.String(16))
    rrule: Mapped[str | None] = mapped_column(sa.Text)
    cron: Mapped[str | None] = mapped_column(sa.String(255))
    duration_s: Mapped[int | None]
    end_time: Mapped[str | None] = mapped_column(sa.String(8))  # wall clock "HH:MM" in tz
    tz: Mapped[str] = mapped_column(sa.String(64), default="UTC")
    starts_at: Mapped[datetime | None]  # one-off (and freeze) start; recurring: first opening
    ends_at: Mapped[datetime | None]  # one-off (and freeze) end; recurring: rule ends
    requires_approval: Mapped[bool] = mapped_column(default=False)
    approved_by: Mapped[str | None] = mapped_column(sa.String(255))
    approved_at: Mapped[datetime | None]
    created_by: Mapped[str | None] = mapped_column(sa.String(255))
    description: Mapped[str | None] = mapped_column(sa.Text)
    # The definition's version (rule, zone, length, freezes): every edit bumps it, and an
    # approval holds for the version it names only. ``changed_by`` proposed this version.
    version: Mapped[int] = mapped_column(default=1, server_default="1")
    changed_by: Mapped[str | None] = mapped_column(sa.String(255))

    assignments: Mapped[list[WindowAssignment]] = relationship(
        back_populates="window", cascade="all, delete-orphan")
    approvals: Mapped[list[WindowApproval]] = relationship(
        back_populates="window", cascade="all, delete-orphan", order_by="WindowApproval.id")


class WindowApproval(Base):
    """A customer's (``tenant``) or the team's (None) decision on one version of a window: the
    whole series, or one ``occurrence``; it may expire or be revoked. Append-only but for
    ``revoked_*``: a newer decision supersedes an older one."""

    __tablename__ = "window_approvals"
    __table_args__ = (
        sa.CheckConstraint(_in("decision", ("approved", "denied")), name="decision"),
        sa.Index("ix_window_approvals_window_id_tenant", "window_id", "tenant"),
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    window_id: Mapped[int] = mapped_column(sa.ForeignKey("windows.id", ondelete="CASCADE"))
    tenant: Mapped[str | None] = mapped_column(sa.String(255))
    version: Mapped[int]
    decision: Mapped[str] = mapped_column(sa.String(8))
    occurrence: Mapped[datetime | None]  # None: the whole series
    comment: Mapped[str | None] = mapped_column(sa.Text)
    decided_by: Mapped[str] = mapped_column(sa.String(255))
    via: Mapped[str | None] = mapped_column(sa.String(64))  # how decided_by was authenticated
    source: Mapped[str | None] = mapped_column(sa.String(64))  # the client's address
    decided_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
    revoked_by: Mapped[str | None] = mapped_column(sa.String(255))

    window: Mapped[Window] = relationship(back_populates="approvals")


class Tenant(Base):
    """A customer's settings: whether its hosts' windows need its approval, and whom to tell
    (notification targets, as ``--notify`` takes them). Its hosts say ``tenant`` themselves."""

    __tablename__ = "tenants"

    name: Mapped[str] = mapped_column(sa.String(255), primary_key=True)
    approval_required: Mapped[bool] = mapped_column(default=False)
    contacts: Mapped[list[str]] = mapped_column(JSONDoc, default=list)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class WindowAssignment(Base):
    """A window applies to one host, or to every host of one group."""

    __tablename__ = "window_assignments"
    __table_args__ = (
        sa.CheckConstraint("(host_id IS NULL) <> (group_id IS NULL)", name="host_xor_group"),
        sa.UniqueConstraint("window_id", "host_id"),
        sa.UniqueConstraint("window_id", "group_id"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    window_id: Mapped[int] = mapped_column(sa.ForeignKey("windows.id", ondelete="CASCADE"))
    host_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("hosts.id", ondelete="CASCADE"), index=True)
    group_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("groups.id", ondelete="CASCADE"), index=True)

    window: Mapped[Window] = relationship(back_populates="assignments")
    host: Mapped[Host | None] = relationship()
    group: Mapped[Group | None] = relationship()


# --------------------------------------------------------------------------------- schedules


class Schedule(Timestamped, Base):
    """A recurring task template: cron in a time zone, with catch-up and overlap policies."""

    __tablename__ = "schedules"
    __table_args__ = (
        sa.CheckConstraint(_in("catchup", CATCHUP_POLICIES), name="catchup"),
        sa.CheckConstraint(_in("overlap", OVERLAP_POLICIES), name="overlap"),
    )

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(255), unique=True)
    cron: Mapped[str] = mapped_column(sa.String(255))
    tz: Mapped[str] = mapped_column(sa.String(64), default="UTC")
    action: Mapped[str] = mapped_column(sa.String(64))
    params: Mapped[dict[str, Any]] = mapped_column(default=json_default)
    target: Mapped[str] = mapped_column(sa.Text)
    options: Mapped[dict[str, Any]] = mapped_column(default=json_default)  # task options
    catchup: Mapped[str] = mapped_column(sa.String(8), default="latest")
    catchup_window_s: Mapped[int] = mapped_column(default=3600)
    overlap: Mapped[str] = mapped_column(sa.String(8), default="skip")
    paused: Mapped[bool] = mapped_column(default=False)
    created_by: Mapped[str | None] = mapped_column(sa.String(255))
    last_occurrence: Mapped[datetime | None]  # the latest occurrence that created a task

    tasks: Mapped[list[Task]] = relationship(back_populates="schedule", passive_deletes=True)


# ------------------------------------------------------------------------------ tasks, jobs


class Task(Base):
    """An operator's request: an action on a target with a rollout policy; fans out into jobs."""

    __tablename__ = "tasks"
    __table_args__ = (
        sa.UniqueConstraint("schedule_id", "occurrence"),
        sa.CheckConstraint(_in("state", TASK_STATES), name="state"),
        sa.CheckConstraint(_in("priority", PRIORITIES), name="priority"),
        sa.Index("ix_tasks_state_created_at", "state", "created_at"),
        # A submission's idempotency key, per principal: a repeat finds the first task.
        sa.UniqueConstraint("operator", "request_key"),
        sa.Index("ix_tasks_template_id", "template", "id"),  # a template's last runs
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    name: Mapped[str | None] = mapped_column(sa.String(255))
    action: Mapped[str] = mapped_column(sa.String(64))
    params: Mapped[dict[str, Any]] = mapped_column(default=json_default)  # secret refs unresolved
    executor: Mapped[str | None] = mapped_column(sa.String(32))
    target: Mapped[str] = mapped_column(sa.Text, default="")
    operator: Mapped[str] = mapped_column(sa.String(255), index=True)
    priority: Mapped[str] = mapped_column(sa.String(8), default="normal")
    share: Mapped[str | None] = mapped_column(sa.String(255))  # fair-share key; None = the task
    # Rollout policy (mirrors the queue's TaskSpec).
    max_running: Mapped[int] = mapped_column(default=0)
    max_failures: Mapped[int] = mapped_column(default=0)
    # What max_failures counts: "attempts" (hosts that failed any attempt) or "final" (jobs
    # failed for good; tasks recorded before the column existed).
    count_failures: Mapped[str] = mapped_column(sa.String(8), default="attempts",
                                                server_default="final")
    max_attempts: Mapped[int] = mapped_column(default=3)
    backoff_ms: Mapped[int] = mapped_column(default=1000)
    timeout_s: Mapped[int] = mapped_column(default=3600)
    idempotent: Mapped[bool] = mapped_column(default=True)
    # One job per host at a time across tasks (False: the action or the operator allowed
    # overlap; tasks recorded before the column existed never waited for a host).
    exclusive: Mapped[bool] = mapped_column(default=True, server_default=sa.false())
    # Each host's job waits for its service windows (asked with --in-window, or applied by
    # default for an action that requires windows); ignore_windows: the operator chose to run
    # such an action outside them; break_glass: the operator's reason to run through freezes
    # (None: freezes hold every job). Tasks recorded before the columns existed: false, None.
    in_window: Mapped[bool] = mapped_column(default=False)
    ignore_windows: Mapped[bool] = mapped_column(default=False, server_default=sa.false())
    break_glass: Mapped[str | None] = mapped_column(sa.Text)
    # A customer principal reads its own hosts' job output (stdout, stderr, errors) only where
    # the task says so (scheduler.record.tenancy.output_shown); its states and exit codes always.
    customer_output: Mapped[bool] = mapped_column(default=False, server_default=sa.false())
    start_at: Mapped[datetime | None]  # not before; None = now
    # Notification targets of this task (webhook URLs, mailto:), besides the global ones.
    notify: Mapped[list[str] | None] = mapped_column(JSONDoc)
    # Rollout in waves (scheduler.submission.waves): the spec (sizes, order, pause_ms, gate,
    # check, count, counts), the current wave (1-based), its state and why (the fold writes
    # them from the wave events); all None for a task not rolled out in waves.
    waves: Mapped[dict[str, Any] | None] = mapped_column(JSONDoc)
    wave: Mapped[int | None]
    wave_state: Mapped[str | None] = mapped_column(sa.String(16))
    wave_why: Mapped[str | None] = mapped_column(sa.Text)

    state: Mapped[str] = mapped_column(sa.String(16), default="accepted")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    request_key: Mapped[str | None] = mapped_column(sa.String(160))  # Idempotency-Key
    # The saved job template (and its version) the task was run from; None: submitted as is.
    template: Mapped[str | None] = mapped_column(sa.String(64))
    template_version: Mapped[int | None]

    schedule_id: Mapped[int | None] = mapped_column(
        sa.ForeignKey("schedules.id", ondelete="SET NULL"))
    occurrence: Mapped[datetime | None]

    # Summary counters, kept by the recorder from the job rows.
    total: Mapped[int] = mapped_column(default=0)
    running: Mapped[int] = mapped_column(default=0)
    succeeded: Mapped[int] = mapped_column(default=0)
    failed: Mapped[int] = mapped_column(default=0)
    lost: Mapped[int] = mapped_column(default=0)
    cancelled: Mapped[int] = mapped_column(default=0)
    # Position (ms * 10**6 + seq) of the newest stream event applied to this row.
    last_event_pos: Mapped[int | None] = mapped_column(sa.BigInteger)

    schedule: Mapped[Schedule | None] = relationship(back_populates="tasks")
    jobs: Mapped[list[Job]] = relationship(
        back_populates="task", passive_deletes=True, order_by="Job.seq")


class Job(Base):
    """One task on one host: the unit that is queued, claimed, run and acknowledged."""

    __tablename__ = "jobs"
    __table_args__ = (
        sa.CheckConstraint(_in("state", JOB_STATES), name="state"),
        sa.UniqueConstraint("task_id", "seq"),
        sa.Index("ix_jobs_task_id_state", "task_id", "state"),
        sa.Index("ix_jobs_host_finished_at", "host", "finished_at"),
        sa.Index("ix_jobs_state_finished_at", "state", "finished_at"),
        sa.Index("ix_jobs_finished_at", "finished_at"),  # report --since
        sa.Index("ix_jobs_tenant_task_id", "tenant", "task_id"),  # a customer's tasks
    )

    id: Mapped[str] = mapped_column(sa.String(80), primary_key=True)  # "<task id>.<n>"
    task_id: Mapped[int] = mapped_column(sa.ForeignKey("tasks.id", ondelete="CASCADE"))
    seq: Mapped[int]  # n: the host's index in the task's sorted host list
    host: Mapped[str] = mapped_column(sa.String(255))
    tenant: Mapped[str | None] = mapped_column(sa.String(255))  # the host's, when submitted
    state: Mapped[str] = mapped_column(sa.String(16), default="accepted")
    attempts: Mapped[int] = mapped_column(default=0)
    due_at: Mapped[datetime | None]
    window: Mapped[str | None] = mapped_column(sa.String(255))
    started_at: Mapped[datetime | None]
    finished_at: Mapped[datetime | None]
    worker: Mapped[str | None] = mapped_column(sa.String(255))
    token: Mapped[int | None] = mapped_column(sa.BigInteger)
    exit_code: Mapped[int | None]
    duration_ms: Mapped[int | None]
    output_tail: Mapped[str | None] = mapped_column(sa.Text)
    error: Mapped[str | None] = mapped_column(sa.Text)
    last_event_pos: Mapped[int | None] = mapped_column(sa.BigInteger)

    task: Mapped[Task] = relationship(back_populates="jobs")


# ------------------------------------------------------------------------------------ events


class Event(Base):
    """One audit record of a state change; append-only."""

    __tablename__ = "events"
    # The operator queries' ways in (docs/architecture.md, "System of record"): by task, by
    # host, by job, by kind (a task's control events, retries, failures; the schedule events,
    # task_id NULL), by time (prune). Every index costs each recorded event a B-tree insert,
    # so there are no more than these.
    __table_args__ = (
        sa.Index("ix_events_task_id_ts", "task_id", "ts"),
        sa.Index("ix_events_host_ts", "host", "ts"),
        sa.Index("ix_events_job_id_ts", "job_id", "ts"),
        sa.Index("ix_events_kind_task_id_ts", "kind", "task_id", "ts"),
    )

    id: Mapped[str] = mapped_column(sa.String(40), primary_key=True)  # Redis stream id
    ts: Mapped[datetime] = mapped_column(index=True)
    kind: Mapped[str] = mapped_column(sa.String(24))
    task_id: Mapped[str | None] = mapped_column(sa.String(64))
    job_id: Mapped[str | None] = mapped_column(sa.String(80))
    host: Mapped[str | None] = mapped_column(sa.String(255))
    worker: Mapped[str | None] = mapped_column(sa.String(255))
    operator: Mapped[str | None] = mapped_column(sa.String(255))
    data: Mapped[dict[str, Any]] = mapped_column(default=json_default)


# ----------------------------------------------------------------------------- notifications


class Notification(Base):
    """The outbox: one message to one target, written in the recorder's transaction that saw
    its cause, then delivered (and retried) by ``scheduler.notify.outbox``."""

    __tablename__ = "notifications"
    __table_args__ = (
        sa.CheckConstraint(_in("state", NOTIFICATION_STATES), name="state"),
        sa.Index("ix_notifications_state_next_at", "state", "next_at"),
    )

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    # What caused it and for whom, e.g. "failed:42:1700000000000 <target hash>": a replayed
    # batch finds the key taken and writes nothing (models rule 6).
    key: Mapped[str] = mapped_column(sa.String(160), unique=True)
    kind: Mapped[str] = mapped_column(sa.String(16))  # failed, aborted, lost, missed, approval
    target: Mapped[str] = mapped_column(sa.Text)  # as configured: may hold a token
    task_id: Mapped[str | None] = mapped_column(sa.String(64))
    schedule: Mapped[str | None] = mapped_column(sa.String(255))
    payload: Mapped[dict[str, Any]] = mapped_column(default=json_default)
    state: Mapped[str] = mapped_column(sa.String(8), default="pending")
    attempts: Mapped[int] = mapped_column(default=0)
    next_at: Mapped[datetime] = mapped_column(default=utcnow)  # due, or the claim's lease end
    last_error: Mapped[str | None] = mapped_column(sa.Text)  # redacted, one line
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    sent_at: Mapped[datetime | None]


# ------------------------------------------------------------------------------ queue epoch


class QueueEpoch(Base):
    """The identity of a queue (``scheduler.record.epoch``): the random id its Redis holds at
    ``{<prefix>}:epoch``, recorded once, by queue prefix. Redis without it, or with another,
    lost or replaced its data."""

    __tablename__ = "queue_epochs"

    queue: Mapped[str] = mapped_column(sa.String(64), primary_key=True)  # queue_prefix
    epoch: Mapped[str] = mapped_column(sa.String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# ------------------------------------------------------------------------- saved templates


class Template(Timestamped, Base):
    """A saved job template (``scheduler.templates``): a name, the customer it belongs to
    (None: the team's), the roles that may run it (empty: every role that may run templates)
    and its versions, the newest being ``version``."""

    __tablename__ = "templates"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(sa.String(64), unique=True)
    tenant: Mapped[str | None] = mapped_column(sa.String(255), index=True)
    run_roles: Mapped[list[str]] = mapped_column(JSONDoc, default=list)
    description: Mapped[str | None] = mapped_column(sa.Text)
    version: Mapped[int] = mapped_column(default=1)  # the newest
    created_by: Mapped[str | None] = mapped_column(sa.String(255))


class TemplateVersion(Base):
    """One version of a template: the template file as given (a task file with ``{param.*}``
    placeholders and its ``parameters``), its declared parameters, and the SHA-256 of what it
    says (comments and layout aside), which tells an unchanged file from a new version."""

    __tablename__ = "template_versions"
    __table_args__ = (sa.UniqueConstraint("template_id", "version"),)

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    template_id: Mapped[int] = mapped_column(sa.ForeignKey("templates.id", ondelete="CASCADE"))
    version: Mapped[int]
    text: Mapped[str] = mapped_column(sa.Text)
    parameters: Mapped[list[dict[str, Any]]] = mapped_column(JSONDoc, default=list)
    digest: Mapped[str] = mapped_column(sa.String(64))
    created_by: Mapped[str | None] = mapped_column(sa.String(255))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


# -------------------------------------------------------------------------------- API tokens


class ApiToken(Base):
    """A bearer token of the HTTP API (``scheduler.access.tokens``): who it acts as
    (``owner``), with which ``role`` and ``tenant``. The token itself is shown once and never
    stored: ``lookup`` finds the row, ``hash`` (SHA-256 of the whole token) proves it."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(sa.String(255))
    owner: Mapped[str] = mapped_column(sa.String(255))  # recorded as the events' operator
    role: Mapped[str] = mapped_column(sa.String(32))
    tenant: Mapped[str | None] = mapped_column(sa.String(255))
    lookup: Mapped[str] = mapped_column(sa.String(32), unique=True)
    hash: Mapped[str] = mapped_column(sa.String(64))
    created_by: Mapped[str | None] = mapped_column(sa.String(255))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None]
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


__all__ = [
    "ApiToken", "Base", "Event", "Group", "Host", "Job", "Notification", "QueueEpoch",
    "Schedule", "Task", "Template", "TemplateVersion", "Tenant", "Window", "WindowApproval",
    "WindowAssignment",
    "group_children", "group_hosts", "NAMING_CONVENTION", "WINDOW_KINDS", "CATCHUP_POLICIES",
    "OVERLAP_POLICIES", "PRIORITIES", "TASK_STATES", "TASK_FINAL_STATES", "JOB_STATES",
    "JOB_FINAL_STATES", "NOTIFICATION_STATES",
]
