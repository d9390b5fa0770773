"""A submitted task's verbs: list, show, a page of its jobs (``jobs``), output, one job's
attempts (``job``), and the controls (pause, resume, cancel, continue, retry-failed,
reprioritize).

1. Each control opens the record, then the queue of the task's shard, and hands both to
   ``scheduler.submission.control`` (or ``rollout.continue_rollout``), which checks the task,
   makes the transition and records it with the principal's name before it returns.
2. ``show`` reads the live counters from Redis where it answers (a ``note`` says when not),
   then the record; ``output`` reads the record's last attempt of every job.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from scheduler.errors import FleetschedError, ValidationError
from scheduler.principal import Principal
from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    from scheduler.reports.attempts import JobView

__all__ = ["CONTROLS", "TaskChange", "cancel", "continue_", "control", "job", "jobs", "list_",
           "output", "pause", "reprioritize", "resume", "retry_failed", "show", "waves"]

Note = Callable[[str], None]
CONTROLS = ("pause", "resume", "cancel", "continue", "retry-failed", "reprioritize")


@dataclass(frozen=True)
class TaskChange:
    """What a control verb did: ``count`` jobs held, released, cancelled, queued again or moved
    (``continue``: the wave it passed); the task's ``state`` after; ``by`` whom."""

    task_id: int
    verb: str
    count: int
    state: str
    by: str
    priority: str | None = None  # reprioritize: the class moved to


def control(stores: Stores, principal: Principal, task_id: int, verb: str,
            priority: str | None = None) -> TaskChange:
    """One of :data:`CONTROLS` on task ``task_id``, recorded as ``principal``'s."""
    from scheduler.submission import control as ctl
    from scheduler.submission import rollout

    fn: Callable[..., Any] = {
        "continue": rollout.continue_rollout, "pause": ctl.pause, "resume": ctl.resume,
        "cancel": ctl.cancel, "retry-failed": ctl.retry_failed,
        "reprioritize": ctl.reprioritize}[verb]
    extra = (priority,) if verb == "reprioritize" else ()
    with stores.database() as engine, stores.queue(task_id) as queue:
        result = fn(engine, queue, task_id, *extra, principal)
    return TaskChange(task_id=task_id, verb=verb, count=result.count, state=result.state,
                      by=principal.name, priority=priority)


def pause(stores: Stores, principal: Principal, task_id: int) -> TaskChange:
    """Hold the task's pending jobs, in order; running jobs finish."""
    return control(stores, principal, task_id, "pause")


def resume(stores: Stores, principal: Principal, task_id: int) -> TaskChange:
    """Release a paused task's jobs in their order."""
    return control(stores, principal, task_id, "resume")


def cancel(stores: Stores, principal: Principal, task_id: int) -> TaskChange:
    """Cancel the jobs that have not started; running ones finish."""
    return control(stores, principal, task_id, "cancel")


def continue_(stores: Stores, principal: Principal, task_id: int) -> TaskChange:
    """Pass a rollout's gate, or go on with a stopped one."""
    return control(stores, principal, task_id, "continue")


def retry_failed(stores: Stores, principal: Principal, task_id: int) -> TaskChange:
    """Queue the task's failed jobs again, each with a new attempt budget."""
    return control(stores, principal, task_id, "retry-failed")


def reprioritize(stores: Stores, principal: Principal, task_id: int,
                 priority: str) -> TaskChange:
    """Move the task's pending jobs to another priority class."""
    return control(stores, principal, task_id, "reprioritize", priority)


def list_(stores: Stores, *, state: str | None = None, operator: str | None = None,
          action: str | None = None, limit: int = 50, offset: int = 0,
          tenant: str | None = None, group: str | None = None,
          since: datetime | None = None, until: datetime | None = None) -> list[dict[str, Any]]:
    """Tasks of the record, newest first, ``limit`` after the newest ``offset``
    (``taskinfo.list_tasks``; ``group``: whose target names that group; ``since``/``until``:
    created then); ``tenant``: that customer's, counted over its jobs
    (``tenant_tasks.list_tenant_tasks``), never filtered by a target it is not shown."""
    from scheduler.submission.taskinfo import list_tasks

    with stores.reading() as session:
        if tenant is not None:
            from scheduler.submission.tenant_tasks import list_tenant_tasks

            if group:
                raise ValidationError("a customer's tasks are not filtered by their target "
                                      "(it may name other customers' groups)")
            return list_tenant_tasks(session, tenant, state=state, operator=operator,
                                     action=action, limit=limit, offset=offset, since=since,
                                     until=until)
        return list_tasks(session, state=state, operator=operator, action=action, limit=limit,
                          offset=offset, group=group, since=since, until=until)


