"""Target expressions: which hosts a task runs on.

Grammar (comma-separated terms, whitespace ignored)::

    expr    := term ("," term)*
    term    := ["!"] selector
    selector:= "all" | "group:" PATTERN | PATTERN

``PATTERN`` is a host name (or, after ``group:``, a group name) that may contain the glob
characters ``* ? [ ]``. The selection is the union of the including terms minus the union of
the excluding (``!``) terms. ``group:web`` includes the hosts of ``web``'s child groups.

Mistakes are refused rather than guessed at: an exact host or group name that does not exist,
an including glob that matches nothing, an expression with only exclusions, or an empty final
selection are all errors naming the term.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from scheduler.errors import ValidationError

_GLOB = re.compile(r"[*?\[\]]")
_NAME = re.compile(r"^[A-Za-z0-9*?\[\]][A-Za-z0-9._*?\[\]!-]*$")

__all__ = ["Selector", "Target", "parse_target", "resolve_target"]


@dataclass(frozen=True)
class Selector:
    """One term of a target expression."""

    kind: str  # "all", "group" or "host"
    pattern: str
    exclude: bool

    @property
    def is_glob(self) -> bool:
        return bool(_GLOB.search(self.pattern))

    def __str__(self) -> str:
        body = "all" if self.kind == "all" else (
            f"group:{self.pattern}" if self.kind == "group" else self.pattern)
        return ("!" if self.exclude else "") + body


@dataclass(frozen=True)
class Target:
    """A parsed target expression."""

    selectors: tuple[Selector, ...]

    def __str__(self) -> str:
        return ",".join(str(s) for s in self.selectors)


def parse_target(expr: str) -> Target:
    """Parse ``expr``; raise :class:`ValidationError` naming the offending term."""
    if not expr or not expr.strip():
        raise ValidationError("target is empty", hint="name hosts or groups, e.g. --target group:web")
    selectors: list[Selector] = []
    for raw in expr.split(","):
        term = raw.strip()
        if not term:
            raise ValidationError(f"target {expr!r} has an empty term (two commas in a row?)")
        exclude = term.startswith("!")
        body = term[1:].strip() if exclude else term
        if body == "all":
            selectors.append(Selector("all", "*", exclude))
            continue
        kind = "host"
        if body.startswith("group:"):
            kind, body = "group", body[len("group:"):]
        if not body or not _NAME.match(body):
            raise ValidationError(
                f"target term {term!r} is not a host name, glob or group:NAME",
                hint="names use letters, digits, '.', '_' and '-'; globs use * ? [ ]",
            )
        selectors.append(Selector(kind, body, exclude))
    if all(s.exclude for s in selectors):
        raise ValidationError(
            f"target {expr!r} only excludes hosts",
            hint="say what to include first, e.g. --target 'all,!web-07'",
        )
    return Target(tuple(selectors))


def _match(selector: Selector, hosts: set[str], groups: Mapping[str, set[str]]) -> set[str]:
    if selector.kind == "all":
        return set(hosts)
    if selector.kind == "host":
        if selector.is_glob:
            return {h for h in hosts if fnmatch.fnmatchcase(h, selector.pattern)}
        if selector.pattern not in hosts:
            raise ValidationError(f"target term {str(selector)!r}: no host named {selector.pattern!r}",
                                  hint="see `fleetsched hosts list`")
        return {selector.pattern}
    names = ([g for g in groups if fnmatch.fnmatchcase(g, selector.pattern)]
             if selector.is_glob else [selector.pattern])
    if not selector.is_glob and selector.pattern not in groups:
        raise ValidationError(f"target term {str(selector)!r}: no group named {selector.pattern!r}",
                              hint="see `fleetsched groups list`")
    members: set[str] = set()
    for name in names:
        members |= groups[name]
    return members


def resolve_target(
    target: Target | str,
    hosts: Iterable[str],
    groups: Mapping[str, Iterable[str]],
) -> list[str]:
    """The sorted host names ``target`` selects.

    ``groups`` maps each group name to all its member hosts, child groups included.
    """
    if isinstance(target, str):
        target = parse_target(target)
    host_set = set(hosts)
    group_sets = {name: set(members) for name, members in groups.items()}
    included: set[str] = set()
    excluded: set[str] = set()
    for selector in target.selectors:
        matched = _match(selector, host_set, group_sets)
        if not selector.exclude and not matched:
            raise ValidationError(f"target term {str(selector)!r} selects no hosts")
        (excluded if selector.exclude else included).update(matched)
    selected = sorted(included - excluded)
    if not selected:
        raise ValidationError(f"target {str(target)!r} selects no hosts (everything was excluded)")
    return selected
