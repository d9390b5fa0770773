"""The Ansible INI inventory format (the subset documented in docs/guides/inventory.md).

One pass over the lines, as Ansible's own ``ini`` plugin does:

1. lines before the first section hold hosts of the implicit ``ungrouped`` group;
2. ``[group]`` holds host lines: a host pattern (``web[01:50].example.com:2222``) and inline
   ``key=value`` vars, split like a shell line (quotes group words, ``#`` starts a comment);
3. ``[group:vars]`` holds one ``key=value`` per line, for the group;
4. ``[group:children]`` holds one child group name per line;
5. values are read as Python literals where they parse as one (``8080``, ``True``,
   ``'quoted'``, ``[1, 2]``), else kept as the plain string: Ansible's rule, in both places;
6. at the end, a child group or a ``:vars`` section naming a group that no section declared
   is an error at the line that named it (Ansible refuses these too).
"""

from __future__ import annotations

import ast
import re
import shlex
import warnings
from typing import Any

from scheduler.inventory import ranges, validate
from scheduler.inventory.model import VAULT_HINT, Inventory, InventoryError, Location

_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:[#;].*)?$")
_CHILD = re.compile(r"^([^:\]\s\[#;=]+)\s*(?:[#;].*)?$")
MAX_LITERAL = 16_384


_PLAIN_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*")
_PLAIN_INT = re.compile(r"-?(0|[1-9][0-9]{0,17})")
_QUOTING = re.compile(r"['\"\\]")
_BLANKS = re.compile(r"[ \t\r\n]+")


def parse_value(raw: str) -> Any:
    """An INI value: a Python literal if it is one, else the string itself."""
    if len(raw) > MAX_LITERAL or not raw:
        return raw
    # Fast paths with the same results as literal_eval, for the common plain values.
    if _PLAIN_INT.fullmatch(raw):
        return int(raw)
    if _PLAIN_WORD.fullmatch(raw) and raw not in ("True", "False", "None"):
        return raw
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return raw
    if value is Ellipsis or isinstance(value, complex):
        return raw
    return value


def parse(text: str, source: str) -> Inventory:
    """Parse INI ``text`` read from ``source``."""
    return _Parser(source).run(text)


class _Parser:
    def __init__(self, source: str) -> None:
        self.inv = Inventory(source=source, format="ini")
        self.source = source
        self.declared: set[str] = {"all", "ungrouped"}
        # group -> (line where it was referenced, how) for groups no section has declared yet
        self.pending: dict[str, tuple[Location, str]] = {}

    def at(self, line: int, column: int = 0) -> Location:
        return Location(self.source, line, column)

    def run(self, text: str) -> Inventory:
        group, state = "ungrouped", "hosts"
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            where = self.at(number, len(raw) - len(raw.lstrip()) + 1)
            if line.startswith("["):
                group, state = self.section(line, where)
            elif state == "hosts":
                self.host_line(line, group, where)
            elif state == "vars":
                self.vars_line(line, group, where)
            else:
                self.child_line(line, group, where)
        for name, (where, how) in self.pending.items():
            raise InventoryError(where, how.format(name=name),
                                 hint=f"declare the group with a [{name}] section")
        return self.inv

    def section(self, line: str, where: Location) -> tuple[str, str]:
        m = _SECTION.match(line)
        if not m:
            raise InventoryError(where, f"invalid section header {line[:60]!r}",
                                 hint="use [group], [group:vars] or [group:children], "
                                      "without spaces")
        name, kind = m.group(1), m.group(2) or "hosts"
        if kind not in ("hosts", "vars", "children"):
            raise InventoryError(where, f"section [{name}:{kind}] has unknown type {kind!r}",
                                 hint="use [group], [group:vars] or [group:children]")
        self.inv.checked(validate.group_name, name, where)
        self.inv.group(name, where)
        if kind == "vars":
            if name not in self.declared:
                self.pending.setdefault(
                    name, (where, "section [{name}:vars] is for a group no section declares"))
        else:
            self.declared.add(name)
            self.pending.pop(name, None)
        return name, kind

    def host_line(self, line: str, group: str, where: Location) -> None:
        if line == "---" or re.match(r"^[^\s=]+:\s*$", line):
            raise InventoryError(where, f"{line!r} is YAML, not an INI host line",
                                 hint="name the file .yml, or pass --format yaml")
        if _QUOTING.search(line):
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError as exc:
                raise InventoryError(where, f"cannot split host line: {exc}") from None
        else:
            # What shlex does for a line without quotes or escapes: '#' starts a comment
            # anywhere, words are split on blanks. Many times faster.
            tokens = [t for t in _BLANKS.split(line.partition("#")[0]) if t]
        if not tokens:
            return
        names, port = self.inv.checked(ranges.expand, tokens[0], where)
        host_vars: dict[str, Any] = {}
        if port is not None:
            host_vars["ansible_port"] = port
        for token in tokens[1:]:
            key, eq, value = token.partition("=")
            if not eq or not key:
                raise InventoryError(where, f"expected key=value after the host name, "
                                            f"got {token[:60]!r}")
            host_vars[key] = parse_value(value)
        host_vars = self.inv.vars_from(host_vars, where)
        for name in names:
            self.inv.checked(validate.host_name, name, where)
            self.inv.add_host(name, group, dict(host_vars), where)

    def vars_line(self, line: str, group: str, where: Location) -> None:
        key, eq, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key:
            raise InventoryError(where, f"expected key=value in [{group}:vars], "
                                        f"got {line[:60]!r}")
        if value.startswith("$ANSIBLE_VAULT"):
            raise InventoryError(where, f"variable {key!r} is an Ansible Vault value",
                                 hint=VAULT_HINT)
        parsed = self.inv.vars_from({key: parse_value(value)}, where)
        self.inv.group(group, where).vars.update(parsed)

    def child_line(self, line: str, group: str, where: Location) -> None:
        m = _CHILD.match(line)
        if not m:
            raise InventoryError(where, f"expected a group name in [{group}:children], "
                                        f"got {line[:60]!r}")
        child = self.inv.checked(validate.group_name, m.group(1), where)
        if child not in self.declared:
            self.pending.setdefault(
                child, (where, f"section [{group}:children] names undefined group {{name!r}}"))
        self.inv.add_child(group, child, where)


__all__ = ["parse", "parse_value"]
