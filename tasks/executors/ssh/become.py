"""``become``: run a host's commands as another user through ``sudo -n``, like Ansible's become.

1. Who decides: the task's ssh executor options ``become`` and ``become_user`` (a
   ``become_user`` alone turns become on), then the host's inventory variables
   ``ansible_become``, ``ansible_become_user`` (default ``root``) and ``ansible_become_method``;
   only the ``sudo`` method exists here, any other is refused (``ConfigError``).
2. The command: ``sudo -n -H -u USER -- ARGV...``; the session quotes every word with
   ``shlex.join`` as it does without become, so no task parameter becomes shell syntax, and the
   user name is checked first, so it cannot become a sudo option.
3. ``-n``: sudo never prompts. When it would need a password (or a terminal) it prints
   ``sudo: a password is required`` and exits 1; :func:`check` turns that into ``BecomeError``,
   a permanent failure (trying again asks the same question).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scheduler.errors import BecomeError, ConfigError
from tasks.host import CommandResult, Host

DEFAULT_USER = "root"
METHODS = ("sudo",)
# What sudo -n prints when it would have to ask (sudo 1.8 and 1.9 wordings).
PASSWORD_NEEDED = ("sudo: a password is required", "sudo: a terminal is required",
                   "sudo: no tty present")
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?|#[0-9]{1,10}")  # whole name (fullmatch)
USER_HINT = "letters, digits, '_', '.', '-' (or #UID)"
_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Become:
    """Run as ``user`` on ``host`` (a host name, for messages)."""

    host: str
    user: str

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run through ``sudo -n`` as :attr:`user` (still a list: the caller quotes)."""
        return ["sudo", "-n", "-H", "-u", self.user, "--", *argv]

    def check(self, result: CommandResult) -> CommandResult:
        """``result``, unless sudo refused to run it without a password: ``BecomeError``."""
        if result.exit_code == 1 and any(
                m in (result.stderr_head + result.stderr_tail) for m in PASSWORD_NEEDED):
            raise BecomeError(
                f"become: sudo on {self.host} asks for a password for {self.user}; give "
                f"{self.user} NOPASSWD in sudoers for this command or run without become",
                hint="fleetsched never types sudo passwords: sudo runs with -n")
        return result


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in _TRUE


def become_of(host: Host, options: Mapping[str, Any]) -> Become | None:
    """Whom ``host``'s commands run as, from the options and the host's variables (point 1)."""
    hvars = host.vars or {}
    user = str(options.get("become_user") or "")
    wanted = bool(options.get("become")) or bool(user) or _truthy(hvars.get("ansible_become"))
    if not wanted:
        return None
    method = str(hvars.get("ansible_become_method") or "sudo")
    if method not in METHODS:
        raise ConfigError(
            f"host {host.name}: ansible_become_method {method!r} is not supported",
            hint="fleetsched becomes another user only with sudo (-n, no password): set "
                 "ansible_become_method=sudo or leave become off for this host")
    user = user or str(hvars.get("ansible_become_user") or DEFAULT_USER)
    if not is_user_name(user):
        raise ConfigError(f"host {host.name}: become user {user!r} is not a user name",
                          hint=USER_HINT)
    return Become(host.name, user)


def is_user_name(user: str) -> bool:
    """Whether ``user`` may follow ``sudo -u``: a whole user name (no trailing newline, no
    shell or sudo syntax) or ``#UID``. The rule submit checks ``become_user`` with, too."""
    return isinstance(user, str) and _USER.fullmatch(user) is not None


__all__ = ["DEFAULT_USER", "METHODS", "PASSWORD_NEEDED", "USER_HINT", "Become", "become_of",
           "is_user_name"]
