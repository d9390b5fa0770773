"""The parsed inventory: what every format (JSON, INI, YAML) is read into, and its errors.

What it owns:

1. ``Inventory``: groups (own vars, direct hosts, children) and hosts (own vars), in the order
   the source declared them, each with the place it was first declared (``Location``);
2. the merge rules while a parser adds things: a host named twice gets its vars merged (later
   wins, as in Ansible) except that two different addresses or ports for one host are an
   error naming both lines;
3. ``InventoryError``: one line ``file:line:col: message`` (line and column where known),
   exit code 2.

Nothing here touches a database; ``scheduler.inventory.resolve`` turns an ``Inventory`` into
the host records that are stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.errors import ValidationError
from scheduler.inventory import validate

IMPLICIT_GROUPS = ("all", "ungrouped")
"""Ansible's implicit groups: every host is in ``all``; hosts in no other group are in
``ungrouped``. Neither is stored as a group row."""

CONNECTION_VARS = {
    "address": ("ansible_host", "ansible_ssh_host"),
    "port": ("ansible_port", "ansible_ssh_port"),
    "user": ("ansible_user", "ansible_ssh_user"),
}
"""Variables that say how to reach a host; they become the host's columns, not vars."""

ENDPOINT_VARS = CONNECTION_VARS["address"] + CONNECTION_VARS["port"]
_CONNECTION_CHECKS = {
    key: {"address": validate.address, "port": validate.port, "user": validate.user}[column]
    for column, keys in CONNECTION_VARS.items() for key in keys
}

VAULT_HINT = ("fleetsched stores no secrets: run `ansible-inventory -i FILE --list > inv.json` "
              "and import the JSON, keeping secrets in vault")
PLUGIN_HINT = ("run `ansible-inventory -i FILE --list > inv.json` (the plugin runs there) "
               "and import inv.json")


def _is_vaulted(value: Any) -> bool:
    if isinstance(value, str):
        return value.lstrip().startswith("$ANSIBLE_VAULT")
    if isinstance(value, dict):
        return "__ansible_vault" in value or any(_is_vaulted(v) for v in value.values())
    if isinstance(value, list):
        return any(_is_vaulted(v) for v in value)
    return False


@dataclass(frozen=True)
class Location:
    """Where something is in a source file: 1-based line and column (0 = unknown)."""

    path: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        out = self.path
        if self.line:
            out += f":{self.line}"
            if self.column:
                out += f":{self.column}"
        return out


class InventoryError(ValidationError):
    """A bad inventory file: one line naming the file, the line (and column) and the problem.

    Nothing was written when this is raised.
    """

    exit_code = 2

    def __init__(self, where: Location | str, message: str, hint: str | None = None) -> None:
        self.location = where if isinstance(where, Location) else Location(where)
        self.detail = message
        super().__init__(f"{self.location}: {message}", hint)


@dataclass
class GroupDef:
    """A group as a source declares it: its own vars, direct hosts and child groups."""

    name: str
    where: Location
    vars: dict[str, Any] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    children: list[str] = field(default_factory=list)


@dataclass
class HostDef:
    """A host as a source declares it: its own (host-level) vars."""

    name: str
    where: Location
    vars: dict[str, Any] = field(default_factory=dict)
    # Where each endpoint var was set, to name both lines when a second mention disagrees.
    endpoint_where: dict[str, Location] = field(default_factory=dict)


@dataclass
class Inventory:
    """Everything one inventory source declares, before inheritance is applied."""

    source: str
    format: str
    groups: dict[str, GroupDef] = field(default_factory=dict)
    hosts: dict[str, HostDef] = field(default_factory=dict)
    budget: validate.Budget = field(default_factory=validate.Budget, repr=False, compare=False)

    def vars_from(self, raw: Any, where: Location, what: str = "vars",
                  places: Mapping[str, Location] | None = None) -> dict[str, Any]:
        """``raw`` checked to be a mapping of valid names to JSON-safe values, connection
        variables valid where they are set; ``places`` locates single keys more precisely."""
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            raise InventoryError(where, f"{what} must be a mapping of names to values, "
                                        f"not {type(raw).__name__}")
        out: dict[str, Any] = {}
        places = places or {}
        for key, value in raw.items():
            at = places.get(key, where)
            try:
                out[validate.var_name(key)] = validate.plain(value, self.budget)
            except ValueError as exc:
                raise InventoryError(at, str(exc)) from None
            if _is_vaulted(out[key]):
                raise InventoryError(at, f"variable {key!r} is an Ansible Vault value",
                                     hint=VAULT_HINT)
            check = _CONNECTION_CHECKS.get(key)
            if check is not None and out[key] is not None:
                try:
                    check(out[key])
                except ValueError as exc:
                    raise InventoryError(at, f"{key}: {exc}") from None
        return out

    def checked(self, check: Any, value: Any, where: Location) -> Any:
        """``check(value)`` with a ``ValueError`` turned into an error at ``where``."""
        try:
            return check(value)
        except ValueError as exc:
            raise InventoryError(where, str(exc)) from None

    def group(self, name: str, where: Location) -> GroupDef:
        """The group ``name``, declared here if it is new."""
        found = self.groups.get(name)
        if found is None:
            found = self.groups[name] = GroupDef(name, where)
        return found

    def add_child(self, parent: str, child: str, where: Location) -> None:
        """Make ``child`` a child group of ``parent`` (both declared if new).

        Every group is implicitly a child of ``all``, so that nesting is not recorded."""
        if child in IMPLICIT_GROUPS:
            if parent == "all" and child == "ungrouped":
                return
            raise InventoryError(where, f"group {child!r} cannot be a child of {parent!r}",
                                 hint="'all' and 'ungrouped' are implicit top-level groups")
        if parent == child:
            raise InventoryError(where, f"group {parent!r} cannot be a child of itself")
        group = self.group(parent, where)
        self.group(child, where)
        if parent != "all" and child not in group.children:
            group.children.append(child)

    def add_host(self, name: str, group: str | None, host_vars: dict[str, Any],
                 where: Location) -> HostDef:
        """Declare host ``name`` (in ``group`` if given) with host-level vars, merging a
        repeated mention; a different address or port than before is an error.

        Membership of the implicit groups (``all``, ``ungrouped``) is not recorded: it follows
        from the host having no other group."""
        host = self.hosts.get(name)
        if host is None:
            host = self.hosts[name] = HostDef(name, where)
        for key in ENDPOINT_VARS:
            if key not in host_vars:
                continue
            if key in host.vars and host.vars[key] != host_vars[key]:
                first = host.endpoint_where[key]
                raise InventoryError(
                    where,
                    f"host {name!r} is defined again with {key}={host_vars[key]!r}, "
                    f"but line {first.line} set {key}={host.vars[key]!r}",
                    hint="a host has one address: remove or correct one of the two definitions",
                )
            host.endpoint_where.setdefault(key, where)
        host.vars.update(host_vars)
        if group is not None and group not in IMPLICIT_GROUPS:
            members = self.group(group, where).hosts
            if name not in members:
                members.append(name)
        return host


__all__ = [
    "CONNECTION_VARS", "ENDPOINT_VARS", "IMPLICIT_GROUPS", "PLUGIN_HINT", "VAULT_HINT",
    "GroupDef", "HostDef", "Inventory", "InventoryError", "Location",
]
