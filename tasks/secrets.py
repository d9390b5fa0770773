"""Secret references in action parameters: parsing, resolving on the worker, redacting output.

What it owns:

1. the reference syntax: a parameter value (or one argv element, or one extra-var value) that is
   exactly ``@env:NAME`` or ``@file:/absolute/path`` names a secret; ``@@...`` is a literal
   value starting with ``@``;
2. :class:`SecretRef`, the validated form of a reference: it travels through the queue, SQL and
   events as the reference text, never as the value;
3. :func:`resolve`: on the worker, at run time only, replace every :class:`SecretRef` in typed
   parameters by its value, and teach a :class:`Redactor` each value it produced;
4. :class:`Redactor`: masks those values in anything captured from the host (command results,
   error messages) and, through :class:`RedactingFilter`, in log records, before they leave the
   worker (a host command may echo a secret it was given).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from scheduler.errors import FleetschedError

__all__ = [
    "MASK",
    "RedactingFilter",
    "Redactor",
    "SecretError",
    "SecretRef",
    "SecretValue",
    "parse_ref",
    "resolve",
]

MASK = "***"
# Fragments of a secret shorter than this, at the cut of a captured head or tail, are left
# alone (masking every single matching character would destroy the output and hide nothing).
MIN_FRAGMENT = 3

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


class Redactor:
    """The secret values resolved for one job, and the masking of them in any text."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: set[str] = set()
        for v in values:
            self.add(v)

    def add(self, value: str) -> None:
        """Remember a secret value, each line of a multi-line one (like a PEM key), and the
        forms it takes when quoted for a shell (``shlex``), embedded in JSON or ``repr``-ed."""
        if not value:
            return
        forms = {value} | {ln.strip() for ln in value.splitlines() if len(ln.strip()) >= MIN_FRAGMENT}
        for form in list(forms):
            escaped = json.dumps(form, ensure_ascii=False)[1:-1]
            forms |= {escaped, form.replace("'", "'\"'\"'"), escaped.replace("'", "'\"'\"'"),
                      repr(form)[1:-1]}  # as a log line's %r of a list shows it
        self._values |= forms

    def __bool__(self) -> bool:
        return bool(self._values)

    def redact(self, text: str, *, head: bool = False, tail: bool = False) -> str:
        """``text`` with every secret value masked. ``head``: the text is the start of a longer
        output, so a secret's beginning at its end is masked too; ``tail`` likewise for a
        secret's end at its start."""
        if not text or not self._values:
            return text
        for value in sorted(self._values, key=len, reverse=True):
            text = text.replace(value, MASK)
        if head:
            text = self._mask_cut_end(text)
        if tail:
            text = self._mask_cut_start(text)
        return text

    def _mask_cut_end(self, text: str) -> str:
        for value in self._values:
            for n in range(min(len(value) - 1, len(text)), MIN_FRAGMENT - 1, -1):
                if text.endswith(value[:n]):
                    return text[:-n] + MASK
        return text

    def _mask_cut_start(self, text: str) -> str:
        for value in self._values:
            for n in range(min(len(value) - 1, len(text)), MIN_FRAGMENT - 1, -1):
                if text.startswith(value[-n:]):
                    return MASK + text[n:]
        return text

    def result(self, result: Any) -> Any:
        """A copy of a ``CommandResult`` with its command and captured output masked."""
        if not self._values:
            return result
        return dataclasses.replace(
            result,
            command=self.redact(result.command),
            stdout_head=self.redact(result.stdout_head, head=True),
            stdout_tail=self.redact(result.stdout_tail, tail=True),
            stderr_head=self.redact(result.stderr_head, head=True),
            stderr_tail=self.redact(result.stderr_tail, tail=True),
        )

    def action_result(self, result: Any) -> Any:
        """A copy of an ``ActionResult`` with its command results, steps, error and warnings
        masked (a step keeps the same masked result as ``results``)."""
        if not self._values:
            return result
        results = {id(r): self.result(r) for r in result.results}
        steps = tuple(dataclasses.replace(
            st, command=self.redact(st.command),
            result=None if st.result is None
            else results.get(id(st.result)) or self.result(st.result),
            error=None if st.error is None else self.redact(st.error),
            note=None if st.note is None else self.redact(st.note),
        ) for st in getattr(result, "steps", ()))
        changes = {"steps": steps} if steps else {}
        return dataclasses.replace(
            result,
            results=[results[id(r)] for r in result.results],
            error=None if result.error is None else self.redact(result.error),
            warnings=tuple(self.redact(w) for w in getattr(result, "warnings", ())),
            **changes,
        )


class RedactingFilter(logging.Filter):
    """A logging filter that masks a :class:`Redactor`'s values in every record it passes.

    Attach it to the worker's handlers (not loggers: a logger's filter does not see records of
    its children), so whatever any library logs is masked before it is written."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self.redactor = redactor

    def filter(self, record: logging.LogRecord) -> bool:
        if self.redactor:
            message = record.getMessage()
            record.msg = self.redactor.redact(message)
            record.args = None
            if record.exc_info and not record.exc_text:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = self.redactor.redact(record.exc_text)
        return True


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
