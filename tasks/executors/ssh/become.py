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
4. A become password (issue 30): the ssh option ``become_password``, else the host's
   ``ansible_become_password`` / ``ansible_become_pass``, whose value must be a secret reference
   (``@env:NAME`` / ``@file:/path``, ``tasks.secrets``); a literal is refused (``ConfigError``)
   without repeating it. The reference is read on the worker when the session opens, and the
   value taught to the job's redactor. The command is then
   ``sudo -S -p PROMPT -H -u USER -- sh -c 'printf "%s-started\\n" "$0" >&2; exec "$@"' MARK
   ARGV...`` with a random PROMPT and MARK: the session (:class:`Gate`) writes the password and
   a newline to stdin only when PROMPT shows on stderr, and the job's own stdin only once
   ``MARK-started`` says sudo let the command start. Neither appears as it is printed in any
   argument (PROMPT is passed with ``%%`` for its ``%``), so a host that echoes the command line
   to stderr first (an audit wrapper, a shell's xtrace) cannot pass for either. Waiting for the prompt, not writing the password first, is the robust
   way: when sudo does not ask (cached credentials, a NOPASSWD rule) a password written first
   would be the command's stdin. A second PROMPT means the password was wrong: nothing more is
   written, sudo reads end-of-file and exits, and :meth:`Become.check` raises ``BecomeError``,
   permanent. PROMPT and MARK are taken out of the captured stderr; the password is never in
   argv or the environment, and sudo -S does not echo it.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from scheduler.errors import BecomeError, ConfigError
from scheduler.redact import Redactor
from tasks.host import CommandResult, Host
from tasks.secrets import SecretError, SecretRef, SecretValue, parse_ref

DEFAULT_USER = "root"
METHODS = ("sudo",)
# What sudo -n prints when it would have to ask (sudo 1.8 and 1.9 wordings).
PASSWORD_NEEDED = ("sudo: a password is required", "sudo: a terminal is required",
                   "sudo: no tty present")
_USER = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?|#[0-9]{1,10}")  # whole name (fullmatch)
USER_HINT = "letters, digits, '_', '.', '-' (or #UID)"
_TRUE = {"1", "true", "yes", "on"}
# Where a become password may be given (point 4): the ssh option, then the host's variables.
PASSWORD_OPTION = "become_password"
PASSWORD_VARS = ("ansible_become_password", "ansible_become_pass")
PASSWORD_HINT = "give a secret reference: @env:NAME or @file:/path, read on the worker"
# What sudo prints when the password it read is wrong (sudo 1.8 and 1.9 wordings).
WRONG_PASSWORD = ("Sorry, try again.", "incorrect password attempt")


class _Sink(Protocol):
    def feed(self, data: bytes) -> None: ...


def password_ref(value: Any, where: str) -> SecretRef:
    """The secret reference a become password is given as; a literal (or a malformed
    reference) is a ``ConfigError`` that never repeats the value."""
    try:
        ref = parse_ref(value) if isinstance(value, str) else None
    except SecretError:
        ref = None
    if not isinstance(ref, SecretRef):
        raise ConfigError(f"{where}: a become password must be a secret reference, not a "
                          "literal value (refused; not shown)", hint=PASSWORD_HINT)
    return ref


STARTED = b"-started\n"  # what sh prints after the mark once sudo let the command start


class Gate:
    """The stderr of one command run with a become password (point 4): counts sudo's prompts
    and sees the start mark, taking both out of what reaches ``sink``; everything after the
    mark passes through untouched."""

    def __init__(self, sink: _Sink, prompt: str, mark: str) -> None:
        self.sink = sink
        self.tokens = (prompt.encode(), mark.encode() + STARTED)
        self.prompts = 0
        self.started = False
        self._buf = b""

    @property
    def refused(self) -> bool:
        """sudo asked again: the password was wrong; nothing more may be written."""
        return self.prompts >= 2

    def feed(self, data: bytes) -> None:
        if self.started:
            self.sink.feed(data)
            return
        buf = self._buf + data
        while not self.started:
            hits = [(i, t) for t in self.tokens if (i := buf.find(t)) >= 0]
            if not hits:
                break
            i, token = min(hits)
            self.sink.feed(buf[:i])
            buf = buf[i + len(token):]
            if token == self.tokens[0]:
                self.prompts += 1
            else:
                self.started = True
        if self.started:
            self._buf = b""
            self.sink.feed(buf)
            return
        keep = 0  # the longest end of buf that may be the start of a token
        for token in self.tokens:
            for n in range(min(len(token) - 1, len(buf)), keep, -1):
                if buf.endswith(token[:n]):
                    keep = n
                    break
        self.sink.feed(buf[:len(buf) - keep])
        self._buf = buf[len(buf) - keep:]

    def flush(self) -> None:
        data, self._buf = self._buf, b""
        self.sink.feed(data)


@dataclass(frozen=True)
class Become:
    """Run as ``user`` on ``host`` (a host name, for messages); with ``password`` (a resolved
    secret) through ``sudo -S`` and a random prompt, else ``sudo -n``."""

    host: str
    user: str
    password: str | None = field(default=None, repr=False, compare=False)
    # as sudo prints it: the argument says %% for its %
    prompt: str = field(default_factory=lambda: f"[fleetsched-sudo-%{secrets.token_hex(8)}] ")
    mark: str = field(default_factory=lambda: f"fleetsched-become-{secrets.token_hex(8)}")

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` run through sudo as :attr:`user` (still a list: the caller quotes)."""
        if self.password is None:
            return ["sudo", "-n", "-H", "-u", self.user, "--", *argv]
        # The prompt and the mark as sudo and sh print them are in no argument: a host that
        # echoes the command line to stderr first (an audit wrapper, xtrace) cannot pass for
        # sudo's prompt (the password typed for a sudo that never asks) or the start.
        return ["sudo", "-S", "-p", self.prompt.replace("%", "%%"), "-H", "-u", self.user,
                "--", "sh", "-c", 'printf "%s-started\\n" "$0" >&2; exec "$@"', self.mark, *argv]

    def gate(self, sink: _Sink) -> Gate | None:
        """The stderr filter of a command run with the password (None without one)."""
        return None if self.password is None else Gate(sink, self.prompt, self.mark)

    def check(self, result: CommandResult, gate: Gate | None = None) -> CommandResult:
        """``result``, unless sudo refused to run it: ``BecomeError``."""
        if gate is not None:
            return self._check_password(result, gate)
        if result.exit_code == 1 and any(
                m in (result.stderr_head + result.stderr_tail) for m in PASSWORD_NEEDED):
            raise BecomeError(
                f"become: sudo on {self.host} asks for a password for {self.user}; give "
                f"{self.user} NOPASSWD in sudoers for this command or run without become",
                hint="or give a become password as a secret reference: become_password="
                     "@env:NAME (ssh option) or ansible_become_password (host variable)")
        return result

    def _check_password(self, result: CommandResult, gate: Gate) -> CommandResult:
        if gate.started or result.exit_code is None:
            return result  # the command ran (or timed out / was lost: the result says so)
        stderr = result.stderr_head + result.stderr_tail
        if gate.refused or any(m in stderr for m in WRONG_PASSWORD):
            raise BecomeError(
                f"become: sudo on {self.host} rejected the become password for {self.user} "
                "(wrong password); not retried",
                hint="check the secret the become password reference names on the worker")
        line = next((ln.strip() for ln in stderr.splitlines() if ln.strip()), "")
        if gate.prompts == 0 and any(m in stderr for m in PASSWORD_NEEDED):
            line = "it needs a terminal"
        raise BecomeError(f"become: sudo on {self.host} did not run the command as "
                          f"{self.user}: {line[:200] or f'exit code {result.exit_code}'}")


def _truthy(value: Any) -> bool:
    return value is True or str(value).strip().lower() in _TRUE


def become_of(host: Host, options: Mapping[str, Any], redactor: Redactor | None = None,
              password: bool = True) -> Become | None:
    """Whom ``host``'s commands run as, from the options and the host's variables (point 1),
    and with which password (point 4: read now, taught to ``redactor``; ``password=False``,
    as ``hosts check`` asks, ignores one: ``sudo -n``)."""
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
    secret = _password(host, options, hvars, redactor) if password else None
    return Become(host.name, user, secret)


def _password(host: Host, options: Mapping[str, Any], hvars: Mapping[str, Any],
              redactor: Redactor | None) -> str | None:
    if options.get(PASSWORD_OPTION):
        where, value = f"ssh executor option {PASSWORD_OPTION}", options[PASSWORD_OPTION]
    else:
        name = next((v for v in PASSWORD_VARS if hvars.get(v)), None)
        if name is None:
            return None
        where, value = f"host {host.name}: {name}", hvars[name]
    ref = password_ref(value, where)
    try:
        secret = ref.fetch()
    except SecretError as exc:
        raise ConfigError(f"{where}: {exc}", hint=exc.hint) from None
    if "\n" in secret or "\r" in secret or not secret:
        raise ConfigError(f"{where}: the become password {ref} is empty or has a line break",
                          hint="sudo -S reads one line")
    if redactor is not None:
        redactor.add(secret)
    return SecretValue(secret)


def is_user_name(user: str) -> bool:
    """Whether ``user`` may follow ``sudo -u``: a whole user name (no trailing newline, no
    shell or sudo syntax) or ``#UID``. The rule submit checks ``become_user`` with, too."""
    return isinstance(user, str) and _USER.fullmatch(user) is not None


__all__ = ["DEFAULT_USER", "METHODS", "PASSWORD_NEEDED", "PASSWORD_OPTION", "PASSWORD_VARS",
           "USER_HINT", "WRONG_PASSWORD", "Become", "Gate", "become_of", "is_user_name",
           "password_ref"]
