"""Reading and editing the stored hosts and groups: what ``fleetsched hosts`` and ``groups``
show and change, and the group resolution other parts use.

What it owns:

1. ``group_members(session, group)``: the hosts of a group including its child groups (``all``:
   every host; ``ungrouped``: hosts in no group); ``hosts_in_groups`` for several; and
   ``group_member_map`` (every group at once, the shape ``scheduler.submission.targets`` takes);
2. ``list_hosts`` (filters: group with its children, fnmatch name pattern, variables),
   ``show_host``,
   ``list_groups``;
3. ``add_host`` and ``remove_host`` by hand (``source = "cli"``), each recorded as an event
   (``host-add``, ``host-remove``) in the same transaction.

Every function takes a session inside a transaction the caller opened.
"""

from __future__ import annotations

import fnmatch
import re
import sqlite3
from collections.abc import Iterable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.errors import NotFoundError, ValidationError
from scheduler.inventory import validate
from scheduler.inventory.model import IMPLICIT_GROUPS
from scheduler.inventory.resolve import DEFAULT_PORT, TENANT_VAR
from scheduler.principal import Principal
from scheduler.record.audit import record_event
from scheduler.record.models import Group, Host, group_children, group_hosts

CLI_SOURCE = "cli"
IN_CHUNK = 500  # names per IN (...) list: well under any database's limit on parameters


def _edges(session: Session) -> tuple[dict[str, set[str]], dict[str, set[str]], set[str]]:
    """(group -> direct host names, group -> child group names, all host names)."""
    h, g = Host.__table__, Group.__table__
    direct: dict[str, set[str]] = {name: set() for (name,) in session.execute(sa.select(g.c.name))}
    for gname, hname in session.execute(
            sa.select(g.c.name, h.c.name).select_from(group_hosts)
            .join(g, g.c.id == group_hosts.c.group_id).join(h, h.c.id == group_hosts.c.host_id)):
        direct[gname].add(hname)
    parent, child = g.alias("parent"), g.alias("child")
    children: dict[str, set[str]] = {name: set() for name in direct}
    for pname, cname in session.execute(
            sa.select(parent.c.name, child.c.name).select_from(group_children)
            .join(parent, parent.c.id == group_children.c.parent_id)
            .join(child, child.c.id == group_children.c.child_id)):
        children[pname].add(cname)
    every = {name for (name,) in session.execute(sa.select(h.c.name))}
    return direct, children, every


def _members(name: str, direct: dict[str, set[str]], children: dict[str, set[str]]) -> set[str]:
    out: set[str] = set()
    seen: set[str] = set()
    todo = [name]
    while todo:
        group = todo.pop()
        if group in seen:
            continue
        seen.add(group)
        out |= direct.get(group, set())
        todo.extend(children.get(group, ()))
    return out


def group_member_map(session: Session) -> dict[str, set[str]]:
    """Every group -> all its hosts, child groups included; plus ``all`` and ``ungrouped``."""
    direct, children, every = _edges(session)
    out = {name: _members(name, direct, children) for name in direct}
    grouped = set().union(*direct.values()) if direct else set()
    out.setdefault("all", every)
    out.setdefault("ungrouped", every - grouped)
    return out


