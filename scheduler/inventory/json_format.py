"""The JSON of ``ansible-inventory --list`` (and of dynamic inventory scripts' ``--list``).

Shape::

    {"_meta": {"hostvars": {"web01": {"ansible_host": "10.0.0.1", ...}, ...}},
     "all": {"children": ["ungrouped", "web"]},
     "web": {"hosts": ["web01", ...], "children": [...], "vars": {...}},
     "legacy": ["h1", "h2"]}

Rules:

1. every key but ``_meta`` is a group; a group is a mapping of ``hosts`` (names),
   ``children`` (group names) and ``vars``, or a plain list of host names (the script form);
2. a child named but not described is an empty group: ``ansible-inventory`` leaves empty
   groups out of the top level but still lists them as children;
3. ``--list`` without ``--export`` folds group vars into each host's vars; with ``--export``
   they stay on the groups. Both import to the same hosts;
4. a key that appears twice in one object is an error (the JSON module would keep the last
   silently); NaN and Infinity are refused;
5. errors name the line where the offending name first appears in the file.
"""

from __future__ import annotations

import json
from typing import Any

from scheduler.inventory import validate
from scheduler.inventory.model import Inventory, InventoryError, Location

_GROUP_KEYS = ("hosts", "children", "vars")


class _Problem(Exception):
    """An error about ``subject``; located in the text only when it is raised."""

    def __init__(self, subject: str | None, message: str, hint: str | None = None,
                 *, bare: bool = False) -> None:
        super().__init__(message)
        self.subject = subject
        self.message = message
        self.hint = hint
        self.bare = bare  # look for the subject as is, not as a JSON string


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Problem(key, f"key {key!r} appears twice in one object")
        out[key] = value
    return out


def _constant(name: str) -> Any:
    raise _Problem(name, f"{name} is not a valid JSON value", bare=True)


def _locate(text: str, source: str, subject: str | None, second: bool = False,
            bare: bool = False) -> Location:
    if subject is None:
        return Location(source)
    needle = subject if bare else json.dumps(subject)
    pos = text.find(needle)
    if second and pos >= 0:
        pos = text.find(needle, pos + 1)
    if pos < 0:
        return Location(source)
    line = text.count("\n", 0, pos) + 1
    return Location(source, line, pos - (text.rfind("\n", 0, pos) + 1) + 1)


def parse(text: str, source: str) -> Inventory:
    """Parse ``ansible-inventory --list`` JSON ``text`` read from ``source``."""
    try:
        data = json.loads(text, object_pairs_hook=_pairs, parse_constant=_constant)
    except json.JSONDecodeError as exc:
        raise InventoryError(Location(source, exc.lineno, exc.colno),
                             f"JSON syntax error: {exc.msg}") from None
    except RecursionError:
        raise InventoryError(source, "JSON is nested too deeply") from None
    except _Problem as exc:
        where = _locate(text, source, exc.subject, second=not exc.bare, bare=exc.bare)
        raise InventoryError(where, exc.message) from None
    try:
        return _Walker(source).run(data)
    except _Problem as exc:
        raise InventoryError(_locate(text, source, exc.subject), exc.message, exc.hint) from None


class _Walker:
    def __init__(self, source: str) -> None:
        self.inv = Inventory(source=source, format="json")
        self.here = Location(source)

    def check(self, fn: Any, value: Any, subject: str) -> Any:
        try:
            return fn(value)
        except ValueError as exc:
            raise _Problem(subject, str(exc)) from None

    def run(self, data: Any) -> Inventory:
        if not isinstance(data, dict):
            raise _Problem(None, "the top level must be an object of groups, as "
                                 "`ansible-inventory --list` prints")
        meta = data.get("_meta", {})
        if not isinstance(meta, dict):
            raise _Problem("_meta", "_meta must be an object")
        hostvars = meta.get("hostvars", {})
        if not isinstance(hostvars, dict):
            raise _Problem("hostvars", "_meta.hostvars must be an object of host names")
        for name, body in data.items():
            if name != "_meta":
                self.group(name, body)
        for name, raw in hostvars.items():
            self.host(name, None, raw)
        return self.inv

    def group(self, name: str, body: Any) -> None:
        self.check(validate.group_name, name, name)
        self.inv.group(name, self.here)
        if body is None:
            return
        if isinstance(body, list):
            body = {"hosts": body}
        if not isinstance(body, dict):
            raise _Problem(name, f"group {name!r} must be an object with hosts, children "
                                 "and vars (or a list of hosts)")
        unknown = [k for k in body if k not in _GROUP_KEYS]
        if unknown:
            raise _Problem(unknown[0], f"unexpected key {unknown[0]!r} in group {name!r}",
                           "a group has only hosts, children and vars")
        for key in ("hosts", "children"):
            if not isinstance(body.get(key, []), list):
                raise _Problem(name, f"{key} of group {name!r} must be a list of names")
        for child in body.get("children", []):
            if not isinstance(child, str):
                raise _Problem(name, f"children of group {name!r} must be group names")
            self.check(validate.group_name, child, child)
            try:
                self.inv.add_child(name, child, self.here)
            except InventoryError as exc:
                raise _Problem(child, exc.detail, exc.hint) from None
        for host in body.get("hosts", []):
            if not isinstance(host, str):
                raise _Problem(name, f"hosts of group {name!r} must be host names")
            self.host(host, name, {})
        try:
            self.inv.group(name, self.here).vars.update(
                self.inv.vars_from(body.get("vars"), self.here, f"vars of group {name!r}"))
        except InventoryError as exc:
            raise _Problem(name, exc.detail, exc.hint) from None

    def host(self, name: str, group: str | None, raw: Any) -> None:
        self.check(validate.host_name, name, name)
        try:
            host_vars = self.inv.vars_from(raw, self.here, f"hostvars of {name!r}")
            self.inv.add_host(name, group, host_vars, self.here)
        except InventoryError as exc:
            raise _Problem(name, exc.detail, exc.hint) from None


__all__ = ["parse"]
