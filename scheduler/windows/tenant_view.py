"""A customer's view of service windows: the windows assigned to its hosts or to groups that
hold them (``record.tenancy.tenant_windows``), and of each only the assignments it owns.

1. :func:`check_visible`: a window the tenant may not see is not found, as one that does not
   exist (the same message);
2. :func:`scoped_rows`, :func:`scoped_window`: ``windows list``'s rows and ``windows show``'s
   answer with only the tenant's assignments (its hosts, the groups that hold them): another
   customer's host names never reach it.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.errors import NotFoundError
from scheduler.record.models import Group, Window
from scheduler.record.tenancy import tenant_groups, tenant_hosts, tenant_windows

__all__ = ["check_visible", "scoped_rows", "scoped_window"]


def check_visible(session: Session, name: str, tenant: str) -> None:
    """``NotFoundError`` unless window ``name`` covers one of ``tenant``'s hosts."""
    found = session.execute(sa.select(Window.id).where(
        Window.name == name, Window.id.in_(tenant_windows(tenant)))).first()
    if found is None:
        raise NotFoundError(f"no window named {name!r}", hint="see `fleetsched windows list`")


def _owned(session: Session, tenant: str) -> set[str]:
    """The assignments ``tenant`` may see, as ``_assigned`` spells them."""
    hosts = {f"host:{n}" for n in session.scalars(tenant_hosts(tenant))}
    groups = {f"group:{n}" for n in session.scalars(
        sa.select(Group.name).where(Group.id.in_(tenant_groups(tenant))))}
    return hosts | groups


def scoped_rows(session: Session, tenant: str, rows: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:
    """``windows list`` rows with only ``tenant``'s assignments."""
    owned = _owned(session, tenant)
    return [{**r, "assigned": ", ".join(a for a in r["assigned"].split(", ") if a in owned)}
            for r in rows]


def scoped_window(session: Session, tenant: str, info: dict[str, Any]) -> dict[str, Any]:
    """``windows show``'s answer with only ``tenant``'s assignments."""
    owned = _owned(session, tenant)
    return {**info, "assigned": [a for a in info["assigned"] if a in owned]}
