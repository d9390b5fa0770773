"""The stored inventory written back out as an Ansible inventory: ``fleetsched hosts export``.

What it owns:

1. ``read_export(session, hosts)``: the stored hosts named (every host by default) and the
   groups that hold them, directly or through child groups (every group when all hosts are
   exported), each group with its own vars, its direct hosts and its child
   groups among those exported;
2. ``render(export, fmt)``, in the three formats Ansible reads, each of which gives back the
   same hosts, groups and vars to ``ansible-inventory --list`` and to ``fleetsched hosts
   import`` (a round trip): ``ansible-json`` (the ``ansible-inventory --list`` shape:
   ``_meta.hostvars``, groups with ``hosts``, ``children`` and ``vars``; an inventory script
   may print it), ``ini`` and ``yaml``; ``from_ansible_json`` reads the first back into the
   ``Export`` it was written from (remote mode renders the server's export in any format);
3. the connection columns written as ``ansible_host``, ``ansible_port`` and ``ansible_user``.
   A variable whose name marks a secret is never written, at any depth, and credentials
   inside values are masked (``validate.public_vars``: an import already drops and masks them,
   ``hosts add`` refuses them; a record written by an older version may still hold some).

A host's vars are written as they are stored: the effective values after group inheritance,
as ``ansible-inventory --list`` prints them; its groups' vars are written with the groups.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import yaml
from sqlalchemy.orm import Session

from scheduler.errors import ValidationError
from scheduler.inventory import validate
from scheduler.inventory.model import CONNECTION_VARS
from scheduler.inventory.resolve import DEFAULT_PORT
from scheduler.inventory.store import group_member_map, list_groups, list_hosts

EXPORT_FORMATS = ("ansible-json", "ini", "yaml")
_PLAIN_INI = re.compile(r"[A-Za-z0-9_@%+,./:-]+")
_SHELL_WORD = re.compile(r"[A-Za-z0-9_@%+=,./:-]+")


@dataclass(frozen=True)
class ExportGroup:
    """A group as exported: its own vars, its direct hosts and child groups (exported ones)."""

    name: str
    vars: dict[str, Any]
    hosts: tuple[str, ...]
    children: tuple[str, ...]


@dataclass(frozen=True)
class Export:
    """Hosts (name -> every var Ansible should see, connection vars included) and groups."""

    hosts: dict[str, dict[str, Any]]
    groups: dict[str, ExportGroup]

    @property
    def ungrouped(self) -> list[str]:
        grouped = {h for g in self.groups.values() for h in g.hosts}
        return [h for h in self.hosts if h not in grouped]

    @property
    def top_groups(self) -> list[str]:
        nested = {c for g in self.groups.values() for c in g.children}
        return [g for g in self.groups if g not in nested]


def _public(values: dict[str, Any]) -> dict[str, Any]:
    # Import keeps secrets out of the record, but a record written before it scrubbed nested
    # values (or by hand) may hold some: never pass them on.
    return validate.public_vars(values)


def _host_vars(row: dict[str, Any], inherited: set[str]) -> dict[str, Any]:
    """The vars Ansible should see for a stored host. A connection column at its default is
    written anyway when a group of the host sets it, so the group's value does not win."""
    out: dict[str, Any] = {}
    columns = {"address": row["address"], "user": row["user"], "port": row["port"]}
    defaults = {"address": None, "user": None, "port": DEFAULT_PORT}
    for column, keys in CONNECTION_VARS.items():
        if columns[column] != defaults[column] or inherited & set(keys):
            out[keys[0]] = columns[column]
    return {**out, **_public(row["vars"])}


def read_export(session: Session, hosts: Iterable[str] | None = None) -> Export:
    """``hosts`` (default: every host) and the groups that hold them (see point 1)."""
    members = group_member_map(session)
    chosen = None if hosts is None else set(hosts)
    groups = [g for g in list_groups(session)
              if chosen is None or members.get(g["name"], set()) & chosen]
    names = {g["name"] for g in groups}
    inherited: dict[str, set[str]] = {}  # host -> the var names its groups set
    for g in groups:
        for host in members.get(g["name"], set()):
            inherited.setdefault(host, set()).update(g["vars"])
    exported: dict[str, dict[str, Any]] = {}
    direct: dict[str, list[str]] = {name: [] for name in names}
    for row in list_hosts(session):
        if chosen is not None and row["name"] not in chosen:
            continue
        exported[row["name"]] = _host_vars(row, inherited.get(row["name"], set()))
        for group in row["groups"]:
            if group in direct:
                direct[group].append(row["name"])
    return Export(hosts=exported, groups={
        g["name"]: ExportGroup(name=g["name"], vars=_public(g["vars"]),
                               hosts=tuple(direct[g["name"]]),
                               children=tuple(c for c in g["children"] if c in names))
        for g in groups})


