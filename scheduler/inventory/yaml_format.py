"""The Ansible YAML inventory format (the subset documented in docs/guides/inventory.md).

Shape: a mapping of group names (usually just ``all``) to group bodies; a body has ``hosts``
(a mapping of host patterns to host vars or nothing), ``children`` (a mapping of group names
to bodies or nothing) and ``vars`` (a mapping).

Safety, in order:

1. a first pass over the parser's events refuses nesting deeper than ``MAX_DEPTH`` (libyaml's
   composer recurses in C, and a file of a million ``[`` would crash the process);
2. the document is composed with a ``SafeLoader`` subclass (the C one when available) whose
   ``!vault`` constructor refuses with a hint, and ``!unsafe`` is read as a plain string;
3. the node tree is walked by hand, so every error names the line and column of the key at
   fault; variable values are constructed with the safe constructors and made JSON-safe
   within the inventory's value budget (aliases cannot expand without bound);
4. a file with a top-level ``plugin:`` key is an inventory plugin's configuration, not an
   inventory: refused with the hint to run ``ansible-inventory --list``.
"""

from __future__ import annotations

from typing import Any

import yaml

from scheduler.inventory import ranges, validate
from scheduler.inventory.model import (
    PLUGIN_HINT,
    VAULT_HINT,
    Inventory,
    InventoryError,
    Location,
)

MAX_DEPTH = 64
_BASE: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NULL = "tag:yaml.org,2002:null"


class InventoryLoader(_BASE):  # type: ignore[misc, valid-type]
    """PyYAML's safe loader, refusing ``!vault`` values with a clear message."""

    source = "<inventory>"


def _refuse_vault(loader: InventoryLoader, node: yaml.Node) -> Any:
    raise InventoryError(_at(loader.source, node), "an Ansible Vault value (!vault) cannot be "
                         "imported", hint=VAULT_HINT)


def _unsafe(loader: InventoryLoader, node: yaml.Node) -> Any:
    if isinstance(node, yaml.ScalarNode):
        return str(node.value)
    raise InventoryError(_at(loader.source, node), "!unsafe applies to strings only")


InventoryLoader.add_constructor("!vault", _refuse_vault)
InventoryLoader.add_constructor("!vault-encrypted", _refuse_vault)
InventoryLoader.add_constructor("!unsafe", _unsafe)


def _at(source: str, node: Any) -> Location:
    mark = getattr(node, "start_mark", None)
    if mark is None:
        return Location(source)
    return Location(source, mark.line + 1, mark.column + 1)


def _check_depth(text: str, source: str) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=_BASE):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise InventoryError(_at(source, event),
                                     f"nesting deeper than {MAX_DEPTH} levels")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def _yaml_error(exc: yaml.YAMLError, source: str, fallback: Location | None = None
                ) -> InventoryError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = (Location(source, mark.line + 1, mark.column + 1) if mark
                 else fallback or Location(source))
        return InventoryError(where, f"YAML syntax error: {exc.problem or exc.context}")
    return InventoryError(fallback or Location(source),
                          f"YAML error: {(str(exc).splitlines() or ['?'])[0]}")


def parse(text: str, source: str) -> Inventory:
    """Parse YAML ``text`` read from ``source``."""
    try:
        _check_depth(text, source)
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source) from None
    loader = InventoryLoader(text)
    loader.source = source
    try:
        try:
            root = loader.get_single_node()
        except yaml.YAMLError as exc:
            raise _yaml_error(exc, source) from None
        return _Walker(source, loader).run(root)
    finally:
        loader.dispose()


