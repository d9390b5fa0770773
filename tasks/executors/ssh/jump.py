"""Jump hosts: which bastions, in order, a host is reached through (its ProxyJump chain).

1. Where the chain comes from; the first that says anything wins, as the host's own fields win
   over the executor options and those over ``~/.ssh/config`` (``connect.resolve``):

   - the host variable ``fleetsched_jump`` (``user@bastion:2222,user2@b2``, a YAML list, or
     ``none`` for a direct connection whatever the rest says);
   - the host variable ``ansible_ssh_common_args``, read as Ansible passes it to ssh:
     ``-o ProxyJump=...``, ``-o 'ProxyJump ...'``, ``-oProxyJump=...`` or ``-J ...``;
   - the ssh executor option ``jump`` (a list, or comma-separated);
   - ``ProxyJump`` in the ssh config for the host.

2. A hop is OpenSSH's ``[user@]host[:port]`` (``ssh://`` and ``[v6addr]`` accepted); anything
   else, and more than ``MAX_HOPS`` hops, is a ``ConfigError`` naming where it was set.
3. A ``ProxyCommand`` (ssh config or ``ansible_ssh_common_args``) is refused: fleetsched does not
   run commands to reach a host.

Nothing here connects: ``connect.resolve`` turns the hops into targets (each looked up in the
ssh config like a host) and ``tunnel`` connects through them.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.errors import ConfigError
from tasks.host import Host

JUMP_VAR = "fleetsched_jump"  # our host variable (beside fleetsched_files)
ANSIBLE_ARGS_VAR = "ansible_ssh_common_args"
MAX_HOPS = 8
SPEC_HINT = "write [user@]host[:port], comma-separated for a chain: e.g. ops@bastion:2222,b2"
PROXYCOMMAND_HINT = ("use a jump host instead: ProxyJump (-o ProxyJump=user@bastion) or the host "
                     f"variable {JUMP_VAR}=user@bastion")
_USER = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}")
_V6 = re.compile(r"\[([0-9A-Fa-f:.]+(?:%[A-Za-z0-9_.-]+)?)\]")


@dataclass(frozen=True)
class Hop:
    """One jump host as written: its name (or address), port (0: not given) and user."""

    host: str
    port: int = 0
    user: str | None = None


def parse_hops(spec: Any, source: str) -> tuple[Hop, ...]:
    """The hops ``spec`` names (a comma-separated string or a list of strings); ``()`` for
    ``none`` or nothing. ``source`` says where it was set, for the error."""
    if spec is None:
        return ()
    if isinstance(spec, str):
        parts = spec.split(",")
    elif isinstance(spec, (list, tuple)) and all(isinstance(p, str) for p in spec):
        parts = [q for p in spec for q in p.split(",")]
    else:
        raise ConfigError(f"{source}: {spec!r} is not a jump host list", hint=SPEC_HINT)
    parts = [p.strip() for p in parts]
    if [p.lower() for p in parts] in ([""], ["none"]) or not parts:
        return ()
    if len(parts) > MAX_HOPS:
        raise ConfigError(f"{source}: {len(parts)} jump hosts, more than {MAX_HOPS}")
    return tuple(_hop(p, source) for p in parts)


def _hop(text: str, source: str) -> Hop:
    rest = text[len("ssh://"):] if text.lower().startswith("ssh://") else text
    user, at, rest = rest.rpartition("@")
    port = 0
    v6 = _V6.match(rest)
    if v6:
        host, rest = v6.group(1), rest[v6.end():]
    else:
        host, colon, port_text = rest.partition(":")
        rest = colon + port_text
    # A bad user part is never repeated: `ops:secret@bastion` would print the secret.
    if at and not _USER.fullmatch(user):
        raise ConfigError(f"{source}: a jump host's user part (before @{host}) is not a user "
                          "name", hint=SPEC_HINT)
    if rest:
        if not rest.startswith(":") or not rest[1:].isdigit() or not 0 < int(rest[1:]) < 65536:
            raise ConfigError(f"{source}: jump host {text!r} has no valid port", hint=SPEC_HINT)
        port = int(rest[1:])
    if not (v6 or _NAME.fullmatch(host)):
        raise ConfigError(f"{source}: {text!r} is not a jump host", hint=SPEC_HINT)
    return Hop(host, port, user if at else None)


def from_ssh_args(args: Any, source: str) -> tuple[Hop, ...] | None:
    """The ProxyJump that ssh arguments (``ansible_ssh_common_args``) set, or None when they set
    none; a ProxyCommand is a ``ConfigError``. Other options are not ours and are ignored."""
    if args in (None, ""):
        return None
    try:
        words = shlex.split(str(args))
    except ValueError as exc:
        raise ConfigError(f"{source}: cannot read {args!r} as ssh arguments ({exc})") from None
    jump: tuple[Hop, ...] | None = None
    for i, word in enumerate(words):
        following = words[i + 1] if i + 1 < len(words) else ""
        if word.startswith("-J"):
            name, value = "proxyjump", word[2:] or following
        elif word.startswith("-o"):
            name, value = _option(word[2:] or following)
        else:
            continue
        if name == "proxycommand" and value.lower() != "none":
            raise ConfigError(f"{source} sets ProxyCommand: the ssh executor runs no proxy "
                              "commands", hint=PROXYCOMMAND_HINT)
        if name == "proxyjump" and jump is None:  # ssh keeps the first value given
            jump = parse_hops(value, source)
    return jump


def _option(text: str) -> tuple[str, str]:
    """``ProxyJump=x`` or ``ProxyJump x`` as ("proxyjump", "x")."""
    found = re.match(r"\s*([A-Za-z]+)\s*(?:=|\s)\s*(.*)", text, re.DOTALL)
    if not found:
        return text.strip().lower(), ""
    return found.group(1).lower(), found.group(2).strip()


def refuse_proxycommand(found: Mapping[str, Any], name: str, config_path: Any) -> None:
    """A ``ProxyCommand`` the ssh config sets for ``name`` is refused (point 3)."""
    command = found.get("proxycommand")
    if command and str(command).lower() != "none":
        raise ConfigError(
            f"ssh config {config_path} sets proxycommand {command} for {name}: the ssh executor "
            f"runs no proxy commands", hint=PROXYCOMMAND_HINT)


def from_ssh_config(found: Mapping[str, Any], name: str, config_path: Any) -> tuple[Hop, ...]:
    """The ProxyJump the ssh config sets for ``name`` (``()`` for none)."""
    return parse_hops(found.get("proxyjump"), f"ssh config {config_path} (ProxyJump for {name})")


def chain_of(host: Host, options: Mapping[str, Any], found: Mapping[str, Any],
             config_path: Any) -> tuple[Hop, ...]:
    """The hops to ``host``, first first, from the first source that sets them (point 1)."""
    hvars = host.vars or {}
    if hvars.get(JUMP_VAR) not in (None, "", []):
        return parse_hops(hvars[JUMP_VAR], f"host {host.name}: {JUMP_VAR}")
    from_args = from_ssh_args(hvars.get(ANSIBLE_ARGS_VAR), f"host {host.name}: {ANSIBLE_ARGS_VAR}")
    if from_args is not None:
        return from_args
    if options.get("jump"):
        return parse_hops(list(options["jump"]), "ssh executor option jump")
    return from_ssh_config(found, host.name, config_path)


__all__ = ["ANSIBLE_ARGS_VAR", "JUMP_VAR", "MAX_HOPS", "Hop", "chain_of", "from_ssh_args",
           "from_ssh_config", "parse_hops", "refuse_proxycommand"]