def group_member_map_of(session: Session, hosts: Iterable[str]) -> dict[str, set[str]]:
    """``group_member_map`` restricted to ``hosts``: every group -> those of them it holds
    (child groups included), ``all`` -> those that exist, ``ungrouped`` -> those in no group.
    Reads only their memberships and the group tree, not the whole inventory: what a submit to
    a few named hosts needs."""
    h, g = Host.__table__, Group.__table__
    wanted = sorted(set(hosts))
    every: set[str] = set()
    direct: dict[str, set[str]] = {}
    for start in range(0, len(wanted), IN_CHUNK):
        names = wanted[start:start + IN_CHUNK]
        every |= {n for (n,) in session.execute(sa.select(h.c.name).where(h.c.name.in_(names)))}
        for gname, hname in session.execute(
                sa.select(g.c.name, h.c.name).select_from(group_hosts)
                .join(g, g.c.id == group_hosts.c.group_id)
                .join(h, h.c.id == group_hosts.c.host_id).where(h.c.name.in_(names))):
            direct.setdefault(gname, set()).add(hname)
    parent, child = g.alias("parent"), g.alias("child")
    parents: dict[str, set[str]] = {}
    for pname, cname in session.execute(
            sa.select(parent.c.name, child.c.name).select_from(group_children)
            .join(parent, parent.c.id == group_children.c.parent_id)
            .join(child, child.c.id == group_children.c.child_id)):
        parents.setdefault(cname, set()).add(pname)
    out: dict[str, set[str]] = {}
    for gname, members in direct.items():  # a group's hosts count in all its ancestors
        seen, todo = set(), [gname]
        while todo:
            group = todo.pop()
            if group not in seen:
                seen.add(group)
                out.setdefault(group, set()).update(members)
                todo.extend(parents.get(group, ()))
    grouped = set().union(*direct.values()) if direct else set()
    out.setdefault("all", every)
    out.setdefault("ungrouped", every - grouped)
    return out


def group_members(session: Session, group: str) -> set[str]:
    """The host names of ``group`` and of its child groups, recursively."""
    members = group_member_map(session)
    if group not in members:
        raise NotFoundError(f"no group named {group!r}", hint="see `fleetsched groups list`")
    return members[group]


def hosts_in_groups(session: Session, groups: Iterable[str]) -> set[str]:
    """The union of ``group_members`` over ``groups``."""
    members = group_member_map(session)
    out: set[str] = set()
    for group in groups:
        if group not in members:
            raise NotFoundError(f"no group named {group!r}", hint="see `fleetsched groups list`")
        out |= members[group]
    return out


def _host_rows(session: Session, names: set[str] | None, *, limit: int | None = None,
               offset: int = 0, tenant: str | None = None,
               named: sa.ColumnElement[bool] | None = None) -> list[dict[str, Any]]:
    """Hosts by name (those in ``names``, when given; only ``tenant``'s, when given; those
    whose name the SQL condition ``named`` accepts), ``limit`` of them from ``offset``: in SQL
    unless ``names`` is too many for one IN list, else cut after the filter."""
    h, g = Host.__table__, Group.__table__
    hosts = sa.select(h).order_by(h.c.name)
    if tenant is not None:
        hosts = hosts.where(h.c.tenant == tenant)
    if named is not None:
        hosts = hosts.where(named)
    if names is not None and len(names) <= IN_CHUNK:
        hosts = hosts.where(h.c.name.in_(sorted(names)))
    paged_in_sql = ((names is None or len(names) <= IN_CHUNK)
                    and (limit is not None or offset > 0))
    if paged_in_sql:
        hosts = hosts.limit(limit).offset(offset)
    chosen = [r for r in session.execute(hosts) if names is None or r.name in names]
    if not paged_in_sql:
        chosen = chosen[offset:None if limit is None else offset + limit]
    members = sa.select(h.c.name, g.c.name).select_from(group_hosts) \
        .join(g, g.c.id == group_hosts.c.group_id).join(h, h.c.id == group_hosts.c.host_id)
    if limit is not None:  # a page: the groups of its hosts only
        members = members.where(h.c.name.in_([r.name for r in chosen]))
    groups: dict[str, list[str]] = {}
    for hname, gname in session.execute(members):
        groups.setdefault(hname, []).append(gname)
    return [{"name": r.name, "address": r.address, "port": r.port, "user": r.user,
             "groups": sorted(groups.get(r.name, [])), "tenant": r.tenant, "source": r.source,
             "vars": r.vars or {}, "created_at": r.created_at, "updated_at": r.updated_at}
            for r in chosen]


