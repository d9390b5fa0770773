"""Secret references in action parameters: parsing them, and resolving them on the worker.

What it owns:

1. the reference syntax: a parameter value (or one argv element, or one extra-var value) that is
   exactly ``@env:NAME`` or ``@file:/absolute/path`` names a secret; ``@@...`` is a literal
   value starting with ``@``;
2. :class:`SecretRef`, the validated form of a reference: it travels through the queue, SQL and
   events as the reference text, never as the value;
3. :func:`resolve`: on the worker, at run time only, replace every :class:`SecretRef` in typed
   parameters by its value, and teach a :class:`~scheduler.redact.Redactor` each value it
   produced: it masks them in anything captured from the host and, through its
   ``RedactingFilter``, in log records, before they leave the worker (a host command may echo
   a secret it was given).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from scheduler.errors import FleetschedError
from scheduler.redact import MASK, Redactor

__all__ = [
    "SecretError",
    "SecretRef",
    "SecretValue",
    "parse_ref",
    "resolve",
]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SecretError(FleetschedError):
    """A secret reference is malformed, or cannot be resolved on this worker."""

    exit_code = 2


@dataclass(frozen=True)
class SecretRef:
    """A validated reference to a secret: ``kind`` is ``env`` or ``file``; ``name`` the variable
    or the absolute path. Its text form is the reference itself, never the value."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"@{self.kind}:{self.name}"

    def fetch(self) -> str:
        """The secret's value, read now on this node. One trailing newline of a file is dropped."""
        if self.kind == "env":
            value = os.environ.get(self.name)
            if value is None:
                raise SecretError(f"secret {self} is not set in this worker's environment",
                                  "export the variable in the worker's environment (systemd unit)")
            return value
        try:
            with open(self.name, encoding="utf-8") as fh:
                value = fh.read()
        except OSError as exc:
            raise SecretError(f"secret {self} cannot be read on this worker: {exc.strerror}",
                              "put the file on every worker node, readable by the worker") from None
        except UnicodeDecodeError:
            raise SecretError(f"secret {self} is not UTF-8 text") from None
        return value[:-1] if value.endswith("\n") else value


class SecretValue(str):
    """A resolved secret: a ``str`` that knows it is one, so placeholders are never substituted
    inside it and its ``repr`` never shows it (a stray ``%r`` in a log line prints ``***``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return repr(MASK)


def parse_ref(text: str) -> SecretRef | str | None:
    """``@env:NAME`` / ``@file:/path`` -> :class:`SecretRef`; ``@@x`` -> the literal ``"@x"``;
    anything else not starting with ``@`` -> None (a plain value). Raises :class:`SecretError`
    for a malformed reference (the message shows the reference, which is not a secret)."""
    if not text.startswith("@"):
        return None
    if text.startswith("@@"):
        return text[1:]
    if text.startswith("@env:"):
        name = text[5:]
        if not _ENV_NAME.fullmatch(name):
            raise SecretError(f"secret reference {text!r} must be @env:NAME with NAME a variable "
                              "name like DNS_KEY")
        return SecretRef("env", name)
    if text.startswith("@file:"):
        path = text[6:]
        if not path.startswith("/") or "\0" in path or "\n" in path:
            raise SecretError(f"secret reference {text!r} must be @file:/absolute/path")
        return SecretRef("file", path)
    raise SecretError(f"value {text[:40]!r} starts with '@' but is not a secret reference "
                      "(@env:NAME or @file:/path); write @@ for a literal '@'")


def resolve(params: dict[str, Any], redactor: Redactor | None = None) -> dict[str, Any]:
    """Typed parameters with every :class:`SecretRef` replaced by its value (read now, on this
    worker). Each value is added to ``redactor``. Call it only in the process that runs the job,
    just before the action; never store or log what it returns."""
    red = redactor if redactor is not None else Redactor()

    def walk(value: Any) -> Any:
        if isinstance(value, SecretRef):
            secret = value.fetch()
            red.add(secret)
            return SecretValue(secret)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, tuple):
            return tuple(walk(v) for v in value)
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return {k: walk(v) for k, v in params.items()}
