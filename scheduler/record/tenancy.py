"""What one customer (a tenant) may see of the record, as SQL conditions the reads add to their
own queries, so a tenant-scoped read fetches that customer's rows and nothing else:

1. its hosts: ``hosts.tenant`` (``fleetsched_tenant`` of the inventory);
2. its jobs: ``jobs.tenant``, the host's tenant when the task was submitted;
3. its tasks: those with at least one job of it (``ix_jobs_tenant_task_id``);
4. its groups: those holding one of its hosts, directly or through child groups (a recursive
   query up the group tree);
5. its windows: those assigned to one of its hosts or to one of its groups, but another
   customer's own freezes (named ``<tenant>:<name>``, :func:`freeze_tenant`): a group may come
   to hold hosts of two customers after one of them froze it, and that freeze stays its own
   (it holds only its hosts' jobs, ``windows.assignment.effective``);
6. its counts (:func:`tenant_counts`): what ``status`` answers a customer;
7. its jobs' output (:func:`output_shown`): their states and exit codes always, their output
   (stdout, stderr, and the error lines, which may quote stderr) only where the task was
   submitted with ``--customer-output``; every read that shows output asks this one rule
   (``tasks output``, ``jobs show``, a task's jobs and failures, the event stream) and says
   ``output_withheld`` where it applied it.

Something a tenant may not see is answered as something that does not exist (``NotFound``),
by the reads themselves: existence does not leak.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.record.models import (
    JOB_FINAL_STATES,
    Host,
    Job,
    Task,
    Window,
    WindowAssignment,
    group_children,
    group_hosts,
)

__all__ = ["freeze_tenant", "output_shown", "tenant_counts", "tenant_groups", "tenant_hosts",
           "tenant_task_ids", "tenant_windows"]

_H, _J, _W, _WA = Host.__table__, Job.__table__, Window.__table__, WindowAssignment.__table__


def freeze_tenant(name: str, tenants: Collection[str]) -> str | None:
    """The customer whose own freeze window ``name`` is: the ``<tenant>`` of a name
    ``<tenant>:<name>`` when it is one of ``tenants`` (``windows.customer_freezes``); None for
    the team's windows."""
    prefix, colon, _rest = name.partition(":")
    return prefix if colon and prefix in tenants else None


def tenant_hosts(tenant: str) -> sa.Select[tuple[str]]:
    """The names of ``tenant``'s hosts."""
    return sa.select(_H.c.name).where(_H.c.tenant == tenant)


def tenant_task_ids(tenant: str) -> sa.Select[tuple[int]]:
    """The ids of the tasks with at least one job of ``tenant`` (an index range scan)."""
    return sa.select(_J.c.task_id).where(_J.c.tenant == tenant)


def tenant_groups(tenant: str) -> sa.Select[tuple[int]]:
    """The ids of the groups that hold one of ``tenant``'s hosts, directly or through their
    child groups."""
    direct = (sa.select(group_hosts.c.group_id.label("id"))
              .join(_H, _H.c.id == group_hosts.c.host_id).where(_H.c.tenant == tenant)
              .cte("tenant_groups", recursive=True))
    parents = sa.select(group_children.c.parent_id).join(
        direct, group_children.c.child_id == direct.c.id)
    tree = direct.union(parents)  # UNION, not UNION ALL: it stops where it was already
    return sa.select(tree.c.id)


def tenant_windows(tenant: str) -> sa.Select[tuple[int]]:
    """The ids of the windows assigned to one of ``tenant``'s hosts or groups."""
    hosts = sa.select(_H.c.id).where(_H.c.tenant == tenant)
    others = _H.alias("others")
    theirs = sa.select(_W.c.id).where(sa.exists().where(  # another customer's own freezes
        others.c.tenant.is_not(None), others.c.tenant != tenant,
        sa.func.substr(_W.c.name, 1, sa.func.length(others.c.tenant) + 1)
        == others.c.tenant + ":"))
    return sa.select(_WA.c.window_id).where(
        sa.or_(_WA.c.host_id.in_(hosts), _WA.c.group_id.in_(tenant_groups(tenant))),
        _WA.c.window_id.not_in(theirs))


def tenant_counts(session: Session, tenant: str) -> dict[str, Any]:
    """``tenant``'s hosts, its tasks (those still running or waiting: ``active_tasks``) and its
    jobs by state, each counted in SQL."""
    mine = _J.c.tenant == tenant
    tasks = sa.func.count(sa.distinct(_J.c.task_id))
    return {
        "tenant": tenant,
        "hosts": session.execute(sa.select(sa.func.count()).select_from(_H)
                                 .where(_H.c.tenant == tenant)).scalar_one(),
        "tasks": session.execute(sa.select(tasks).where(mine)).scalar_one(),
        "active_tasks": session.execute(sa.select(tasks).where(
            mine, _J.c.state.not_in(JOB_FINAL_STATES))).scalar_one(),
        "jobs": dict(sorted(session.execute(sa.select(_J.c.state, sa.func.count()).where(mine)
                                            .group_by(_J.c.state)).all())),
    }


def output_shown(db: Session | sa.Connection, task_id: int, tenant: str | None) -> bool:
    """Whether a reader of ``tenant`` is shown the output of task ``task_id``'s jobs (rule 7):
    the team (``tenant`` None) always; a customer where the task says ``customer_output``."""
    if tenant is None:
        return True
    shown = db.execute(sa.select(Task.customer_output).where(Task.id == task_id)).scalar()
    return bool(shown)
