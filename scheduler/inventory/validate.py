"""Validation of host names, group names, addresses, users, ports and variable values.

These strings end up on an ``ssh`` command line or in a paramiko connect call, so the rule is
the one OpenSSH adopted after CVE-2023-51385: no shell metacharacters, no whitespace, no
control characters, and no leading ``-`` (which a command line would read as an option).
Everything here returns the cleaned value or raises ``ValueError`` with a short reason; the
callers turn that into an error naming the file and line, or the CLI option.

Also here: ``plain_vars``, which turns parsed variable values into JSON-safe data within a
size budget (a YAML file of aliases can otherwise expand to gigabytes), and the rule for
which variables are secrets that fleetsched refuses to store.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import math
import re
from collections.abc import Mapping
from typing import Any

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
GROUP_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
LABEL_RE = re.compile(r"^[A-Za-z0-9_]([A-Za-z0-9_-]*[A-Za-z0-9_])?$")
VAR_RE = re.compile(r"^[^\s\x00-\x1f\x7f=]+$")

MAX_NAME = 253
MAX_USER = 64
MAX_VARS_NODES = 200_000
"""How many values (scalars, list items, mapping entries) the vars of one inventory may hold
after YAML aliases are expanded."""

SECRET_VAR_RE = re.compile(
    r"(password|passwd|passphrase|secret|token|api_?key|_pass$|^ansible_.*_pass$)",
    re.IGNORECASE,
)
"""Variables that hold secrets (``ansible_password``, ``ansible_become_pass``, ``db_secret``
...). fleetsched never stores a secret in SQL: such variables are skipped at import, and
reported by name (never by value)."""


def _describe(value: str) -> str:
    for ch in value:
        if ch.isspace():
            return "whitespace"
        if ord(ch) < 32 or ord(ch) == 127:
            return f"control character {ch!r}"
    bad = next((ch for ch in value if not (ch.isalnum() and ch.isascii()) and ch not in "._-"),
               None)
    if bad is not None:
        return f"character {bad!r}"
    return "characters"


def host_name(value: Any) -> str:
    """A host's inventory name: letters, digits, ``.``, ``_``, ``-``; starts alphanumeric."""
    if not isinstance(value, str) or not value:
        raise ValueError("host name must be a non-empty string")
    if len(value) > MAX_NAME:
        raise ValueError(f"host name is longer than {MAX_NAME} characters")
    if value.startswith("-"):
        raise ValueError(f"host name {value!r} starts with '-'")
    if not NAME_RE.fullmatch(value):
        raise ValueError(f"host name {value!r} contains {_describe(value)}; "
                         "use letters, digits, '.', '_' and '-'")
    return value


def group_name(value: Any) -> str:
    """A group name: letters, digits, ``.``, ``_``, ``-``; starts alphanumeric or ``_``."""
    if not isinstance(value, str) or not value:
        raise ValueError("group name must be a non-empty string")
    if len(value) > MAX_NAME:
        raise ValueError(f"group name is longer than {MAX_NAME} characters")
    if value.startswith("-"):
        raise ValueError(f"group name {value!r} starts with '-'")
    if not GROUP_RE.fullmatch(value):
        raise ValueError(f"group name {value!r} contains {_describe(value)}; "
                         "use letters, digits, '.', '_' and '-'")
    if value == "_meta":  # Ansible's JSON inventory keeps the host vars under this key
        raise ValueError("group name '_meta' is reserved by Ansible's JSON inventory")
    return value


def tenant(value: Any) -> str:
    """A customer's name (``fleetsched_tenant``): as a host name, at most 255 characters."""
    if not isinstance(value, str) or not value:
        raise ValueError("fleetsched_tenant must be a non-empty string")
    if len(value) > 255 or not NAME_RE.fullmatch(value):
        raise ValueError(f"fleetsched_tenant {value!r} is not a name: use letters, digits, "
                         "'.', '_' and '-', at most 255 characters")
    return value


def address(value: Any) -> str:
    """A host name (RFC 1123 labels, ``_`` tolerated) or an IPv4/IPv6 literal."""
    if not isinstance(value, str) or not value:
        raise ValueError("address must be a non-empty string")
    if value.startswith("-"):
        raise ValueError(f"address {value!r} starts with '-'")
    if ":" in value:
        literal = value[1:-1] if value.startswith("[") and value.endswith("]") else value
        head, _, scope = literal.partition("%")
        try:
            ipaddress.IPv6Address(head)
        except ValueError:
            raise ValueError(f"address {value!r} is not a valid IPv6 address") from None
        if scope and not re.fullmatch(r"[A-Za-z0-9_.-]{1,32}", scope):
            raise ValueError(f"address {value!r} has an invalid IPv6 zone")
        return literal
    if re.fullmatch(r"[0-9.]+", value):
        try:
            return str(ipaddress.IPv4Address(value))
        except ValueError:
            raise ValueError(f"address {value!r} is not a valid IPv4 address") from None
    if len(value) > MAX_NAME:
        raise ValueError(f"address is longer than {MAX_NAME} characters")
    labels = value[:-1].split(".") if value.endswith(".") else value.split(".")
    for label in labels:
        if not label or len(label) > 63 or not LABEL_RE.fullmatch(label):
            raise ValueError(f"address {value!r} is not a host name or IP address "
                             f"(it contains {_describe(value)})")
    return value


