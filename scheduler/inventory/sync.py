"""Syncing a resolved inventory into the SQL hosts, groups and memberships: the import.

Semantics (docs/guides/inventory.md says the same for operators):

1. hosts and groups are matched by name; a host in the source is added if new, updated if any
   of address, port, user, vars, tenant or its direct groups differ, and then belongs to this source
   (``hosts.source = "inventory:<absolute path>"``), even if it came from elsewhere before;
2. a group the source declares is added if new; its vars and child groups are set to the
   source's, and it belongs to this source;
3. an imported host's memberships are exactly its groups in the source; other hosts'
   memberships are left alone;
4. ``prune``: hosts and groups that belong to *this* source and are no longer in it are
   removed. Hosts added by hand (``source = "cli"``) or by another inventory file are never
   pruned. Without ``prune`` they are kept and counted as ``left``;
5. the whole import is one transaction, recorded as one ``import`` event (operator, source,
   counts; never a variable's value). ``dry_run`` computes the same plan and writes nothing;
6. each imported host's ``tenant`` is the customer its groups name (``fleetsched_tenant``,
   ``scheduler.inventory.resolve``; a host two tenants reach refuses the whole file before
   anything is written), None for the team's; ``SyncPlan.tenants`` counts them per tenant.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.inventory.resolve import HostRecord, Resolved
from scheduler.principal import Principal
from scheduler.record.audit import record_event
from scheduler.record.models import Group, Host, group_children, group_hosts
from scheduler.record.types import utcnow

HOST_FIELDS = ("address", "port", "user", "vars", "groups", "tenant")
CHUNK = 500


def source_id(path: str | os.PathLike[str]) -> str:
    """``inventory:<absolute path>``, shortened with a hash past the column's 255 characters."""
    sid = "inventory:" + os.path.abspath(os.fspath(path))
    if len(sid) > 255:
        digest = hashlib.sha256(sid.encode()).hexdigest()[:16]
        sid = sid[:200] + "…" + digest
    return sid



@dataclass(frozen=True)
class HostChange:
    """A host whose stored record differs from the source: field -> (stored, new)."""

    name: str
    changes: dict[str, tuple[Any, Any]]


@dataclass
class SyncPlan:
    """What an import changes (or, for a dry run, would change)."""

    source: str
    added: list[HostRecord] = field(default_factory=list)
    updated: list[HostChange] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # left the source, kept (no prune)
    unchanged: int = 0
    groups_added: list[str] = field(default_factory=list)
    groups_updated: list[str] = field(default_factory=list)
    # an updated group's changes, field ("vars", "children", "source") -> (stored, new)
    group_changes: dict[str, dict[str, tuple[Any, Any]]] = field(default_factory=dict)
    groups_removed: list[str] = field(default_factory=list)
    skipped_secrets: list[str] = field(default_factory=list)
    tenants: dict[str, int] = field(default_factory=dict)  # the source's hosts per customer

    def counts(self) -> dict[str, int]:
        return {"added": len(self.added), "updated": len(self.updated),
                "removed": len(self.removed), "left": len(self.left),
                "unchanged": self.unchanged, "groups_added": len(self.groups_added),
                "groups_updated": len(self.groups_updated),
                "groups_removed": len(self.groups_removed)}

    @property
    def changes_anything(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.groups_added
                    or self.groups_updated or self.groups_removed)


@dataclass
class _Stored:
    hosts: dict[str, dict[str, Any]]  # name -> {id, address, port, user, vars, source, groups}
    groups: dict[str, dict[str, Any]]  # name -> {id, vars, source, children}


