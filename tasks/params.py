"""Declared action parameters and their validation into typed values.

What it owns:

1. :class:`Param`, one declared parameter (name, type, help, required, default, secret);
2. :func:`validate_params`: unknown, missing and mistyped parameters each give one line, e.g.
   ``action copy: parameter 'mode' must be an octal file mode like 0644, got '999'``;
3. refusing a ``{host.*}`` placeholder in a parameter whose type does not fill them in
   (``ParamType.placeholders``): it would otherwise be used literally (a file named
   ``{host.name}``).

The types themselves live in :mod:`tasks.paramtypes` and are re-exported here.

Secrets: text-like values (and each argv element, each extra-var value) may be a reference
``@env:NAME`` / ``@file:/path`` (see :mod:`tasks.secrets`); they validate to a
:class:`SecretRef`. A parameter declared ``secret=True`` accepts only a reference, so a literal
secret can never be written into the queue or the database; an error about it never shows the
value it was given.
"""

from __future__ import annotations

import copy
import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.errors import ValidationError
from tasks.paramtypes import (
    Argv,
    BadValue,
    Boolean,
    Choice,
    Duration,
    Integer,
    KeyValues,
    LocalPath,
    Mode,
    Owner,
    ParamType,
    RemotePath,
    Sha256,
    ShellScript,
    Text,
)
from tasks.secrets import SecretError, SecretRef, parse_ref

__all__ = [
    "Argv", "Boolean", "Choice", "Duration", "Integer", "KeyValues", "LocalPath", "Mode",
    "Owner", "Param", "ParamType", "RemotePath", "Sha256", "ShellScript", "Text",
    "validate_params",
]


@dataclass(frozen=True)
class Param:
    """One declared parameter of an action."""

    name: str
    type: ParamType
    help: str
    required: bool = False
    default: Any = None  # a typed value (what parse would return), or None for "not set"
    secret: bool = False  # only a reference (@env:NAME / @file:/path) is accepted

    def describe(self) -> dict[str, Any]:
        """What ``fleetsched actions show`` prints about this parameter."""
        return {
            "name": self.name,
            "type": self.type.name,
            "required": self.required,
            "default": None if self.default is None else self.type.show(self.default),
            "secret": self.secret,
            "help": self.help,
        }


_HOST_PLACEHOLDER = re.compile(r"\{host\.")


def _has_placeholder(raw: Any) -> bool:
    if isinstance(raw, str):
        return bool(_HOST_PLACEHOLDER.search(raw))
    if isinstance(raw, (list, tuple)):
        return any(_has_placeholder(v) for v in raw)
    if isinstance(raw, Mapping):
        return any(_has_placeholder(v) for v in raw.values())
    return False


def _refuse_placeholder(action: str, declared: Mapping[str, Param], name: str) -> None:
    taking = [n for n, p in declared.items() if getattr(p.type, "placeholders", False)]
    where = (f"only {', '.join(taking)} {'takes' if len(taking) == 1 else 'take'} them"
             if taking else "none of its parameters takes them")
    raise ValidationError(f"action {action}: parameter {name!r} does not take {{host.*}} "
                          f"placeholders ({where})",
                          "write the value itself; see: fleetsched actions show " + action)


def _shown(raw: Any) -> str:
    text = raw if isinstance(raw, str) else repr(raw)
    return repr(text if len(text) <= 60 else text[:57] + "...")


def validate_params(action: str, declared: Mapping[str, Param], raw: Mapping[str, Any]) -> dict[str, Any]:
    """Typed values for every declared parameter (defaults filled in; None when optional and
    unset). Raises :class:`ValidationError` with one line for the first problem found."""
    if not isinstance(raw, Mapping):
        raise ValidationError(f"action {action}: parameters must be a mapping of name to value")
    for key in raw:
        if key not in declared:
            close = difflib.get_close_matches(str(key), list(declared), n=1)
            hint = f"did you mean {close[0]!r}?" if close else None
            known = ", ".join(declared) or "none"
            raise ValidationError(
                f"action {action}: unknown parameter {str(key)!r} (known: {known})",
                hint or f"see: fleetsched actions show {action}")
    out: dict[str, Any] = {}
    for name, param in declared.items():
        value = raw.get(name)
        if value is None or (isinstance(value, str) and value == "" and not param.required
                             and not isinstance(param.type, (Text, Argv))):
            if param.required:
                raise ValidationError(f"action {action}: missing required parameter {name!r} "
                                      f"({param.help})", f"see: fleetsched actions show {action}")
            out[name] = copy.deepcopy(param.default)  # a default list is never shared
            continue
        if not getattr(param.type, "placeholders", False) and _has_placeholder(value):
            _refuse_placeholder(action, declared, name)
        out[name] = _validate_one(action, param, value)
    return out


def _validate_one(action: str, param: Param, value: Any) -> Any:
    prefix = f"action {action}: parameter {param.name!r}"
    if param.secret:
        ref = None
        if isinstance(value, str):
            try:
                ref = parse_ref(value)
            except SecretError as exc:
                raise ValidationError(f"{prefix}: {exc}") from None
        if not isinstance(ref, SecretRef):
            # never echo what was given: it may be the secret itself
            raise ValidationError(
                f"{prefix} is secret: give a reference @env:NAME or @file:/path, not the value",
                "the worker reads the value at run time; it never enters the queue or database")
        return ref
    try:
        return param.type.parse(value)
    except BadValue as exc:
        detail = str(exc)
        if detail.startswith("must"):
            raise ValidationError(f"{prefix} {detail}, got {_shown(value)}") from None
        if detail:
            raise ValidationError(f"{prefix}: {detail}") from None
        raise ValidationError(f"{prefix} must be {param.type.expected}, got {_shown(value)}") from None
