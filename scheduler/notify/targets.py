"""Notification targets as operators type them, and the policy of who is told what.

A target is a webhook URL (``https://...`` or ``http://...``: a JSON POST) or an e-mail address
(``mailto:ops@example.org``). :func:`parse_target` checks one and refuses anything else with one
line (``ValidationError``, exit code 2). A webhook URL may carry a secret (Slack puts it in the
path, others in ``?token=``): :attr:`Target.shown` is the form that may be printed, logged or put
in an event (scheme, host and port only).

:class:`Policy` is what the recorder side needs from the settings: the global targets, the kinds
of notice they (and the per-task and per-schedule targets) are sent, and the SMTP server.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from scheduler.config import Settings
from scheduler.errors import ConfigError, ValidationError
from scheduler.redact import mask_url_rest, redact_url

__all__ = ["KINDS", "MAX_TARGETS", "Policy", "Smtp", "Target", "parse_target", "parse_targets"]

# Every kind of notice, in the order the docs list them.
KINDS = ("failed", "aborted", "lost", "missed", "approval", "stopped")
MAX_TARGETS = 10  # per task or schedule
MAX_LENGTH = 2000  # characters of one target
_ADDRESS_RE = re.compile(r"[^@\s<>,;:\"]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")


@dataclass(frozen=True)
class Target:
    """Where notices go: ``kind`` "webhook" (``value``: the URL) or "email" (the address)."""

    kind: str
    value: str

    @property
    def spec(self) -> str:
        """The target as stored and typed: the URL, or ``mailto:ADDRESS``."""
        return self.value if self.kind == "webhook" else f"mailto:{self.value}"

    @property
    def shown(self) -> str:
        """A printable form with no secret: ``https://hooks.example/...``, ``mailto:ADDRESS``."""
        if self.kind == "email":
            return self.spec
        parts = urlsplit(self.value)
        host = parts.netloc.rpartition("@")[2]
        rest = "/..." if (parts.path not in ("", "/") or parts.query) else ""
        return f"{parts.scheme}://{host}{rest}"


def parse_target(raw: str) -> Target:
    """A target from what an operator typed; ``ValidationError`` with one line if it is none."""
    text = raw.strip() if isinstance(raw, str) else ""
    if not text:
        raise ValidationError("empty notify target",
                              hint="give a webhook URL (https://...) or mailto:ADDRESS")
    if len(text) > MAX_LENGTH:
        raise ValidationError(f"notify target longer than {MAX_LENGTH} characters")
    if text.lower().startswith("mailto:"):
        address = text[len("mailto:"):]
        if not _ADDRESS_RE.fullmatch(address):
            raise ValidationError(f"notify target {text!r} is not mailto:ADDRESS",
                                  hint="e.g. --notify mailto:ops@example.org")
        return Target("email", address)
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 (raises ValueError for a port that is not a number)
    except ValueError:
        parts = None
    # Shown in the errors below without its path and query (a mistyped scheme, htps://, keeps
    # the webhook's secret in the path all the same).
    shown = mask_url_rest(redact_url(text))
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValidationError(
            f"notify target {shown!r} is neither an http(s) URL nor mailto:ADDRESS",
            hint="e.g. --notify https://hooks.slack.com/services/... or --notify "
                 "mailto:ops@example.org")
    if any(c.isspace() or not c.isprintable() for c in text):
        # (a control character would make urllib refuse it later, quoting the path)
        raise ValidationError(
            f"notify target {shown!r} contains white space or a control character")
    return Target("webhook", text)


def parse_targets(raws: Iterable[str]) -> tuple[Target, ...]:
    """Several targets, each checked, duplicates dropped (first kept)."""
    out: dict[str, Target] = {}
    for raw in raws:
        t = parse_target(raw)
        out.setdefault(t.spec, t)
    if len(out) > MAX_TARGETS:
        raise ValidationError(f"at most {MAX_TARGETS} notify targets, not {len(out)}")
    return tuple(out.values())


@dataclass(frozen=True)
class Smtp:
    """The SMTP server mailto: targets are sent through (settings ``smtp_*``)."""

    host: str = "localhost"
    port: int = 25
    sender: str = "fleetsched@localhost"
    tls: str = "none"  # none, starttls, ssl
    user: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Policy:
    """Who is told what: global targets, the kinds of notice sent, the SMTP server."""

    targets: tuple[Target, ...] = ()
    kinds: frozenset[str] = frozenset(KINDS)
    smtp: Smtp = Smtp()

    @classmethod
    def from_settings(cls, settings: Settings) -> Policy:
        """The policy of ``settings``; a bad target or kind is a ``ConfigError`` (one line)."""
        try:
            targets = parse_targets(settings.notify)
        except ValidationError as exc:
            raise ConfigError(f"setting notify: {exc}",
                              hint="fix FLEETSCHED_NOTIFY or notify in the config file") from None
        unknown = sorted(set(settings.notify_on) - set(KINDS))
        if unknown:
            raise ConfigError(f"setting notify_on: unknown kind {unknown[0]!r}",
                              hint=f"the kinds are {', '.join(KINDS)}")
        smtp = Smtp(settings.smtp_host, settings.smtp_port, settings.smtp_from,
                    settings.smtp_tls, settings.smtp_user, settings.smtp_password)
        return cls(targets, frozenset(settings.notify_on), smtp)

    def targets_for(self, own: Iterable[str] | None, kind: str) -> list[Target]:
        """The targets a notice of ``kind`` goes to: the global ones, then the task's or the
        schedule's own (stored, so already checked; a bad one is skipped, not fatal)."""
        if kind not in self.kinds:
            return []
        out: dict[str, Target] = {t.spec: t for t in self.targets}
        for raw in own or ():
            try:
                t = parse_target(raw)
            except ValidationError:
                continue
            out.setdefault(t.spec, t)
        return list(out.values())
