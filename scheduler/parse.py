"""Rollout policy values as operators type them: limits (``20`` or ``10%``), durations
(``90s``, ``10m``, ``1h30m``, ``90d``) and points in time (``--at``).

Each parser raises :class:`ValidationError` with one line naming the bad value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from scheduler.errors import ValidationError

__all__ = ["MAX_DURATION", "Limit", "parse_limit", "parse_duration", "parse_time", "parse_ago",
           "format_duration"]

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
# The longest duration any option takes: 100 years (36525 days). Far above any timeout, delay or
# age that means something, and far below what datetime, timedelta and the clocks overflow at.
MAX_DURATION = timedelta(days=36525)


@dataclass(frozen=True)
class Limit:
    """A count, or a percentage of a task's hosts (rounded up, at least 1)."""

    value: float
    percent: bool = False

    def of(self, total: int) -> int:
        if not self.percent:
            return int(self.value)
        return max(1, math.ceil(total * self.value / 100))

    def __str__(self) -> str:
        return f"{self.value:g}%" if self.percent else str(int(self.value))


MAX_LIMIT = 10_000_000  # hosts or jobs: a bigger count is a typo, not a fleet


def parse_limit(text: str, what: str = "limit") -> Limit:
    """``"20"`` -> 20 hosts; ``"10%"`` -> 10 % of the task's hosts. ASCII digits only (``int``
    would take other scripts' digits), a count of at most ``MAX_LIMIT``."""
    raw = text.strip()
    percent = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)%", raw)
    if percent and 0 < float(percent.group(1)) <= 100:
        return Limit(float(percent.group(1)), percent=True)
    if re.fullmatch(r"[0-9]+", raw) and 1 <= int(raw) <= MAX_LIMIT:
        return Limit(int(raw))
    raise ValidationError(f"{what} {text!r} is not a count from 1 to {MAX_LIMIT:,} or a "
                          "percentage like 10%")


def parse_duration(text: str, what: str = "duration", *, bare_seconds: bool = False) -> timedelta:
    """``"1h30m"`` -> 90 minutes, at most ``MAX_DURATION`` (100 years). A bare number is refused (``--in 10``: seconds or minutes?
    ``--older-than 90``: days or seconds?) unless ``bare_seconds`` says it means seconds."""
    raw = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        if not bare_seconds:
            raise ValidationError(f"{what} {text!r} has no unit",
                                  hint=f"say which: {raw}s, {raw}m, {raw}h or {raw}d")
        raw += "s"
    pos, total = 0, 0.0
    for m in _DURATION.finditer(raw):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(raw) or not raw:
        raise ValidationError(
            f"{what} {text!r} is not a duration",
            hint="use a number with a unit: 500ms, 30s, 10m, 1h30m, 90d",
        )
    if total <= 0:
        raise ValidationError(f"{what} {text!r} must be longer than zero")
    if not total <= MAX_DURATION.total_seconds():  # (also inf, from a number of 400 digits)
        raise ValidationError(f"{what} {text!r} is longer than 100 years",
                              hint="at most 36525d")
    return timedelta(seconds=total)


def format_duration(seconds: float) -> str:
    """A short human form: 0.8s, 42s, 3m05s, 2h10m, 3d4h."""
    if seconds < 10:
        return f"{seconds:.1f}s"
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600}h"


def parse_time(text: str, tz: str | None = None) -> datetime:
    """An ISO 8601 time; without an offset it is read in ``tz`` (default: the local zone).

    Returns an aware UTC datetime.
    """
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValidationError(
            f"time {text!r} is not ISO 8601", hint="e.g. 2026-12-01T22:00 or 2026-12-01T22:00+01:00"
        ) from None
    if value.tzinfo is None:
        if tz:
            try:
                zone = ZoneInfo(tz)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValidationError(f"unknown time zone {tz!r}") from None
            value = value.replace(tzinfo=zone)
        else:
            value = value.astimezone()  # the local zone
    return value.astimezone(timezone.utc)


def parse_ago(text: str, what: str) -> datetime:
    """An ISO 8601 time (``parse_time``: the local zone unless it has an offset), or a duration
    meaning that long ago (90m, 24h, 7d), as ``report --since`` and ``--until`` take them.

    Returns an aware UTC datetime; ``what`` names the option in the error.
    """
    raw = text.strip()
    if raw and raw[-1].isalpha() and raw[0].isdigit():
        try:
            return datetime.now(timezone.utc) - parse_duration(raw, what)
        except ValidationError:
            pass
    try:
        return parse_time(raw)
    except ValidationError:
        raise ValidationError(f"{what} {text!r} is neither an ISO 8601 time nor a duration",
                              hint="e.g. 2026-12-01T22:00, 2026-12-01 or 24h, 7d") from None
