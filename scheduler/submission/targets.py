"""Target expressions: which hosts a task runs on.

Grammar (comma-separated terms, whitespace around a term ignored)::

    expr    := term ("," term)*
    term    := ["!" | "&"] selector
    selector:= "all" | "group:" PATTERN | "vars." KEY ["=" VALUE ("|" VALUE)*] | PATTERN

``PATTERN`` is a host name (or, after ``group:``, a group name) that may contain the glob
characters ``* ? [ ]``. ``group:web`` includes the hosts of ``web``'s child groups.

``vars.KEY=VALUE`` selects the hosts whose effective variable ``KEY`` (the host's own vars
merged over its groups' vars, as stored at import and shown by ``hosts show``) equals
``VALUE``; ``vars.KEY=V1|V2`` equals any of them; ``vars.KEY`` alone selects the hosts that
have ``KEY`` set (to anything, null included). Values compare as text, exactly (case
matters): a string as it is, a number as JSON writes it (``8``, ``1.5``), a boolean as
``true``/``false``; a null, list or mapping never equals a value. ``KEY`` is an inventory
variable name (no whitespace, control characters, ``=`` or ``,``); a ``VALUE`` is not empty
and holds no ``,`` or ``|``. A host whose name starts with ``vars.`` is still reachable by a
glob, e.g. ``vars[.]old``.

The selection is (the union of the including terms) intersected with each ``&`` term, minus
the union of the excluding (``!``) terms: ``group:web,&vars.tier=canary`` is the web hosts
whose tier is canary (Ansible's ``&``), ``group:web,!vars.tier=canary`` the others.

Mistakes are refused rather than guessed at: an exact host or group name that does not exist,
an including glob that matches nothing, a ``vars.`` term that matches no host when it is the
only including term, a bad variable name or an empty value, a term both ``&`` and ``!``, an
expression with only exclusions or only ``&`` terms, or an empty final selection are all
errors naming the term or the expression.
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.errors import ValidationError

_GLOB = re.compile(r"[*?\[\]]")
_NAME = re.compile(r"^[A-Za-z0-9*?\[\]][A-Za-z0-9._*?\[\]!-]*$")
# The inventory's variable-name characters (``inventory.validate.VAR_RE``) less ``,``, which
# separates terms here.
_KEY = re.compile(r"^[^\s\x00-\x1f\x7f=,]{1,255}$")
_VALUE = re.compile(r"^[^\x00-\x1f\x7f,|]{1,1000}$")
VARS_PREFIX = "vars."

__all__ = ["Selector", "Target", "host_vars_map", "parse_target", "resolve_target",
           "select_term", "var_text"]


@dataclass(frozen=True)
class Selector:
    """One term of a target expression."""

    kind: str  # "all", "group", "host" or "var" (pattern: the variable's name)
    pattern: str
    exclude: bool
    values: tuple[str, ...] | None = None  # "var": the values it may equal (None: any)
    intersect: bool = False  # an "&" term

    @property
    def is_glob(self) -> bool:
        return self.kind in ("host", "group") and bool(_GLOB.search(self.pattern))

    def __str__(self) -> str:
        if self.kind == "all":
            body = "all"
        elif self.kind == "group":
            body = f"group:{self.pattern}"
        elif self.kind == "var":
            body = VARS_PREFIX + self.pattern + (
                "=" + "|".join(self.values) if self.values is not None else "")
        else:
            body = self.pattern
        return ("!" if self.exclude else "&" if self.intersect else "") + body


@dataclass(frozen=True)
class Target:
    """A parsed target expression."""

    selectors: tuple[Selector, ...]

    @property
    def needs_vars(self) -> bool:
        """Whether resolving it reads the hosts' variables (it has a ``vars.`` term)."""
        return any(s.kind == "var" for s in self.selectors)

    def __str__(self) -> str:
        return ",".join(str(s) for s in self.selectors)


