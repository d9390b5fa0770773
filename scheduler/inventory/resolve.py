"""From a parsed ``Inventory`` to the host and group records fleetsched stores.

Variable precedence (the subset of Ansible's rules implemented, lowest first):

1. ``all`` group vars;
2. ``ungrouped`` vars, for hosts in no other group;
3. the vars of every group the host is in, directly or through ``children``, ordered by
   depth (a child group is deeper than its parents, so it wins over them), then by
   ``ansible_group_priority`` (default 1, higher wins), then by name (later wins);
4. the host's own vars win over all group vars.

Then the connection variables become columns: ``ansible_host`` (or ``ansible_ssh_host``) is
the address, ``ansible_port`` (``ansible_ssh_port``) the port (default 22), ``ansible_user``
(``ansible_ssh_user``) the user; each is validated, and an error names where it was set.
Variables that hold secrets (``validate.is_secret_var``, at any depth) are skipped, and
credentials inside values masked (``validate.public_vars``), reported by name.
A loop of child groups is an error.

A host's customer (``tenant``) is the ``fleetsched_tenant`` variable of the groups it is in
(directly or through ``children``, ``all`` included) or of the host itself: a host is in one
tenant at most, so a host that two different values reach is an error naming both and where
each was set, not the precedence's winner (the variable stays among the vars, so an export
carries it back).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from scheduler.inventory import validate
from scheduler.inventory.model import (
    CONNECTION_VARS,
    IMPLICIT_GROUPS,
    Inventory,
    InventoryError,
    Location,
)

DEFAULT_PORT = 22
TENANT_VAR = "fleetsched_tenant"


@dataclass(frozen=True)
class HostRecord:
    """A host as stored: how to reach it, its direct groups, its effective vars."""

    name: str
    address: str | None = None
    port: int = DEFAULT_PORT
    user: str | None = None
    groups: tuple[str, ...] = ()
    vars: dict[str, Any] = field(default_factory=dict)
    tenant: str | None = None  # the customer that owns it (``fleetsched_tenant``)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "port": self.port,
                "user": self.user, "groups": list(self.groups), "vars": self.vars,
                "tenant": self.tenant}


@dataclass(frozen=True)
class GroupRecord:
    """A group as stored: its own vars and its direct child groups."""

    name: str
    vars: dict[str, Any] = field(default_factory=dict)
    children: tuple[str, ...] = ()


@dataclass
class Resolved:
    """The records an inventory resolves to, and the secret variables it skipped."""

    source: str
    hosts: dict[str, HostRecord]
    groups: dict[str, GroupRecord]
    skipped_secrets: list[str]


def _depths(inv: Inventory) -> dict[str, int]:
    """Each group's depth: the longest chain of parents above it (``all`` is 0, top groups 1).

    Iterative (Kahn's topological order), so a long chain of groups cannot exhaust the stack;
    groups left over at the end are on a loop, which is an error."""
    indegree = {name: 0 for name in inv.groups}
    for group in inv.groups.values():
        for child in group.children:
            indegree[child] += 1
    depth = {name: 1 for name in inv.groups}
    depth["all"] = 0
    ready = [name for name, n in indegree.items() if n == 0]
    while ready:
        name = ready.pop()
        for child in inv.groups[name].children:
            depth[child] = max(depth[child], depth[name] + 1)
            indegree[child] -= 1
            if indegree[child] == 0:
                ready.append(child)
    stuck = {name for name, n in indegree.items() if n > 0}
    if stuck:
        # Every stuck group has a stuck parent; walking up the parents must close a loop.
        up: dict[str, list[str]] = {name: [] for name in stuck}
        for parent in sorted(stuck):
            for child in inv.groups[parent].children:
                if child in stuck:
                    up[child].append(parent)
        path = [min(stuck)]
        while up[path[-1]][0] not in path:
            path.append(up[path[-1]][0])
        loop = path[path.index(up[path[-1]][0]):] + [up[path[-1]][0]]
        loop.reverse()
        raise InventoryError(inv.groups[loop[0]].where,
                             f"child groups form a loop: {' -> '.join(loop)}")
    return depth


def _priority(inv: Inventory, name: str) -> int:
    raw = inv.groups[name].vars.get("ansible_group_priority", 1)
    try:
        return int(raw)
    except (TypeError, ValueError):
        raise InventoryError(inv.groups[name].where,
                             f"ansible_group_priority of {name!r} is not a number") from None


def _ancestors(inv: Inventory, parents: dict[str, list[str]], direct: list[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(direct)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(parents.get(name, ()))
    return seen


def _connection(name: str, merged: dict[str, Any], origin: dict[str, Location]
                ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    checks = {"address": validate.address, "port": validate.port, "user": validate.user}
    for column, keys in CONNECTION_VARS.items():
        found = [k for k in keys if k in merged]
        values = [merged.pop(k) for k in found]
        if not found or values[0] is None:
            continue
        try:
            out[column] = checks[column](values[0])
        except ValueError as exc:
            raise InventoryError(origin[found[0]], f"host {name!r}: {exc}") from None
    return out


def _tenant(inv: Inventory, name: str, chain: list[str]) -> str | None:
    """The one tenant the host's groups (``chain``) and own vars name; two are an error."""
    found: dict[str, tuple[str, Location]] = {}
    places = [(f"group {g!r}", inv.groups[g].vars, inv.groups[g].where) for g in chain]
    places.append(("the host itself", inv.hosts[name].vars, inv.hosts[name].where))
    for what, values, where in places:
        if TENANT_VAR in values:
            tenant = inv.checked(validate.tenant, values[TENANT_VAR], where)
            found.setdefault(tenant, (what, where))
    if len(found) > 1:
        (a, (a_what, _)), (b, (b_what, _)) = sorted(found.items())[:2]
        raise InventoryError(inv.hosts[name].where,
                             f"host {name!r} is in two tenants: {a} (from {a_what}) and {b} "
                             f"(from {b_what})",
                             hint="a host belongs to one customer: take it out of one group")
    return next(iter(found), None)


def resolve(inv: Inventory) -> Resolved:
    """The host and group records of ``inv`` (see the module docstring for the rules)."""
    depth = _depths(inv)
    parents: dict[str, list[str]] = {}
    members: dict[str, list[str]] = {}
    for gname, group in inv.groups.items():
        for child in group.children:
            parents.setdefault(child, []).append(gname)
        for host in group.hosts:
            members.setdefault(host, []).append(gname)
    order = {g: (depth[g], _priority(inv, g), g) for g in inv.groups}
    secrets: set[str] = set()

    def public(values: dict[str, Any]) -> dict[str, Any]:
        return validate.public_vars(values, secrets)

    hosts: dict[str, HostRecord] = {}
    for hname, hdef in inv.hosts.items():
        direct = members.get(hname, [])
        chain = ["all"] if "all" in inv.groups else []
        if not direct and "ungrouped" in inv.groups:
            chain.append("ungrouped")
        chain += sorted(_ancestors(inv, parents, direct) - set(IMPLICIT_GROUPS),
                        key=order.__getitem__)
        merged: dict[str, Any] = {}
        origin: dict[str, Location] = {}
        for gname in chain:
            merged.update(inv.groups[gname].vars)
            origin.update(dict.fromkeys(inv.groups[gname].vars, inv.groups[gname].where))
        merged.update(hdef.vars)
        origin.update(dict.fromkeys(hdef.vars, hdef.where))
        origin.update(hdef.endpoint_where)
        conn = _connection(hname, merged, origin)
        hosts[hname] = HostRecord(name=hname, address=conn.get("address"),
                                  port=conn.get("port", DEFAULT_PORT), user=conn.get("user"),
                                  groups=tuple(sorted(direct)), vars=public(merged),
                                  tenant=_tenant(inv, hname, chain))
    groups = {
        gname: GroupRecord(name=gname, vars=public(dict(g.vars)),
                           children=tuple(sorted(g.children)))
        for gname, g in inv.groups.items() if gname not in IMPLICIT_GROUPS
    }
    return Resolved(source=inv.source, hosts=hosts, groups=groups,
                    skipped_secrets=sorted(secrets))


__all__ = ["DEFAULT_PORT", "TENANT_VAR", "GroupRecord", "HostRecord", "Resolved", "resolve"]