def list_hosts(session: Session, *, group: str | None = None, match: str | None = None,
               limit: int | None = None, offset: int = 0, tenant: str | None = None,
               host_vars: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Hosts sorted by name, optionally those of ``group`` (with its children) whose name
    matches the fnmatch pattern ``match`` and whose variables hold ``host_vars`` (each value
    compared as text, in SQL: ``_vars_match``); ``limit`` of them from ``offset`` (one page
    read in SQL, but for a group of more than ``IN_CHUNK`` hosts or a pattern with a ``[...]``
    class). ``tenant``: that customer's hosts only, in SQL; a group without any of them is
    not found, as a group that does not exist."""
    names = group_members(session, group) if group else None
    if tenant is not None and names is not None:
        names &= _tenant_hosts(session, tenant, names)
        if not names:
            raise NotFoundError(f"no group named {group!r}", hint="see `fleetsched groups list`")
    held = _vars_match(session, host_vars) if host_vars else None
    named = _name_matches(session, match) if match else None
    if not match or named is not None:
        wanted = [c for c in (named, held) if c is not None]
        return _host_rows(session, names, limit=limit, offset=offset, tenant=tenant,
                          named=sa.and_(*wanted) if wanted else None)
    rows = [r for r in _host_rows(session, names, tenant=tenant, named=held)
            if fnmatch.fnmatchcase(r["name"], match)]
    return rows[offset:None if limit is None else offset + limit]


def _name_matches(session: Session, pattern: str) -> sa.ColumnElement[bool] | None:
    """The fnmatch ``pattern`` on a host's name as SQL, meaning what ``fnmatchcase`` means
    (``*``, ``?``, case-sensitive), so a page of matching hosts is read in SQL: SQLite's GLOB,
    PostgreSQL's LIKE (case-sensitive there). None for a pattern with a ``[...]`` class, which
    the two spell differently: those are matched in Python."""
    if "[" in pattern:
        return None
    name = Host.__table__.c.name
    if session.get_bind().dialect.name == "sqlite":
        return name.op("GLOB")(pattern)
    like = (pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            .replace("*", "%").replace("?", "_"))
    return name.like(like, escape="\\")


# SQLite 3.38 and later have ``->``: a number's JSON text exactly as stored, as
# ``submission.targets.var_text`` spells it (json.dumps wrote it); older ones convert it to a
# double first, so a float with an exponent or an integer beyond 64 bits is not found there.
SQLITE_RAW_JSON = sqlite3.sqlite_version_info >= (3, 38)
VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")  # a variable a host search names


def _vars_match(session: Session, wanted: dict[str, str]) -> sa.ColumnElement[bool]:
    """Hosts whose own variables hold each ``wanted`` key with that value, compared as text
    in SQL (a number as written, ``true``/``false`` as JSON spells them; a list or mapping
    value never matches): PostgreSQL's ``->>``, SQLite's ``json_extract``."""
    column = Host.__table__.c.vars
    sqlite = session.get_bind().dialect.name == "sqlite"
    conditions = []
    for key, value in wanted.items():
        if not VAR_NAME.fullmatch(key):
            raise ValidationError(f"{key[:120]!r} is not a variable name",
                                  hint="letters, digits and '_', e.g. rack=r12")
        if sqlite:
            path = f'$."{key}"'
            kind = sa.func.json_type(column, path)
            value_text: Any = sa.cast(sa.func.json_extract(column, path), sa.Text)
            if SQLITE_RAW_JSON:  # a number as stored (json_extract makes 1e-07 "1.0e-07")
                value_text = sa.case((kind.in_(("integer", "real")), column.op("->")(path)),
                                     else_=value_text)
            text: Any = sa.case((kind == "true", "true"), (kind == "false", "false"),
                                (kind.in_(("object", "array")), None), else_=value_text)
        else:
            text = sa.case((sa.func.json_typeof(column[key]).in_(("object", "array")), None),
                           else_=column[key].as_string())
        conditions.append(text == value)
    return sa.and_(*conditions)


def _tenant_hosts(session: Session, tenant: str, names: set[str]) -> set[str]:
    h = Host.__table__
    out: set[str] = set()
    wanted = sorted(names)
    for start in range(0, len(wanted), IN_CHUNK):
        out.update(session.scalars(sa.select(h.c.name).where(
            h.c.tenant == tenant, h.c.name.in_(wanted[start:start + IN_CHUNK]))))
    return out


def show_host(session: Session, name: str, tenant: str | None = None) -> dict[str, Any]:
    """One host's record, with its direct groups and every group it is in through them
    (``tenant``: only that customer's host; another's is not found, as one that is not)."""
    rows = _host_rows(session, {name}, tenant=tenant)
    if not rows:
        raise NotFoundError(f"no host named {name!r}", hint="see `fleetsched hosts list`")
    row = rows[0]
    member_of = sorted(g for g, hosts in group_member_map(session).items()
                       if name in hosts and g not in ("all", "ungrouped"))
    row["all_groups"] = member_of
    return row


def list_groups(session: Session) -> list[dict[str, Any]]:
    """Groups sorted by name: direct and total host counts, children, parents, source."""
    direct, children, _every = _edges(session)
    parents: dict[str, list[str]] = {}
    for p, kids in children.items():
        for c in kids:
            parents.setdefault(c, []).append(p)
    g = Group.__table__
    out = []
    for r in session.execute(sa.select(g.c.name, g.c.vars, g.c.source, g.c.max_busy)
                             .order_by(g.c.name)):
        out.append({"name": r.name, "max_busy": r.max_busy or "", "hosts": len(direct[r.name]),
                    "all_hosts": len(_members(r.name, direct, children)),
                    "children": sorted(children[r.name]),
                    "parents": sorted(parents.get(r.name, [])),
                    "vars": r.vars or {}, "source": r.source})
    return out


def group_limits(session: Session) -> dict[str, str]:
    """Every limited group -> its limit as the operator gave it ("2", "34%")."""
    g = Group.__table__
    return dict(session.execute(sa.select(g.c.name, g.c.max_busy)
                                .where(g.c.max_busy.is_not(None))).all())


def limit_count(spec: str, members: int) -> int:
    """A limit ("N" or "P%") as a number of jobs for a group of ``members`` hosts (at least 1)."""
    from scheduler.parse import parse_limit

    return max(1, min(parse_limit(spec, "--max-busy").of(members), max(members, 1)))


def limited_groups_of(session: Session, hosts: Iterable[str],
                      members: dict[str, set[str]] | None = None) -> dict[str, list[str]]:
    """Each host -> the limited groups it is in (child groups' hosts count in their parents)."""
    limits = group_limits(session)
    members = group_member_map(session) if members is None and limits else members or {}
    wanted = set(hosts)
    out: dict[str, list[str]] = {h: [] for h in wanted}
    for group in sorted(limits):
        for host in members.get(group, set()) & wanted:
            out[host].append(group)
    return out


def set_group_limit(session: Session, name: str, spec: str | None, *,
                    operator: Principal | str) -> tuple[int | None, set[str]]:
    """Set (``spec`` "N" or "P%") or remove (None) group ``name``'s limit in SQL, with an
    event; returns the limit as a number of jobs (None: removed) and the group's hosts."""
    g = Group.__table__
    if session.execute(sa.select(g.c.id).where(g.c.name == name)).first() is None:
        raise NotFoundError(f"no group named {name!r}", hint="see `fleetsched groups list`")
    members = group_member_map(session).get(name, set())
    count = None if spec is None else limit_count(spec, len(members))
    session.execute(sa.update(g).where(g.c.name == name).values(max_busy=spec))
    record_event(session, "group-limit", operator=operator,
                 data={"group": name, "max_busy": spec, "jobs": count, "hosts": len(members)})
    return count, members


def _checked(check: Any, value: Any, option: str) -> Any:
    try:
        return check(value)
    except ValueError as exc:
        raise ValidationError(f"{option}: {exc}") from None


def add_host(session: Session, name: str, *, address: str | None = None,
             port: int | None = None, user: str | None = None,
             groups: Iterable[str] = (), host_vars: dict[str, Any] | None = None,
             operator: Principal | str) -> list[str]:
    """Add host ``name`` by hand; returns the groups that had to be created for it."""
    _checked(validate.host_name, name, "NAME")
    address = _checked(validate.address, address, "--address") if address else None
    port = _checked(validate.port, port, "--port") if port is not None else DEFAULT_PORT
    user = _checked(validate.user, user, "--user") if user else None
    group_list = sorted({_checked(validate.group_name, g, "--group") for g in groups})
    implicit = [g for g in group_list if g in IMPLICIT_GROUPS]
    if implicit:
        raise ValidationError(f"--group {implicit[0]}: every host is in it already (an implicit "
                              "group of Ansible inventories)",
                              hint="name a group of your own")
    host_vars = {_checked(validate.var_name, k, "--var"): v for k, v in (host_vars or {}).items()}
    secret = sorted(k for k, v in host_vars.items()
                    if validate.is_secret_var(k) and not validate.is_stored_reference(k, v))
    if secret:
        raise ValidationError(f"--var {secret[0]}: fleetsched does not store secrets",
                              hint="use ssh keys or the agent; pass secrets as @env:/@file: "
                                   "task parameters")
    tenant = (_checked(validate.tenant, host_vars[TENANT_VAR], f"--var {TENANT_VAR}")
              if TENANT_VAR in host_vars else None)
    h, g = Host.__table__, Group.__table__
    if session.execute(sa.select(h.c.id).where(h.c.name == name)).first():
        raise ValidationError(f"host {name!r} already exists",
                              hint="remove it first, or change it in its inventory and import")
    created = []
    for gname in group_list:
        if not session.execute(sa.select(g.c.id).where(g.c.name == gname)).first():
            session.execute(sa.insert(g).values(name=gname, vars={}, source=CLI_SOURCE))
            created.append(gname)
    host_id = session.execute(sa.insert(h).values(
        name=name, address=address, port=port, user=user, vars=host_vars,
        source=CLI_SOURCE, tenant=tenant).returning(h.c.id)).scalar_one()
    for gname in group_list:
        gid = session.execute(sa.select(g.c.id).where(g.c.name == gname)).scalar_one()
        session.execute(sa.insert(group_hosts).values(group_id=gid, host_id=host_id))
    record_event(session, "host-add", operator=operator, data={
        "address": address, "port": port, "user": user, "groups": group_list,
        "created_groups": created, "source": CLI_SOURCE, "tenant": tenant}, host=name)
    return created


def remove_host(session: Session, name: str, *, operator: Principal | str) -> None:
    """Remove host ``name`` and its memberships."""
    h = Host.__table__
    row = session.execute(sa.select(h.c.id, h.c.source).where(h.c.name == name)).first()
    if row is None:
        raise NotFoundError(f"no host named {name!r}", hint="see `fleetsched hosts list`")
    session.execute(sa.delete(group_hosts).where(group_hosts.c.host_id == row.id))
    session.execute(sa.delete(h).where(h.c.id == row.id))
    record_event(session, "host-remove", operator=operator, data={"source": row.source}, host=name)


def remove_group(session: Session, name: str, *, operator: Principal | str) -> int:
    """Remove group ``name``: its memberships, its links to parent and child groups and its
    window assignments (the hosts stay). Returns how many hosts were in it."""
    from scheduler.record.models import WindowAssignment

    g = Group.__table__
    row = session.execute(sa.select(g.c.id, g.c.source).where(g.c.name == name)).first()
    if row is None:
        raise NotFoundError(f"no group named {name!r}", hint="see `fleetsched groups list`")
    hosts = session.execute(sa.delete(group_hosts).where(group_hosts.c.group_id == row.id)).rowcount
    session.execute(sa.delete(group_children).where(sa.or_(
        group_children.c.parent_id == row.id, group_children.c.child_id == row.id)))
    w = WindowAssignment.__table__
    session.execute(sa.delete(w).where(w.c.group_id == row.id))
    session.execute(sa.delete(g).where(g.c.id == row.id))
    record_event(session, "group-remove", operator=operator,
                 data={"group": name, "hosts": hosts, "source": row.source})
    return int(hosts or 0)


__all__ = [
    "CLI_SOURCE", "add_host", "group_limits", "group_member_map", "group_members",
    "hosts_in_groups", "limit_count", "limited_groups_of", "list_groups", "list_hosts",
    "remove_group", "remove_host", "set_group_limit", "show_host",
]