def _json(export: Export) -> str:
    data: dict[str, Any] = {"_meta": {"hostvars": export.hosts},
                            "all": {"children": ["ungrouped", *export.top_groups]},
                            "ungrouped": {"hosts": export.ungrouped}}
    for g in export.groups.values():
        body: dict[str, Any] = {"hosts": list(g.hosts)}
        if g.children:
            body["children"] = list(g.children)
        if g.vars:
            body["vars"] = g.vars
        data[g.name] = body
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def from_ansible_json(data: dict[str, Any]) -> Export:
    """The ``Export`` that ``render_export(export, "ansible-json")`` wrote as ``data``."""
    groups = {name: ExportGroup(name=name, vars=body.get("vars", {}),
                                hosts=tuple(body.get("hosts", ())),
                                children=tuple(body.get("children", ())))
              for name, body in data.items() if name not in ("_meta", "all", "ungrouped")}
    return Export(hosts=data["_meta"]["hostvars"], groups=groups)


def _ini_value(value: Any) -> str:
    """``value`` as Ansible's INI reader gives it back: a plain word as is, anything else as
    a Python literal (what both readers try first)."""
    if isinstance(value, str) and _PLAIN_INI.fullmatch(value):
        try:
            ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return value
    return repr(value)


def _ini_host(name: str, host_vars: dict[str, Any]) -> str:
    """A host line: ``key=value`` words, split as a shell would (both readers use shlex)."""
    words = [name]
    for key, value in host_vars.items():
        word = f"{key}={_ini_value(value)}"
        if not _SHELL_WORD.fullmatch(word):
            word = '"' + word.replace("\\", "\\\\").replace('"', '\\"') + '"'
        words.append(word)
    return " ".join(words)


def _ini(export: Export) -> str:
    written: set[str] = set()

    def host_line(name: str) -> str:
        line = name if name in written else _ini_host(name, export.hosts[name])
        written.add(name)
        return line

    lines = [f"# fleetsched hosts export: {len(export.hosts)} host(s), "
             f"{len(export.groups)} group(s)"]
    lines += [host_line(h) for h in export.ungrouped]
    for g in export.groups.values():
        lines += ["", f"[{g.name}]", *(host_line(h) for h in g.hosts)]
        if g.vars:
            lines += ["", f"[{g.name}:vars]", *(f"{k}={_ini_value(v)}" for k, v in g.vars.items())]
        if g.children:
            lines += ["", f"[{g.name}:children]", *g.children]
    return "\n".join(lines) + "\n"


def _yaml(export: Export) -> str:
    """Top groups under ``all``, each child group under its parent (its body at its first
    place, its name alone at any other)."""
    written: set[str] = set()
    placed: set[str] = set()

    def hosts_of(names: list[str] | tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in names:
            out[name] = None if name in written else (export.hosts[name] or None)
            written.add(name)
        return out

    def body(name: str) -> dict[str, Any] | None:
        if name in placed:
            return None
        placed.add(name)
        g = export.groups[name]
        out: dict[str, Any] = {}
        if g.hosts:
            out["hosts"] = hosts_of(g.hosts)
        if g.children:
            out["children"] = {child: body(child) for child in g.children}
        if g.vars:
            out["vars"] = g.vars
        return out or None

    top: dict[str, Any] = {}
    if export.ungrouped:
        top["hosts"] = hosts_of(export.ungrouped)
    if export.groups:
        top["children"] = {name: body(name) for name in export.top_groups}
    return yaml.safe_dump({"all": top}, sort_keys=False, allow_unicode=True,
                          default_flow_style=False, width=100)


def render_export(export: Export, fmt: str) -> str:
    """``export`` in format ``fmt``, one of ``EXPORT_FORMATS``."""
    renderers = {"ansible-json": _json, "ini": _ini, "yaml": _yaml}
    if fmt not in renderers:
        raise ValidationError(f"--format {fmt!r} is not one of {', '.join(EXPORT_FORMATS)}")
    return renderers[fmt](export)


__all__ = ["EXPORT_FORMATS", "Export", "ExportGroup", "from_ansible_json", "read_export",
           "render_export"]
