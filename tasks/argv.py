"""Argument vectors for host commands: placeholders, and the rule that nothing is a shell.

What it owns:

1. the placeholder syntax inside argv elements: ``{host.name}``, ``{host.address}``,
   ``{host.port}``, ``{host.user}``, ``{host.vars.NAME}``, plus names an action declares (the
   firmware action's ``{image}``);
2. checking placeholders at validation time (:func:`check_placeholders`);
3. substituting them at run time, after the argv was split (:func:`render`): a value is pasted
   inside the one element that names it and can never become a second element, an option or
   shell syntax, whatever characters it holds. The session then quotes every element
   (``shlex.join``) for the remote shell; no value ever reaches ``sh -c`` unquoted;
4. the two other ways a value may be pasted: quoted as one shell word (:func:`render_quoted`,
   the ``shell`` action's script) and as one path component (:func:`render_path`, copy's
   ``dest``: a value holding ``/``, or being ``.`` or ``..``, is refused).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from tasks.host import Host
from tasks.secrets import SecretValue

__all__ = ["PlaceholderError", "check_placeholders", "host_placeholders", "render",
           "render_one", "render_path", "render_quoted"]

_HOST_TOKEN = re.compile(r"\{host\.([^{}]*)\}")
_HOST_FIELD = re.compile(r"name|address|port|user|vars\.[A-Za-z_][A-Za-z0-9_]*")


class PlaceholderError(ValueError):
    """A placeholder is unknown (at validation) or has no value for this host (at run time)."""


def host_placeholders(text: str) -> Iterator[re.Match[str]]:
    """Every ``{host.*}`` token in ``text`` (known or not), in order."""
    return _HOST_TOKEN.finditer(text)


def check_placeholders(element: str) -> None:
    """Raise :class:`PlaceholderError` for a ``{host.*}`` token that names no host field.
    (An action's own placeholders, like ``{image}``, are plain tokens and always valid.)"""
    for m in _HOST_TOKEN.finditer(element):
        if not _HOST_FIELD.fullmatch(m.group(1)):
            raise PlaceholderError(
                f"unknown placeholder {m.group(0)!r} (use {{host.name}}, {{host.address}}, "
                "{host.port}, {host.user} or {host.vars.NAME})")


def _host_value(host: Host, field: str) -> str:
    if field == "name":
        return host.name
    if field == "address":
        return host.connect_address
    if field == "port":
        return str(host.port)
    if field == "user":
        if host.user is None:
            raise PlaceholderError(f"host {host.name} has no user for {{host.user}}")
        return host.user
    key = field[len("vars."):]
    if key not in host.vars:
        raise PlaceholderError(f"host {host.name} has no variable {key!r} "
                               f"(used as {{host.vars.{key}}})")
    value = host.vars[key]
    if isinstance(value, bool):
        return "true" if value else "false"
    if not isinstance(value, (str, int, float)):
        raise PlaceholderError(f"host {host.name}: variable {key!r} is a "
                               f"{type(value).__name__}, not a text or number")
    return str(value)


def _substitute(text: str, host: Host, paste: Callable[[str], str]) -> str:
    out = _HOST_TOKEN.sub(lambda m: paste(_host_value(host, m.group(1))), text)
    if "\0" in out:
        raise PlaceholderError(f"host {host.name}: a placeholder value holds a NUL character")
    return out


def render_quoted(script: str, host: Host) -> str:
    """A shell script with each ``{host.*}`` placeholder replaced by its value quoted as one
    shell word (``shlex.quote``). Safe only where a quoted word stays one word: the ``shell``
    action checks each placeholder's position at validation (:mod:`tasks.shellscript`)."""
    return _substitute(script, host, shlex.quote)


def render_path(path: str, host: Host, param: str) -> str:
    """A remote path with its ``{host.*}`` placeholders filled in, each value one path
    component: a value that is empty, ``.`` or ``..``, or holds ``/`` or a newline, is refused
    (it could move the path elsewhere), naming the parameter."""

    def component(value: str) -> str:
        if "/" in value or "\n" in value or value in ("", ".", ".."):
            raise PlaceholderError(f"host {host.name}: {param}: a placeholder's value {value!r} "
                                   "is not usable in a path (empty, '.', '..', or holds '/' or "
                                   "a newline)")
        return value

    return _substitute(path, host, component)


def render_one(element: str, host: Host, extra: Mapping[str, str] | None = None) -> str:
    """One argv element with its placeholders replaced by this host's values."""
    if "{" not in element:
        return element
    out = _HOST_TOKEN.sub(lambda m: _host_value(host, m.group(1)), element)
    for name, value in (extra or {}).items():
        out = out.replace("{" + name + "}", value)
    if "\0" in out:
        raise PlaceholderError(f"host {host.name}: a placeholder value holds a NUL character")
    return out


def render(argv: Sequence[Any], host: Host, extra: Mapping[str, str] | None = None) -> list[str]:
    """A resolved argv (secrets already replaced by :func:`tasks.secrets.resolve`) with
    placeholders substituted element by element. Secret values (:class:`SecretValue`) are not
    searched for placeholders: a secret's text is passed exactly as it is."""
    out: list[str] = []
    for element in argv:
        if not isinstance(element, str):
            raise TypeError(f"argv element {element!r} is not a string (unresolved secret?)")
        out.append(element if isinstance(element, SecretValue) else render_one(element, host, extra))
    return out
