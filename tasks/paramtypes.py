"""The parameter types of actions: from what an operator typed to a typed value, and back.

Each type turns a string from the CLI or a JSON value into a typed value (:meth:`parse`,
raising :class:`BadValue`), and a typed value into the JSON form that parses back to it
(:meth:`dump`). ``expected`` completes the sentence "must be ..." of a validation error.
Text-like types (``refs``) validate a whole value ``@env:NAME`` / ``@file:/path`` to a
:class:`~tasks.secrets.SecretRef`, and ``@@x`` to the literal ``@x``. Types whose values are
searched for ``{host.*}`` placeholders at run time say so (``placeholders``); a placeholder in
any other parameter is refused at validation (:func:`tasks.params.validate_params`).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from scheduler.errors import ValidationError
from tasks.argv import PlaceholderError, check_placeholders
from tasks.secrets import SecretError, SecretRef, parse_ref
from tasks.shellscript import check_script

__all__ = [
    "Argv", "BadValue", "Boolean", "Choice", "Duration", "Integer", "KeyValues", "LocalPath",
    "Mode", "Owner", "ParamType", "RemotePath", "Sha256", "ShellScript", "Text",
]

MAX_TEXT = 65_536


class BadValue(ValueError):
    """A value does not fit its type; the message (if any) replaces the generic one."""


def _text_or_ref(raw: str, refs: bool) -> str | SecretRef:
    if "\0" in raw:
        raise BadValue("must not contain a NUL character")
    if not refs:
        return raw
    try:
        parsed = parse_ref(raw)
    except SecretError as exc:
        raise BadValue(str(exc)) from None
    return raw if parsed is None else parsed


def _dump_text(value: Any) -> Any:
    if isinstance(value, SecretRef):
        return str(value)
    if isinstance(value, str) and value.startswith("@"):
        return "@" + value  # the escaped literal, so validation gives it back unchanged
    return value


class ParamType:
    """Base of the parameter types: ``expected`` completes "must be ...", ``name`` is shown by
    ``fleetsched actions show``; ``refs`` says whether a value may be a secret reference."""

    name = "value"
    expected = "a value"
    refs = False
    placeholders = False  # ``{host.*}`` in a value is filled in at run time (else: refused)

    def parse(self, raw: Any) -> Any:
        raise NotImplementedError

    def dump(self, value: Any) -> Any:
        """The JSON form of a typed value (what validation accepts back unchanged)."""
        return value

    def show(self, value: Any) -> str:
        dumped = self.dump(value)
        if isinstance(dumped, list):
            return shlex.join(str(v) for v in dumped)
        if isinstance(dumped, dict):
            return " ".join(f"{k}={shlex.quote(str(v))}" for k, v in dumped.items())
        if isinstance(dumped, bool):
            return "true" if dumped else "false"
        return str(dumped)


class Text(ParamType):
    name = "text"
    expected = "a text"
    refs = True

    def __init__(self, pattern: str | None = None, expected: str | None = None,
                 refs: bool = True, max_len: int = MAX_TEXT) -> None:
        self.pattern = re.compile(pattern) if pattern else None
        self.expected = expected or self.expected
        self.refs = refs
        self.max_len = max_len

    def parse(self, raw: Any) -> Any:
        if isinstance(raw, (int, float)) and not isinstance(raw, bool):
            raw = str(raw)
        if not isinstance(raw, str) or len(raw) > self.max_len:
            raise BadValue
        value = _text_or_ref(raw, self.refs)
        if self.pattern and isinstance(value, str) and not self.pattern.fullmatch(value):
            raise BadValue
        return value

    def dump(self, value: Any) -> Any:
        return _dump_text(value) if self.refs else value


def _json_as(raw: Any, opener: str, kind: type) -> Any:
    """A command-line string that is a JSON ``kind`` (it starts with ``opener`` and decodes to
    one) as that value; anything else unchanged. ``[ -f /x ]`` is not JSON, so it stays text."""
    if not isinstance(raw, str) or not raw.lstrip().startswith(opener):
        return raw
    try:
        decoded = json.loads(raw)
    except ValueError:
        return raw
    return decoded if isinstance(decoded, kind) else raw


class Argv(ParamType):
    """A command as an argv list (text that is a JSON list counts as that list), or a string
    split with ``shlex.split`` at validation. Each element may be a secret reference (the whole
    element) and hold ``{host.*}`` placeholders."""

    name = "argv"
    expected = "a command: a list of strings or a string split like a shell would (shlex)"
    refs = True
    placeholders = True

    def __init__(self, allow_empty: bool = False, extra_placeholders: Sequence[str] = ()) -> None:
        self.allow_empty = allow_empty
        self.extra = tuple(extra_placeholders)
        if allow_empty:
            self.name = "args"
            self.expected = "arguments: a list of strings or a string split like a shell would"

    def parse(self, raw: Any) -> list[str | SecretRef]:
        raw = _json_as(raw, "[", list)  # -p 'cmd=["sh", "-c", "a | b"]' is that list
        if isinstance(raw, str):
            try:
                items: list[Any] = shlex.split(raw)
            except ValueError as exc:
                raise BadValue(f"must be {self.expected}, but it does not split: {exc}") from None
        elif isinstance(raw, (list, tuple)):
            items = list(raw)
        else:
            raise BadValue
        if not items and not self.allow_empty:
            raise BadValue("must not be empty")
        out: list[str | SecretRef] = []
        for n, item in enumerate(items, 1):
            # never coerced: ["sleep", 5] from YAML or JSON is refused, not run as "5"
            if not isinstance(item, str):
                raise BadValue(f"element {n} of the list is {json.dumps(item, default=str)[:40]}, "
                               "not a string (quote it)")
            if len(item) > MAX_TEXT:
                raise BadValue
            value = _text_or_ref(item, True)
            if isinstance(value, str):
                try:
                    check_placeholders(value)
                except PlaceholderError as exc:
                    raise BadValue(str(exc)) from None
            out.append(value)
        if out and isinstance(out[0], SecretRef):
            raise BadValue("must not start with a secret reference (the program is not a secret)")
        return out

    def dump(self, value: Any) -> Any:
        return [_dump_text(v) for v in value]


class ShellScript(ParamType):
    """A script for ``sh -c``, kept as written (never a secret reference: the plan shows it).
    ``{host.*}`` placeholders may stand only where their quoted value is one shell word
    (:func:`tasks.shellscript.check_script`)."""

    name = "shell script"
    expected = "a shell script (text)"
    placeholders = True

    def parse(self, raw: Any) -> str:
        if not isinstance(raw, str) or len(raw) > MAX_TEXT:
            raise BadValue
        if "\0" in raw:
            raise BadValue("must not contain a NUL character")
        if not raw.strip():
            raise BadValue("must not be empty")
        try:
            check_script(raw)
        except PlaceholderError as exc:
            raise BadValue(str(exc)) from None
        return raw


class Integer(ParamType):
    name = "integer"

    def __init__(self, min: int | None = None, max: int | None = None) -> None:
        self.min, self.max = min, max
        lo = "" if min is None else f" >= {min}"
        hi = "" if max is None else (f" and <= {max}" if lo else f" <= {max}")
        self.expected = f"an integer{lo}{hi}"

    def parse(self, raw: Any) -> int:
        if isinstance(raw, bool):
            raise BadValue
        try:
            value = int(raw.strip(), 10) if isinstance(raw, str) else int(raw)
        except (TypeError, ValueError):
            raise BadValue from None
        if isinstance(raw, float) and raw != value:
            raise BadValue
        if (self.min is not None and value < self.min) or (self.max is not None and value > self.max):
            raise BadValue
        return value


class Boolean(ParamType):
    name = "boolean"
    expected = "true or false"
    _WORDS = {"true": True, "yes": True, "on": True, "1": True,
              "false": False, "no": False, "off": False, "0": False}

    def parse(self, raw: Any) -> bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.strip().lower() in self._WORDS:
            return self._WORDS[raw.strip().lower()]
        raise BadValue


class Duration(ParamType):
    """Seconds as a float; accepts ``90``, ``90s``, ``10m``, ``1h30m``."""

    name = "duration"

    def __init__(self, min_s: float = 0.0, max_s: float | None = None) -> None:
        self.min_s, self.max_s = min_s, max_s
        self.expected = "a duration like 30s, 10m or 1h30m"
        if max_s is not None:
            from scheduler.parse import format_duration
            self.expected += f" (at most {format_duration(max_s)})"

    def parse(self, raw: Any) -> float:
        from scheduler.parse import parse_duration

        if isinstance(raw, bool):
            raise BadValue
        if isinstance(raw, (int, float)):
            seconds = float(raw)
        elif isinstance(raw, str):
            try:
                seconds = parse_duration(raw, bare_seconds=True).total_seconds()
            except ValidationError:
                raise BadValue from None
        else:
            raise BadValue
        if seconds < self.min_s or (self.max_s is not None and seconds > self.max_s):
            raise BadValue
        return seconds

    def dump(self, value: Any) -> Any:
        from scheduler.parse import format_duration

        return format_duration(value) if float(value).is_integer() else value


class Mode(ParamType):
    name = "mode"
    expected = "an octal file mode like 0644"

    def parse(self, raw: Any) -> int:
        if isinstance(raw, int) and not isinstance(raw, bool) and 0 <= raw <= 0o7777:
            return raw  # JSON numbers are taken as the mode's value (0o644 == 420)
        if not isinstance(raw, str) or not re.fullmatch(r"0?[0-7]{3,4}|0o[0-7]{3,4}", raw.strip()):
            raise BadValue
        value = int(raw.strip().removeprefix("0o"), 8)
        if value > 0o7777:
            raise BadValue
        return value

    def dump(self, value: Any) -> Any:
        return f"{value:04o}"


class Owner(ParamType):
    """``user`` or ``user:group`` (names or numeric ids) for ``chown``."""

    name = "owner"
    expected = "an owner like www-data or www-data:www-data"
    _NAME = r"(?:[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?|[0-9]{1,10})"
    _RE = re.compile(rf"{_NAME}(?::{_NAME})?")

    def parse(self, raw: Any) -> str:
        if not isinstance(raw, str) or not self._RE.fullmatch(raw):
            raise BadValue
        return raw


class _Path(ParamType):
    refs = False

    def parse(self, raw: Any) -> str:
        if not isinstance(raw, str) or not raw.startswith("/") or len(raw) > 4096:
            raise BadValue
        if "\0" in raw or "\n" in raw:
            raise BadValue("must not contain NUL or newline characters")
        if raw.endswith("/") and raw != "/" and self.name != "directory":
            raise BadValue("must name a file, not end with '/'")
        return raw


class LocalPath(_Path):
    """An absolute path on the worker node (read when the job runs, not at submission)."""

    name = "local path"
    expected = "an absolute path on the worker node like /srv/fleet/fw-4.2.bin"


class RemotePath(_Path):
    """An absolute path on the host; with ``placeholders``, ``{host.*}`` tokens are filled in at
    run time, each value one path component (:func:`tasks.argv.render_path`)."""

    name = "remote path"
    expected = "an absolute path on the host like /etc/app/app.conf"

    def __init__(self, directory: bool = False, placeholders: bool = False) -> None:
        self.placeholders = placeholders
        if directory:
            self.name = "directory"
            self.expected = "an absolute directory path on the host like /var/tmp"

    def parse(self, raw: Any) -> str:
        path = super().parse(raw)
        if self.placeholders:
            try:
                check_placeholders(path)
            except PlaceholderError as exc:
                raise BadValue(str(exc)) from None
        return path


class Sha256(ParamType):
    name = "sha256"
    expected = "a SHA-256 checksum (64 hex digits)"

    def parse(self, raw: Any) -> str:
        if not isinstance(raw, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", raw.strip()):
            raise BadValue
        return raw.strip().lower()


class KeyValues(ParamType):
    """``{"k": "v"}``, a JSON object, or ``k=v k2='v 2'`` (split with shlex); keys are names,
    values are text (or secret references)."""

    name = "key=value..."
    expected = "key=value pairs like 'version=4.2 region=eu' (keys are names like app_port)"
    refs = True
    _KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

    def parse(self, raw: Any) -> dict[str, Any]:
        pairs: list[tuple[Any, Any]]
        raw = _json_as(raw, "{", dict)  # -p 'extra_vars={"v": "4.2"}' is that object
        if isinstance(raw, Mapping):
            pairs = list(raw.items())
        elif isinstance(raw, str):
            try:
                words = shlex.split(raw)
            except ValueError as exc:
                raise BadValue(f"must be {self.expected}, but it does not split: {exc}") from None
            pairs = []
            for word in words:
                if "=" not in word:
                    raise BadValue
                k, v = word.split("=", 1)
                pairs.append((k, v))
        elif isinstance(raw, (list, tuple)) and all(isinstance(w, str) and "=" in w for w in raw):
            pairs = [tuple(w.split("=", 1)) for w in raw]  # type: ignore[misc]
        else:
            raise BadValue
        out: dict[str, Any] = {}
        for k, v in pairs:
            if not isinstance(k, str) or not self._KEY.fullmatch(k):
                raise BadValue(f"has a bad key {str(k)[:40]!r}; keys are names like app_port")
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                v = str(v)
            if not isinstance(v, str) or len(v) > MAX_TEXT:
                raise BadValue(f"has a value for {k!r} that is not text")
            out[k] = _text_or_ref(v, True)
        return out

    def dump(self, value: Any) -> Any:
        return {k: _dump_text(v) for k, v in value.items()}


class Choice(ParamType):
    name = "choice"

    def __init__(self, *options: str) -> None:
        self.options = options
        self.expected = "one of " + ", ".join(options)

    def parse(self, raw: Any) -> str:
        if raw not in self.options:
            raise BadValue
        return raw