def _chunks(items: list[Any], size: int = CHUNK) -> Iterable[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


def _load(session: Session) -> _Stored:
    h, g = Host.__table__, Group.__table__
    gname = {row.id: row.name for row in session.execute(sa.select(g.c.id, g.c.name))}
    groups = {
        row.name: {"id": row.id, "vars": row.vars or {}, "source": row.source, "children": set()}
        for row in session.execute(sa.select(g.c.id, g.c.name, g.c.vars, g.c.source))
    }
    for parent, child in session.execute(sa.select(group_children.c.parent_id,
                                                   group_children.c.child_id)):
        groups[gname[parent]]["children"].add(gname[child])
    hosts: dict[str, dict[str, Any]] = {}
    hname: dict[int, str] = {}
    for row in session.execute(sa.select(h.c.id, h.c.name, h.c.address, h.c.port, h.c.user,
                                         h.c.vars, h.c.source, h.c.tenant)):
        hname[row.id] = row.name
        hosts[row.name] = {"id": row.id, "address": row.address, "port": row.port,
                           "user": row.user, "vars": row.vars or {}, "source": row.source,
                           "tenant": row.tenant, "groups": set()}
    for group_id, host_id in session.execute(sa.select(group_hosts.c.group_id,
                                                       group_hosts.c.host_id)):
        hosts[hname[host_id]]["groups"].add(gname[group_id])
    return _Stored(hosts, groups)


def _host_changes(stored: dict[str, Any], new: HostRecord) -> dict[str, tuple[Any, Any]]:
    out: dict[str, tuple[Any, Any]] = {}
    for name in HOST_FIELDS:
        old = stored[name]
        value: Any = getattr(new, name)
        if name == "groups":
            old, value = sorted(old), sorted(value)
        if old != value:
            out[name] = (old, value)
    return out


def plan(session: Session, resolved: Resolved, source: str, *, prune: bool) -> SyncPlan:
    """Compare the stored hosts and groups with ``resolved``; change nothing."""
    return _plan(_load(session), resolved, source, prune=prune)


def _plan(stored: _Stored, resolved: Resolved, source: str, *, prune: bool) -> SyncPlan:
    out = SyncPlan(source=source, skipped_secrets=list(resolved.skipped_secrets))
    for name, record in resolved.hosts.items():
        if record.tenant is not None:
            out.tenants[record.tenant] = out.tenants.get(record.tenant, 0) + 1
        current = stored.hosts.get(name)
        if current is None:
            out.added.append(record)
            continue
        changes = _host_changes(current, record)
        if current["source"] != source:
            changes["source"] = (current["source"], source)
        if changes:
            out.updated.append(HostChange(name, changes))
        else:
            out.unchanged += 1
    gone = sorted(n for n, h in stored.hosts.items()
                  if h["source"] == source and n not in resolved.hosts)
    (out.removed if prune else out.left).extend(gone)
    for name, group in resolved.groups.items():
        current = stored.groups.get(name)
        if current is None:
            out.groups_added.append(name)
        else:
            changes = {k: (old, new) for k, old, new in (
                ("vars", current["vars"], group.vars),
                ("children", sorted(current["children"]), sorted(group.children)),
                ("source", current["source"], source)) if old != new}
            if changes:
                out.groups_updated.append(name)
                out.group_changes[name] = changes
    if prune:
        out.groups_removed = sorted(n for n, g in stored.groups.items()
                                    if g["source"] == source and n not in resolved.groups)
    return out


def _ids(session: Session, table: sa.Table, names: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for chunk in _chunks(sorted(set(names))):
        for row in session.execute(sa.select(table.c.name, table.c.id)
                                   .where(table.c.name.in_(chunk))):
            out[row.name] = row.id
    return out


def _delete_where_in(session: Session, table: sa.Table, column: sa.Column[Any],
                     values: list[int]) -> None:
    for chunk in _chunks(values):
        session.execute(sa.delete(table).where(column.in_(chunk)))


def _apply_groups(session: Session, resolved: Resolved, result: SyncPlan) -> dict[str, int]:
    g = Group.__table__
    now = utcnow()
    added = [{"name": n, "vars": resolved.groups[n].vars, "source": result.source,
              "created_at": now, "updated_at": now} for n in result.groups_added]
    for chunk in _chunks(added):
        session.execute(sa.insert(g), chunk)
    ids = _ids(session, g, resolved.groups)
    updated = [{"b_id": ids[n], "b_vars": resolved.groups[n].vars, "b_source": result.source,
                "b_now": now} for n in result.groups_updated]
    if updated:
        session.execute(sa.update(g).where(g.c.id == sa.bindparam("b_id")).values(
            vars=sa.bindparam("b_vars"), source=sa.bindparam("b_source"),
            updated_at=sa.bindparam("b_now")), updated)
    touched = result.groups_added + result.groups_updated
    _delete_where_in(session, group_children, group_children.c.parent_id,
                     [ids[n] for n in touched])
    edges = [{"parent_id": ids[n], "child_id": ids[c]}
             for n in touched for c in resolved.groups[n].children]
    for chunk in _chunks(edges):
        session.execute(sa.insert(group_children), chunk)
    return ids


def _apply_hosts(session: Session, resolved: Resolved, result: SyncPlan,
                 group_ids: dict[str, int]) -> None:
    h = Host.__table__
    now = utcnow()

    def row(r: HostRecord) -> dict[str, Any]:
        return {"address": r.address, "port": r.port, "user": r.user, "vars": r.vars,
                "source": result.source, "tenant": r.tenant}

    added = [{"name": r.name, **row(r), "created_at": now, "updated_at": now}
             for r in result.added]
    for chunk in _chunks(added):
        session.execute(sa.insert(h), chunk)
    names = [r.name for r in result.added] + [c.name for c in result.updated]
    ids = _ids(session, h, names)
    updated = [{"b_id": ids[c.name], "b_now": now,
                **{f"b_{k}": v for k, v in row(resolved.hosts[c.name]).items()}}
               for c in result.updated]
    if updated:
        session.execute(sa.update(h).where(h.c.id == sa.bindparam("b_id")).values(
            address=sa.bindparam("b_address"), port=sa.bindparam("b_port"),
            user=sa.bindparam("b_user"), vars=sa.bindparam("b_vars"),
            source=sa.bindparam("b_source"), tenant=sa.bindparam("b_tenant"),
            updated_at=sa.bindparam("b_now")), updated)
    regroup = [r.name for r in result.added] + [
        c.name for c in result.updated if "groups" in c.changes]
    _delete_where_in(session, group_hosts, group_hosts.c.host_id, [ids[n] for n in regroup])
    members = [{"group_id": group_ids[g], "host_id": ids[n]}
               for n in regroup for g in resolved.hosts[n].groups]
    for chunk in _chunks(members):
        session.execute(sa.insert(group_hosts), chunk)


def _prune(session: Session, result: SyncPlan) -> None:
    h, g = Host.__table__, Group.__table__
    host_ids = list(_ids(session, h, result.removed).values())
    _delete_where_in(session, group_hosts, group_hosts.c.host_id, host_ids)
    _delete_where_in(session, h, h.c.id, host_ids)
    group_ids = list(_ids(session, g, result.groups_removed).values())
    _delete_where_in(session, group_hosts, group_hosts.c.group_id, group_ids)
    _delete_where_in(session, group_children, group_children.c.parent_id, group_ids)
    _delete_where_in(session, group_children, group_children.c.child_id, group_ids)
    _delete_where_in(session, g, g.c.id, group_ids)



def apply(session: Session, resolved: Resolved, result: SyncPlan, *, operator: Principal | str,
          path: str, fmt: str, prune: bool) -> None:
    """Write ``result`` (from :func:`plan` in the same transaction) and its ``import`` event."""
    group_ids = _apply_groups(session, resolved, result)
    _apply_hosts(session, resolved, result, group_ids)
    if prune:
        _prune(session, result)
    record_event(session, "import", operator=operator, data={
        "source": path, "format": fmt, "prune": prune, **result.counts(),
        "skipped_secrets": len(result.skipped_secrets), "tenants": dict(sorted(
            result.tenants.items()))})


__all__ = ["HOST_FIELDS", "HostChange", "SyncPlan", "apply", "plan",
           "source_id"]
