"""Executor options (the contract between a task spec and the executors): the names each
executor knows with their defaults, and typed reading of the ``options`` dict, rejecting unknown names.

Options arrive from task specs and the CLI as strings or JSON values; each executor declares
the names it knows with a default, and anything else is a one-line ``ValidationError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.errors import ValidationError

DEFAULT_KEY_FILES = ("id_ed25519", "id_ecdsa", "id_rsa")  # tried in ~/.ssh with look_for_keys
CAP_BYTES = 8 * 1024  # default size of the head and of the tail kept of each output stream

# The options each executor knows, with their defaults (the executors read theirs from here).
EXECUTOR_DEFAULTS: dict[str, dict[str, Any]] = {
    "ssh": {
        "user": "",  # login user when the host names none ("" = ssh config, then the local user)
        "identity_file": [],  # key files offered after the agent's keys (before ~/.ssh/config's)
        "allow_agent": True,  # offer the keys of the agent at $SSH_AUTH_SOCK
        "look_for_keys": True,  # also offer ~/.ssh/id_ed25519, id_ecdsa, id_rsa
        "connect_timeout": 10.0,  # seconds for TCP connect and the key exchange
        "banner_timeout": 15.0,  # seconds to wait for the server's SSH banner
        "auth_timeout": 15.0,  # seconds for the server to answer an authentication attempt
        "keepalive_s": 30,  # SSH keepalive on pooled connections (0 = off)
        "pool": True,  # reuse connections across sessions of the same (user, address, port)
        "idle_s": 60.0,  # a pooled connection idle this long is closed
        "capture_bytes": CAP_BYTES,  # size of the head and of the tail kept of each stream
        "become": False,  # run commands through sudo -n (also: the host's ansible_become)
        "become_user": "",  # sudo -u USER; set alone it turns become on ("" = the host's
        #                     ansible_become_user, else root); tasks/executors/ssh/become.py
        "become_password": "",  # a secret reference @env:NAME / @file:/path fed to sudo -S at
        #                         its prompt ("" = the host's ansible_become_password, else -n)
        "jump": [],  # jump hosts [user@]host[:port], first first, for hosts whose inventory
        #              names none (else ~/.ssh/config's ProxyJump); tasks/executors/ssh/jump.py
    },
    "local": {
        "cwd": "",  # working directory of the processes ("" = the worker's)
        "capture_bytes": CAP_BYTES,  # size of the head and of the tail kept of each stream
        "host_env": True,  # export FLEETSCHED_HOST, _ADDRESS, _PORT, _USER to the process
    },
    "simulate": {
        "duration_ms": 0,  # how long each command "runs"
        "jitter_ms": 0,  # uniform spread around duration_ms
        "failure_rate": 0.0,  # chance that a command fails
        "seed": "",  # "" = unpredictable; anything else = a reproducible sequence per process
        "exit_code": 1,  # exit code of a simulated failure
        "become": False,  # as the ssh executor's: the simulated commands say whom they ran as
        "become_user": "",
    },
}
EXECUTORS = tuple(EXECUTOR_DEFAULTS)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def coerce(executor: str, name: str, raw: Any, default: Any) -> Any:
    """``raw`` converted to the type of ``default`` (bool, int, float, str, list of str)."""
    where = f"{executor} executor option {name}={raw!r}"
    if raw is None:
        return default
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ValidationError(f"{where} is not a boolean (use true or false)")
    if isinstance(default, (int, float)) and not isinstance(default, bool):
        try:
            value = type(default)(raw) if not isinstance(raw, bool) else None
        except (TypeError, ValueError):
            value = None
        if value is None or value < 0 or value != value:
            raise ValidationError(f"{where} is not a non-negative number")
        return value
    if isinstance(default, list):
        if isinstance(raw, str):
            return [part for part in raw.split(",") if part]
        if isinstance(raw, (list, tuple)) and all(isinstance(p, str) for p in raw):
            return list(raw)
        raise ValidationError(f"{where} is not a list of strings")
    return str(raw)


def read_options(executor: str, options: Mapping[str, Any] | None,
                 defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The options with defaults filled in; an unknown option name is an error."""
    options = dict(options or {})
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ValidationError(
            f"{executor} executor has no option {unknown[0]!r}",
            hint="known options: " + ", ".join(sorted(defaults)),
        )
    return {name: coerce(executor, name, options.get(name), default)
            for name, default in defaults.items()}


__all__ = ["CAP_BYTES", "DEFAULT_KEY_FILES", "EXECUTORS", "EXECUTOR_DEFAULTS", "coerce", "read_options"]
