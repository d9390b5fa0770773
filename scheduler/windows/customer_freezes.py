"""A customer's own freezes: a freeze period a customer declares over its own hosts.

The freeze is named ``<tenant>:<name>`` (window names are one namespace; the prefix, whose
``:`` no tenant name holds, keeps one customer's names from colliding with, or revealing,
another's) and may cover only the
customer's hosts: each host named must be the customer's, and each group must hold hosts and
only the customer's hosts (through its child groups too), or a freeze would stop another
customer's work. A host or group the customer may not see is "not found", as if absent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.errors import NotFoundError, ValidationError
from scheduler.record.models import Group, Host, group_children, group_hosts

__all__ = ["check_owned", "freeze_name"]


def freeze_name(tenant: str | None, name: str) -> str:
    """The stored name of a freeze ``name`` declared by ``tenant`` (the team's: unchanged)."""
    return name if tenant is None else f"{tenant}:{name}"


def _group_hosts(session: Session, group_id: int) -> set[int]:
    children: dict[int, set[int]] = defaultdict(set)
    for parent, child in session.execute(
            sa.select(group_children.c.parent_id, group_children.c.child_id)):
        children[parent].add(child)
    seen, todo, hosts = set(), [group_id], set()
    while todo:
        gid = todo.pop()
        if gid in seen:
            continue
        seen.add(gid)
        hosts.update(session.scalars(sa.select(group_hosts.c.host_id)
                                     .where(group_hosts.c.group_id == gid)))
        todo.extend(children.get(gid, ()))
    return hosts


def check_owned(session: Session, tenant: str | None, hosts: Sequence[str],
                groups: Sequence[str]) -> None:
    """``NotFoundError`` for a host or group that is not there, or that ``tenant`` may not see
    (None: the team, who sees every one); ``ValidationError`` for none given, or a group of a
    customer's that also holds hosts of others."""
    if not hosts and not groups:
        raise ValidationError("a freeze needs hosts or groups", hint="give hosts and/or groups")
    if tenant is None:
        for model, what, names in ((Host, "host", hosts), (Group, "group", groups)):
            for name in names:
                if session.scalars(sa.select(model.id).where(model.name == name)).first() is None:
                    raise NotFoundError(f"no {what} named {name!r}",
                                        hint=f"see `fleetsched {what}s list`")
        return
    for name in hosts:
        owner = session.scalars(sa.select(Host.tenant).where(Host.name == name)).first()
        if owner != tenant:
            raise NotFoundError(f"no host named {name!r}", hint="see your hosts list")
    for name in groups:
        gid = session.scalars(sa.select(Group.id).where(Group.name == name)).first()
        members = _group_hosts(session, gid) if gid is not None else set()
        owners = set(session.scalars(sa.select(Host.tenant).where(Host.id.in_(members)))) \
            if members else set()
        if tenant not in owners:
            raise NotFoundError(f"no group named {name!r}", hint="see your hosts list")
        if owners != {tenant}:
            raise ValidationError(f"group {name!r} holds hosts of others too: a freeze over it "
                                  "would stop their work", hint="name your hosts instead")
