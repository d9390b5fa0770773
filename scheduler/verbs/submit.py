"""``submit``: plan a task request, and record and queue it unless it is a dry run.

1. ``plan_task`` checks the request against the actions and the inventory and writes nothing;
2. a dry run returns the plan; otherwise ``confirm`` (the caller's, e.g. a terminal prompt for a
   fleet-wide task) may still decline by raising;
3. ``scheduler.submission.submit`` connects to Redis first (a Redis that may evict keys or has
   another shard count refuses the task unrecorded), records the task as the principal's and
   queues it; an unreachable Redis is ``NotQueuedError`` after the record.

With an idempotency key (``request_key``) the principal used before for the same request, the
first task comes back (``Submission.repeat``) before any planning, and nothing is recorded or
queued again; the same key with another request is a ``ConflictError``
(``scheduler.submission.repeats``).

``worker_presence`` says whether a live worker serves the queue (else the task waits).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduler.errors import FleetschedError
from scheduler.principal import Principal
from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    from scheduler.submission.repeats import Repeat
    from scheduler.submission.submit import Plan, TaskRequest

__all__ = ["Presence", "Submission", "submit", "worker_presence"]


@dataclass(frozen=True)
class Submission:
    """The plan, and unless it was a dry run the task id and its number of jobs. A repeat
    (``repeat`` set) may have no plan: it was found before planning."""

    plan: Plan | None
    task_id: int | None = None
    jobs: int = 0
    operator: str = ""
    repeat: Repeat | None = None


def submit(stores: Stores, principal: Principal, request: TaskRequest, *,
           dry_run: bool = False, confirm: Callable[[Plan], None] | None = None,
           request_key: str | None = None) -> Submission:
    """Plan ``request``; unless ``dry_run``, let ``confirm`` see the plan, then record and queue
    the task as ``principal``'s. ``request_key``: an idempotency key (see above)."""
    from scheduler.record.session import transaction
    from scheduler.submission.repeats import check_key, fingerprint, first_of
    from scheduler.submission.submit import plan_task
    from scheduler.submission.submit import submit as run_submit

    if request_key is not None:
        check_key(request_key)
    with stores.database() as engine:
        with transaction(engine, commit=False) as session:
            if request_key is not None and not dry_run:
                first = first_of(session, principal.name, request_key, fingerprint(request))
                if first is not None:
                    return Submission(plan=None, task_id=first.task_id, jobs=first.jobs,
                                      operator=principal.name, repeat=first)
            plan = plan_task(session, request, operator=principal)
        if dry_run:
            return Submission(plan=plan, operator=principal.name)
        if confirm is not None:
            confirm(plan)
        done = run_submit(engine, stores.connect, request, operator=principal.name,
                          keys=stores.shards, plan=plan, request_key=request_key)
    return Submission(plan=plan, task_id=done.task_id, jobs=done.jobs, operator=principal.name,
                      repeat=done.repeat)


@dataclass(frozen=True)
class Presence:
    """Whether a live worker serves the queue; ``last_seen_s``: how long ago the last one that
    did was seen (None when none ever registered)."""

    live: bool
    last_seen_s: float | None = None


def worker_presence(stores: Stores) -> Presence | None:
    """The queue's workers as their heartbeats say; None when Redis cannot tell now."""
    from scheduler.queue.presence import read_workers

    try:
        client = stores.connect()
        try:
            workers = read_workers(client, stores.settings.queue_prefix)
        finally:
            client.close()
    except FleetschedError:
        return None
    if any(not w["stale"] for w in workers):
        return Presence(live=True)
    return Presence(live=False,
                    last_seen_s=min(w["age_s"] for w in workers) if workers else None)