class _Walker:
    def __init__(self, source: str, loader: InventoryLoader) -> None:
        self.inv = Inventory(source=source, format="yaml")
        self.source = source
        self.loader = loader

    def at(self, node: Any) -> Location:
        return _at(self.source, node)

    def value(self, node: yaml.Node) -> Any:
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise _yaml_error(exc, self.source, self.at(node)) from None
        except RecursionError:
            raise InventoryError(self.at(node), "value is nested too deeply") from None
        except (ValueError, TypeError, OverflowError) as exc:
            # e.g. a timestamp-looking scalar with month 13
            raise InventoryError(self.at(node), f"bad value: {exc}") from None

    def pairs(self, node: yaml.Node, what: str) -> list[tuple[str, yaml.Node, Location]]:
        """The entries of a mapping node as (key text, value node, key location)."""
        if not isinstance(node, yaml.MappingNode):
            raise InventoryError(self.at(node), f"{what} must be a mapping")
        seen: set[str] = set()
        out = []
        for key_node, value_node in node.value:
            where = self.at(key_node)
            if not isinstance(key_node, yaml.ScalarNode):
                raise InventoryError(where, f"keys of {what} must be plain names")
            key = str(key_node.value)
            if key in seen:
                raise InventoryError(where, f"{key!r} appears twice in {what}")
            seen.add(key)
            out.append((key, value_node, where))
        return out

    def places(self, node: yaml.Node) -> dict[str, Location]:
        """Where each key of a mapping node is (keys merged in with ``<<`` are not listed)."""
        if not isinstance(node, yaml.MappingNode):
            return {}
        return {str(k.value): self.at(k) for k, _v in node.value
                if isinstance(k, yaml.ScalarNode)}

    def run(self, root: yaml.Node | None) -> Inventory:
        if root is None:
            raise InventoryError(Location(self.source, 1), "the file is empty")
        if not isinstance(root, yaml.MappingNode):
            raise InventoryError(self.at(root), "the top level must be a mapping of groups "
                                 "(e.g. all: {hosts: ..., children: ...})")
        entries = self.pairs(root, "the top level")
        for key, _node, where in entries:
            if key == "plugin":
                raise InventoryError(where, "this is an inventory plugin configuration "
                                     "(plugin:), not an inventory", hint=PLUGIN_HINT)
        for key, node, where in entries:
            self.group(key, node, where, parent=None, depth=0)
        return self.inv

    def group(self, name: str, node: yaml.Node, where: Location, parent: str | None,
              depth: int) -> None:
        if depth > MAX_DEPTH:
            raise InventoryError(where, f"groups nested deeper than {MAX_DEPTH} levels "
                                        "(a recursive alias?)")
        self.inv.checked(validate.group_name, name, where)
        self.inv.group(name, where)
        if parent is not None:
            self.inv.add_child(parent, name, where)
        if isinstance(node, yaml.ScalarNode) and node.tag == _NULL:
            return
        for key, value, key_where in self.pairs(node, f"group {name!r}"):
            if key == "hosts":
                self.hosts(name, value)
            elif key == "children":
                if isinstance(value, yaml.ScalarNode) and value.tag == _NULL:
                    continue
                for child, child_node, child_where in self.pairs(
                        value, f"the children of {name!r}"):
                    self.group(child, child_node, child_where, name, depth + 1)
            elif key == "vars":
                found = self.inv.vars_from(self.value(value), key_where, f"vars of {name!r}",
                                           self.places(value))
                self.inv.group(name, where).vars.update(found)
            else:
                raise InventoryError(key_where, f"unexpected key {key!r} in group {name!r}",
                                     hint="a group has only hosts, children and vars")

    def hosts(self, group: str, node: yaml.Node) -> None:
        if isinstance(node, yaml.ScalarNode) and node.tag == _NULL:
            return
        for pattern, value, where in self.pairs(node, f"the hosts of {group!r}"):
            names, port = self.inv.checked(ranges.expand, pattern, where)
            host_vars: dict[str, Any] = {}
            if port is not None:
                host_vars["ansible_port"] = port
            host_vars.update(self.inv.vars_from(self.value(value), where,
                                                f"vars of host {pattern!r}", self.places(value)))
            for name in names:
                self.inv.checked(validate.host_name, name, where)
                self.inv.add_host(name, group, dict(host_vars), where)


__all__ = ["InventoryLoader", "MAX_DEPTH", "parse"]
