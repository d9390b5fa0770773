"""A customer's view of service windows: the windows assigned to its hosts or to groups that
hold them (``record.tenancy.tenant_windows``), and of each only the assignments it owns.

1. :func:`check_visible`: a window the tenant may not see is not found, as one that does not
   exist (the same message);
2. :func:`scoped_rows`, :func:`scoped_window`: ``windows list``'s rows and ``windows show``'s
   answer with only the tenant's assignments (its hosts, the groups that hold them), and of
   the approvals only its own party's decisions and state (other parties are "others"):
   another customer's host names, decisions and comments never reach it.
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


def _approval(info: dict[str, Any], tenant: str) -> str:
    """An approval line as ``tenant`` may read it: its own party named, the others not."""
    own = f"customer {tenant}"
    if not info["pending"] and not info["denied"]:
        return str(info["approval"])  # approved, not required: no party is named
    said = (["DENIED by you"] if own in info["denied"] else []) + \
        (["PENDING your approval"] if own in info["pending"] else [])
    if any(p != own for p in info["pending"] + info["denied"]):
        said.append("awaiting others")
    return "; ".join(said)


def scoped_rows(session: Session, tenant: str, rows: list[dict[str, Any]]
                ) -> list[dict[str, Any]]:
    """``windows list`` rows with only ``tenant``'s assignments and approval."""
    owned = _owned(session, tenant)
    return [{**r, "assigned": ", ".join(a for a in r["assigned"].split(", ") if a in owned),
             "approval": _approval(r, tenant),
             "pending": [p for p in r["pending"] if p == f"customer {tenant}"],
             "denied": [p for p in r["denied"] if p == f"customer {tenant}"]} for r in rows]


def scoped_window(session: Session, tenant: str, info: dict[str, Any]) -> dict[str, Any]:
    """``windows show``'s answer with only ``tenant``'s assignments and decisions."""
    owned = _owned(session, tenant)
    own = f"customer {tenant}"
    scoped = {**info, "assigned": [a for a in info["assigned"] if a in owned]}
    if "parties" in info:
        scoped.update(
            parties=[p for p in info["parties"] if p == own],
            pending=[p for p in info["pending"] if p == own],
            denied=[p for p in info["denied"] if p == own],
            others_pending=any(p != own for p in info["pending"] + info["denied"]),
            decisions=[d for d in info["decisions"] if d["party"] == own],
            approval=_approval(info, tenant))
    return scoped