def _var_selector(term: str, body: str, exclude: bool, intersect: bool) -> Selector:
    key, eq, raw = body[len(VARS_PREFIX):].partition("=")
    key = key.strip()
    if not _KEY.match(key):
        raise ValidationError(
            f"target term {term!r}: {key[:60]!r} is not a variable name",
            hint="vars.KEY=VALUE, KEY without whitespace, control characters, '=' or ',', "
                 "e.g. vars.tier=canary")
    if not eq:
        return Selector("var", key, exclude, None, intersect)
    values = tuple(v.strip() for v in raw.split("|"))
    for value in values:
        if not value:
            raise ValidationError(f"target term {term!r} has an empty value",
                                  hint="e.g. vars.tier=canary or vars.rack=r1|r2; "
                                       "vars.KEY alone: the hosts that have KEY set")
        if not _VALUE.match(value):
            raise ValidationError(f"target term {term!r}: value {value[:60]!r} is not valid",
                                  hint="no control characters, at most 1000 characters")
    return Selector("var", key, exclude, tuple(dict.fromkeys(values)), intersect)


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
        intersect = term.startswith("&")
        body = term[1:].strip() if exclude or intersect else term
        if body[:1] in ("!", "&"):
            raise ValidationError(f"target term {term!r} mixes '&' and '!' (or repeats one)",
                                  hint="'&TERM' keeps only hosts TERM selects, '!TERM' drops "
                                       "them: use one")
        if body == "all":
            selectors.append(Selector("all", "*", exclude, None, intersect))
            continue
        if body.startswith(VARS_PREFIX):
            selectors.append(_var_selector(term, body, exclude, intersect))
            continue
        kind = "host"
        if body.startswith("group:"):
            kind, body = "group", body[len("group:"):]
        if not body or not _NAME.match(body):
            raise ValidationError(
                f"target term {term!r} is not a host name, glob, group:NAME or vars.KEY=VALUE",
                hint="names use letters, digits, '.', '_' and '-'; globs use * ? [ ]",
            )
        selectors.append(Selector(kind, body, exclude, None, intersect))
    if all(s.exclude for s in selectors):
        raise ValidationError(
            f"target {expr!r} only excludes hosts",
            hint="say what to include first, e.g. --target 'all,!web-07'",
        )
    if all(s.exclude or s.intersect for s in selectors):
        raise ValidationError(
            f"target {expr!r} has no including term, only '&' (and '!') terms",
            hint="'&' narrows what the other terms include, e.g. "
                 "--target 'group:web,&vars.tier=canary' (or drop the '&')",
        )
    return Target(tuple(selectors))


def var_text(value: Any) -> str | None:
    """A variable's value as ``vars.KEY=VALUE`` compares it: a string as it is, a number as
    JSON writes it, ``true``/``false``; None for a null, list or mapping (never equal)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return None


def _match(selector: Selector, hosts: set[str], groups: Mapping[str, set[str]],
           host_vars: Mapping[str, Mapping[str, Any]]) -> set[str]:
    if selector.kind == "all":
        return set(hosts)
    if selector.kind == "var":
        key, wanted = selector.pattern, selector.values
        out = set()
        for host in hosts:
            held = host_vars.get(host) or {}
            if key in held and (wanted is None or var_text(held[key]) in wanted):
                out.add(host)
        return out
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


def select_term(selector: Selector, hosts: Iterable[str], groups: Mapping[str, Iterable[str]],
                host_vars: Mapping[str, Mapping[str, Any]] | None = None) -> set[str]:
    """The ``hosts`` one term selects, whatever its ``!``/``&`` (a wave's first term); a ``var``
    term needs ``host_vars``. An exact host or group name that does not exist is refused."""
    if selector.kind == "var" and host_vars is None:
        raise TypeError(f"select_term({str(selector)!r}) is a vars. term: pass host_vars")
    return _match(selector, set(hosts), {n: set(m) for n, m in groups.items()}, host_vars or {})


def resolve_target(
    target: Target | str,
    hosts: Iterable[str],
    groups: Mapping[str, Iterable[str]],
    host_vars: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[str]:
    """The sorted host names ``target`` selects.

    ``groups`` maps each group name to all its member hosts, child groups included.
    ``host_vars`` maps each host to its effective variables (:func:`host_vars_map`); it is
    needed only when the expression has a ``vars.`` term (``Target.needs_vars``), and then a
    missing one is a programming error (``TypeError``), never "no host has the variable".
    """
    if isinstance(target, str):
        target = parse_target(target)
    if target.needs_vars and host_vars is None:
        raise TypeError(f"resolve_target({str(target)!r}) has a vars. term: pass host_vars")
    host_set = set(hosts)
    group_sets = {name: set(members) for name, members in groups.items()}
    known = host_vars or {}
    including = [s for s in target.selectors if not s.exclude and not s.intersect]
    included: set[str] = set()
    excluded: set[str] = set()
    narrowed: set[str] | None = None
    for selector in target.selectors:
        matched = _match(selector, host_set, group_sets, known)
        if selector.exclude:
            excluded |= matched
        elif selector.intersect:
            if not matched:
                raise ValidationError(f"target term {str(selector)!r} matches no host")
            narrowed = matched if narrowed is None else narrowed & matched
        else:
            if not matched and (selector.kind != "var" or len(including) == 1):
                raise ValidationError(f"target term {str(selector)!r} selects no hosts")
            included |= matched
    if narrowed is not None:
        included &= narrowed
        if not included:
            raise ValidationError(f"target {str(target)!r} selects no hosts (none of the "
                                  "included hosts matches every '&' term)")
    selected = sorted(included - excluded)
    if not selected:
        raise ValidationError(f"target {str(target)!r} selects no hosts (everything was excluded)")
    return selected


def host_vars_map(session: Any) -> dict[str, dict[str, Any]]:
    """Each stored host -> its effective variables, read in one query (what ``resolve_target``
    needs for a ``vars.`` term; call it only when ``Target.needs_vars``)."""
    import sqlalchemy as sa

    from scheduler.record.models import Host

    h = Host.__table__
    return {name: dict(held or {}) for name, held in session.execute(sa.select(h.c.name, h.c.vars))}