def user(value: Any) -> str:
    """A login name: letters, digits, ``.``, ``_``, ``-``; starts alphanumeric or ``_``."""
    if not isinstance(value, str) or not value:
        raise ValueError("user must be a non-empty string")
    if len(value) > MAX_USER:
        raise ValueError(f"user is longer than {MAX_USER} characters")
    if value.startswith("-"):
        raise ValueError(f"user {value!r} starts with '-'")
    if not USER_RE.fullmatch(value):
        raise ValueError(f"user {value!r} contains {_describe(value)}; "
                         "use letters, digits, '.', '_' and '-'")
    return value


def port(value: Any) -> int:
    """A TCP port 1-65535 (an int, or a string of digits as INI files give it)."""
    if isinstance(value, bool):
        raise ValueError(f"port {value!r} is not a number")
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,5}", value.strip()):
        value = int(value)
    if not isinstance(value, int):
        raise ValueError(f"port {value!r} is not a number")
    if not 1 <= value <= 65535:
        raise ValueError(f"port {value} is out of range 1-65535")
    return value


def var_name(value: Any) -> str:
    """A variable name: a non-empty string without whitespace or control characters.

    Ansible only warns about names that are not identifiers (``foo-bar``), so they are kept."""
    if not isinstance(value, str) or not value or len(value) > 255 or not VAR_RE.fullmatch(value):
        raise ValueError(f"variable name {value!r} is not valid (no whitespace, control "
                         "characters or '=')")
    return value


def is_secret_var(name: str) -> bool:
    """Whether variable ``name`` holds a secret that must not be stored."""
    return bool(SECRET_VAR_RE.search(name))


REFERENCE_VARS = ("ansible_become_password", "ansible_become_pass")
"""Secret variables stored when their value is a secret reference (``@env:NAME`` /
``@file:/path``, read on the worker at run time: tasks/executors/ssh/become.py); a literal
value of them is skipped like any other secret."""


def is_stored_reference(name: str, value: Any) -> bool:
    """Whether ``name = value`` is a secret variable kept as its reference, not its value."""
    if name not in REFERENCE_VARS or not isinstance(value, str):
        return False
    from tasks.secrets import SecretError, SecretRef, parse_ref

    try:
        return isinstance(parse_ref(value), SecretRef)
    except SecretError:
        return False


PRIVATE_KEY_RE = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?"
                            r"(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL)


def public_vars(values: Mapping[str, Any], found: set[str] | None = None,
                path: str = "") -> dict[str, Any]:
    """``values`` without what must not be stored or shown, at any depth: variables whose name
    says secret (``db: {password: ...}`` too) are dropped, and credentials inside text (a URL's
    password, ``password=`` pairs, secret query parameters, a private key block) are masked.
    The dotted names of what was dropped or masked are added to ``found``."""
    from scheduler.redact import MASK, redact_text

    def clean(value: Any, where: str) -> Any:
        if isinstance(value, Mapping):
            return public_vars(value, found, where + ".")
        if isinstance(value, list):
            return [clean(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, str):
            masked = PRIVATE_KEY_RE.sub(MASK, redact_text(value, one_line=False))
            if masked != value and found is not None:
                found.add(where)
            return masked
        return value

    out: dict[str, Any] = {}
    for key, value in values.items():
        if is_secret_var(str(key)) and not (path == "" and is_stored_reference(key, value)):
            if found is not None:
                found.add(path + str(key))
            continue
        out[key] = clean(value, path + str(key))
    return out


class Budget:
    """A countdown of values, shared by all the vars of one inventory."""

    def __init__(self, limit: int = MAX_VARS_NODES) -> None:
        self.left = limit

    def take(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise ValueError(f"variables hold more than {MAX_VARS_NODES} values "
                             "(YAML aliases expanding?)")


def plain(value: Any, budget: Budget, depth: int = 0) -> Any:
    """``value`` as JSON-safe data: dates become ISO strings, sets sorted lists, keys strings,
    NaN/infinity and bytes strings. Raises ``ValueError`` past the budget or nesting limit."""
    budget.take()
    if depth > 64:
        raise ValueError("variables are nested more than 64 levels deep")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (dt.date, dt.datetime, dt.time)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): plain(v, budget, depth + 1) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return sorted((plain(v, budget, depth + 1) for v in value), key=repr)
    if isinstance(value, (list, tuple)):
        return [plain(v, budget, depth + 1) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "backslashreplace")
    return str(value)


__all__ = [
    "Budget", "MAX_NAME", "MAX_USER", "address", "group_name", "host_name", "is_secret_var",
    "plain", "port", "tenant", "user", "var_name",
]