def show(stores: Stores, task_id: int, *, events: bool = False,
         note: Note | None = None, tenant: str | None = None) -> dict[str, Any]:
    """One task as ``taskinfo.show_task`` describes it, with the live counters where Redis
    answers (``note`` gets one warning line when not) and, with ``events``, its event trail.
    ``tenant``: that customer's view, over its jobs only (``tenant_tasks.show_tenant_task``:
    nothing live, no event trail)."""
    if tenant is not None:
        from scheduler.submission.tenant_tasks import show_tenant_task

        with stores.reading() as session:
            return show_tenant_task(session, task_id, tenant)
    live = None
    try:
        with stores.database(), stores.queue(task_id) as queue:
            live = queue.task_state(str(task_id)) or None
    except FleetschedError as exc:
        if note is not None:
            note(f"warning: live counters unavailable ({exc})")
    from scheduler.submission.taskinfo import show_task

    with stores.reading() as session:
        info = show_task(session, task_id, live)
    if events:
        from scheduler.reports import event_trail

        with stores.database() as engine:
            info["events"] = event_trail(engine, task=task_id)
    return info


def jobs(stores: Stores, task_id: int, *, state: str | None = None, limit: int = 100,
         offset: int = 0, tenant: str | None = None, exit_code: int | None = None,
         text: str | None = None) -> list[dict[str, Any]]:
    """One page of task ``task_id``'s jobs in host order, optionally in one job state, with one
    exit code or with ``text`` in their error or output (``taskinfo.task_jobs``: paged and
    filtered in SQL, so a 10,000-host task is read a page at a time); ``tenant``: that
    customer's jobs only."""
    from scheduler.submission.taskinfo import task_jobs

    with stores.reading() as session:
        return task_jobs(session, task_id, state=state, limit=limit, offset=offset,
                         tenant=tenant, exit_code=exit_code, text=text)


def waves(stores: Stores, task_id: int) -> list[dict[str, int]] | None:
    """A rollout's jobs of each wave by state (``taskinfo.wave_counts``; None: not in waves).
    Whole-wave numbers, so none for a customer (``tenant_tasks``)."""
    from scheduler.submission.taskinfo import wave_counts

    with stores.reading() as session:
        return wave_counts(session, task_id)


def output(stores: Stores, task_id: int, *, host: str | None = None, failed: bool = False,
           grep: str | None = None, tenant: str | None = None) -> list[dict[str, Any]]:
    """Every job's output of its last attempt (``reports.attempts.task_outputs``; ``tenant``:
    that customer's jobs, their output where the task shows it to customers)."""
    from scheduler.reports.attempts import task_outputs

    if grep is not None:
        try:
            re.compile(grep)
        except re.error as exc:
            raise ValidationError(f"--grep {grep!r} is not a regular expression: {exc}") from None
    with stores.database() as engine:
        return task_outputs(engine, task_id, host=host, failed=failed, grep=grep,
                            tenant=tenant)


def job(stores: Stores, job_id: str, *, tenant: str | None = None) -> JobView:
    """Job ``job_id`` (``<task>.<n>``): its host and state, every attempt with its steps and
    output, late results refused, and what is known when it was lost
    (``reports.attempts.job_attempts``; ``NotFoundError`` when the record has none).
    ``tenant``: only that customer's job (another's is not found), its output where the task
    shows it to customers (``record.tenancy.output_shown``)."""
    from scheduler.reports.attempts import job_attempts

    with stores.database() as engine:
        return job_attempts(engine, job_id, tenant=tenant)
