"""Occurrences of RFC 5545 RRULEs in IANA time zones across DST, and the zone arithmetic.

This module owns the pure calendar arithmetic of fleetsched (cron expressions are in
``scheduler.calendar.cron``, catch-up in ``scheduler.calendar.catchup``, windows in ``scheduler.calendar.windows``): no
Redis, no SQL, no clock reads except where a function says ``now``. Every instant it returns
is an aware UTC ``datetime``; every instant it takes must be aware (any zone).

Public API
----------
``zone(name)``                          the ``ZoneInfo`` for an IANA name (``ValidationError``)
``localize(wall, tz, fold=0)``          a local wall time -> the UTC instant (DST rules below)
``wall(at, tz)``                        an instant -> its naive local wall time
``parse_rrule(rule, tz, anchor=...)``   -> ``RRuleSchedule`` (one RRULE line, strict)
``check_horizon(schedule, now, what)``  refuse a schedule with nothing in ``HORIZON_YEARS``
``Recurrence``                          the protocol windows need: ``tz``, ``starts(from_utc)``
                                        (occurrences at or after, strictly increasing),
                                        ``clock_times()``; ``RRuleSchedule`` and
                                        ``scheduler.calendar.cron.CronSchedule`` implement it

DST rules (docs/concepts/windows-and-schedules.md has the worked examples)
---------------------------------------------------------------------------
RRULEs are expanded by dateutil in naive local wall time, then each wall time is localized:
a wall time the clocks skip (spring forward) becomes the first valid instant after the gap
(02:30 Europe/Berlin on 2026-03-29 -> 03:00 CEST); a wall time that happens twice (fall back)
is its first pass (``fold=0``). Several wall times that land on one instant (all inside one
gap) give one occurrence.
"""

from __future__ import annotations

import calendar
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from dateutil.rrule import rrule, rrulestr

from scheduler.errors import ValidationError

UTC = timezone.utc
HORIZON_YEARS = 10  # a rule or expression with no occurrence this far ahead is refused
DEFAULT_ANCHOR = datetime(2000, 1, 1)  # DTSTART when none is given (a Saturday, midnight)
class Recurrence(Protocol):
    """What ``scheduler.calendar.windows`` needs from a rule: its zone and its starts in order."""

    tz: str

    def starts(self, from_utc: datetime) -> Iterator[datetime]: ...

    def clock_times(self) -> tuple[set[int], set[int], set[int]]: ...


# ------------------------------------------------------------------------------ zones


def zone(name: str) -> ZoneInfo:
    """The IANA zone called ``name``; ``ValidationError`` (one line) for anything else."""
    if not isinstance(name, str) or not name.strip() or name != name.strip():
        raise ValidationError(f"time zone {name!r} is not an IANA zone name",
                              hint="use a name such as Europe/Berlin or UTC")
    try:
        return ZoneInfo(name)
    except (ValueError, KeyError, OSError, ZoneInfoNotFoundError):
        raise ValidationError(f"unknown time zone {name!r}",
                              hint="use an IANA zone name such as Europe/Berlin or UTC") from None


def as_utc(at: datetime, what: str = "instant") -> datetime:
    """``at`` in UTC; a naive datetime is a programming error (its zone would be a guess)."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"{what} {at!r} is naive: pass an aware datetime")
    return at.astimezone(UTC)


def wall(at: datetime, tz: ZoneInfo) -> datetime:
    """The naive local wall time of the instant ``at`` in ``tz``."""
    return as_utc(at).astimezone(tz).replace(tzinfo=None)


def localize(naive: datetime, tz: ZoneInfo, *, fold: int = 0) -> datetime:
    """The UTC instant of the local wall time ``naive`` in ``tz``.

    A wall time in a repeated hour is its first pass (``fold=0``, or the second with
    ``fold=1``); a wall time in a gap is the first valid instant after the gap.
    """
    at = naive.replace(tzinfo=tz, fold=fold).astimezone(UTC)
    if at.astimezone(tz).replace(tzinfo=None) == naive:
        return at
    return _gap_end(naive, tz)


def _gap_end(naive: datetime, tz: ZoneInfo) -> datetime:
    """The transition instant that skips over ``naive`` (tzdata transitions are whole seconds)."""
    a = naive.replace(tzinfo=tz, fold=0).astimezone(UTC)
    b = naive.replace(tzinfo=tz, fold=1).astimezone(UTC)
    lo, hi = math.floor(min(a, b).timestamp()), math.ceil(max(a, b).timestamp())
    while hi - lo > 1:  # invariant: wall(lo) <= naive < wall(hi)
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, tz).replace(tzinfo=None) > naive:
            hi = mid
        else:
            lo = mid
    return datetime.fromtimestamp(hi, UTC)


def dedupe(instants: Iterator[datetime], from_utc: datetime) -> Iterator[datetime]:
    """The non-decreasing ``instants`` at or after ``from_utc``, each once."""
    last: datetime | None = None
    for at in instants:
        if at >= from_utc and at != last:
            yield at
            last = at


# ------------------------------------------------------------------------------ RRULE


_RRULE_PARTS = ("FREQ", "INTERVAL", "COUNT", "UNTIL", "BYMONTH", "BYMONTHDAY", "BYYEARDAY",
                "BYWEEKNO", "BYDAY", "BYHOUR", "BYMINUTE", "BYSECOND", "BYSETPOS", "WKST")
_FREQS = ("YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY")
_DAY_PARTS = ("BYMONTHDAY", "BYYEARDAY", "BYWEEKNO", "BYDAY")


def _rrule_error(rule: str, why: str) -> ValidationError:
    why = " ".join(str(why).split()) or "not a valid recurrence"
    return ValidationError(f"invalid RRULE {rule!r}: {why}",
                           hint="example: FREQ=WEEKLY;BYDAY=SA;BYHOUR=2;BYMINUTE=0")


def _split_rrule(rule: str) -> dict[str, str]:
    text = rule.strip()
    if text.upper().startswith("RRULE:"):
        text = text[6:]
    if "\n" in text or "\r" in text:
        raise _rrule_error(rule, "one RRULE line only (give DTSTART as the window's anchor)")
    parts: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, value = item.partition("=")
        name, value = name.strip().upper(), value.strip().upper()
        if not sep or not value:
            raise _rrule_error(rule, f"{item!r} is not NAME=VALUE")
        if name not in _RRULE_PARTS:
            raise _rrule_error(rule, f"unknown or unsupported part {name}")
        if name in parts:
            raise _rrule_error(rule, f"{name} is given twice")
        parts[name] = value
    if parts.get("FREQ") not in _FREQS:
        raise _rrule_error(rule, f"FREQ must be one of {', '.join(_FREQS)}")
    # RFC 5545 allows BYWEEKNO with YEARLY only. Beyond that we refuse the combinations whose
    # impossible forms dateutil can only detect by walking to year 9999 in small steps.
    for name, freqs in (("BYWEEKNO", ("YEARLY",)), ("BYYEARDAY", ("YEARLY",)),
                        ("BYSETPOS", ("YEARLY", "MONTHLY"))):
        if name in parts and parts["FREQ"] not in freqs:
            raise _rrule_error(rule, f"{name} needs FREQ={' or '.join(freqs)}")
    for name, low in (("INTERVAL", 1), ("COUNT", 1)):
        if name in parts and not (parts[name].isdigit() and low <= int(parts[name]) <= 10_000):
            raise _rrule_error(rule, f"{name} must be a whole number from {low} to 10000")
    return parts


def _check_possible(rule: str, parts: dict[str, str]) -> None:
    """Refuse the cheap-to-spot rules that can never occur (30 February, 31 April)."""
    if "BYMONTH" not in parts or "BYMONTHDAY" not in parts:
        return
    try:
        months = [int(m) for m in parts["BYMONTH"].split(",")]
        days = [abs(int(d)) for d in parts["BYMONTHDAY"].split(",")]
    except ValueError:
        return  # dateutil names the bad value
    longest = max((calendar.monthrange(2000, m)[1] for m in months if 1 <= m <= 12), default=31)
    if days and min(days) > longest:
        raise _rrule_error(rule, "BYMONTHDAY never falls in BYMONTH, so it never occurs")


@dataclass(frozen=True)
class RRuleSchedule:
    """A validated RRULE in a zone. ``anchor`` is DTSTART, in local wall time (naive).

    Occurrences before the anchor do not exist (dateutil's rule); parts the rule leaves open
    (time of day, weekday of a weekly rule, day of a monthly one) are taken from the anchor.
    """

    rule: str
    tz: str
    anchor: datetime
    _rule: rrule = field(repr=False, compare=False)
    _step: tuple[str, int] | None = field(repr=False, compare=False)

    def starts(self, from_utc: datetime) -> Iterator[datetime]:
        """Opening starts at or after ``from_utc``, strictly increasing, in UTC."""
        tz = ZoneInfo(self.tz)
        # Start two days early in wall time: a fold or a gap (Samoa skipped a whole day)
        # can put an occurrence's instant after from_utc while its wall time is before.
        local_from = wall(from_utc, tz) - timedelta(days=2)
        rule = self._near(local_from)
        return dedupe((localize(w, tz) for w in rule.xafter(local_from, inc=True)),
                       as_utc(from_utc))

    def clock_times(self) -> tuple[set[int], set[int], set[int]]:
        """The hours, minutes and seconds a start can have (before DST shifts), from the rule's
        text and anchor, not dateutil's internals: BYHOUR, BYMINUTE and BYSECOND where given,
        else the anchor's (RFC 5545: parts a rule leaves open come from DTSTART), except the
        hours of an HOURLY rule, which step from the anchor's hour by INTERVAL, modulo 24."""
        parts = _split_rrule(self.rule)
        a = self.anchor

        def given(name: str, default: set[int]) -> set[int]:
            return {int(v) for v in parts[name].split(",")} if name in parts else default

        if parts["FREQ"] == "HOURLY":
            step = math.gcd(int(parts.get("INTERVAL", "1")), 24)
            every = {h for h in range(24) if (h - a.hour) % step == 0}
        else:
            every = {a.hour}
        return given("BYHOUR", every), given("BYMINUTE", {a.minute}), given("BYSECOND", {a.second})

    def _near(self, local: datetime) -> rrule:
        """The same rule re-anchored a whole number of periods later, just before ``local``.

        dateutil walks every period from DTSTART; a daily rule anchored in 2000 would take
        ~10,000 steps per query. Moving DTSTART by whole INTERVAL periods keeps the phase and
        every default taken from it (time, weekday, day of month), so the occurrences after
        the first moved period are the same; we keep one spare period before ``local``.
        """
        if self._step is None or local <= self.anchor:
            return self._rule
        unit, n = self._step
        if unit == "months":
            months = (local.year - self.anchor.year) * 12 + local.month - self.anchor.month
            k = months // n - 2
            for k in range(k, max(k - 48, 0), -1):
                total = self.anchor.month - 1 + k * n
                y, m = self.anchor.year + total // 12, total % 12 + 1
                if self.anchor.day <= calendar.monthrange(y, m)[1]:
                    return self._rule.replace(dtstart=self.anchor.replace(year=y, month=m))
            return self._rule
        size = timedelta(**{unit: n})
        k = (local - self.anchor) // size - 2
        return self._rule.replace(dtstart=self.anchor + k * size) if k > 0 else self._rule


def parse_rrule(rule: str, tz: str, *, anchor: datetime | None = None,
                now: datetime | None = None, check_future: bool = True) -> RRuleSchedule:
    """Validate ``rule`` (one RFC 5545 RRULE line, ``RRULE:`` prefix optional) in zone ``tz``.

    ``anchor`` is DTSTART: a naive local wall time or an aware instant. Without it the rule
    must say its own days (a weekly rule needs BYDAY, a monthly one BYMONTHDAY or BYDAY, a
    yearly one BYMONTH and a day) and have INTERVAL 1; times of day default to midnight.
    Refused with one line: garbage, unknown parts, FREQ finer than HOURLY, INTERVAL 0, dates
    that never exist, and (unless ``check_future`` is false, as for a stored rule read back)
    rules with no occurrence in the next ``HORIZON_YEARS`` after ``now`` (default: the clock).
    """
    if not isinstance(rule, str) or not rule.strip():
        raise _rrule_error(str(rule), "empty rule")
    tzinfo = zone(tz)
    parts = _split_rrule(rule)
    freq = parts["FREQ"]
    if anchor is None:
        if int(parts.get("INTERVAL", "1")) > 1:
            raise _rrule_error(rule, "INTERVAL > 1 counts from an anchor: give one")
        if freq in ("WEEKLY", "MONTHLY", "YEARLY") and not any(p in parts for p in _DAY_PARTS):
            raise _rrule_error(rule, f"FREQ={freq} needs BYDAY or BYMONTHDAY, or an anchor")
        if freq == "YEARLY" and "BYMONTH" not in parts and "BYYEARDAY" not in parts \
                and "BYWEEKNO" not in parts:
            raise _rrule_error(rule, "FREQ=YEARLY needs BYMONTH, or an anchor")
        local_anchor = DEFAULT_ANCHOR
    elif anchor.tzinfo is not None:
        local_anchor = wall(anchor, tzinfo).replace(microsecond=0)
    else:
        local_anchor = anchor.replace(microsecond=0)
    until = parts.get("UNTIL", "")
    if until.endswith("Z"):  # RFC 5545: UTC; dateutil wants the anchor's (local) form
        try:
            at = datetime.strptime(until, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        except ValueError:
            raise _rrule_error(rule, f"UNTIL {until} is not YYYYMMDDTHHMMSSZ") from None
        parts["UNTIL"] = wall(at, tzinfo).strftime("%Y%m%dT%H%M%S")
    _check_possible(rule, parts)
    text = "RRULE:" + ";".join(f"{k}={v}" for k, v in parts.items())
    try:
        parsed = rrulestr(text, dtstart=local_anchor)
    except (ValueError, KeyError, TypeError, OverflowError, IndexError) as exc:
        raise _rrule_error(rule, str(exc)) from None
    if not isinstance(parsed, rrule):
        raise _rrule_error(rule, "one RRULE only")
    n = int(parts.get("INTERVAL", "1"))
    step = None if "COUNT" in parts else {
        "YEARLY": ("months", 12 * n), "MONTHLY": ("months", n), "WEEKLY": ("weeks", n),
        "DAILY": ("days", n), "HOURLY": ("hours", n)}[freq]
    schedule = RRuleSchedule(rule.strip(), tz, local_anchor, parsed, step)
    if check_future:
        check_horizon(schedule, now, f"RRULE {rule.strip()!r}")
    return schedule


def check_horizon(schedule: Recurrence, now: datetime | None, what: str) -> None:
    """``ValidationError`` unless ``schedule`` starts within ``HORIZON_YEARS`` after ``now``."""
    start = as_utc(now) if now is not None else datetime.now(UTC)
    try:
        first = next(iter(schedule.starts(start)), None)
    except (ValueError, OverflowError):
        first = None
    if first is None or first > start.replace(year=start.year + HORIZON_YEARS, day=1):
        raise ValidationError(f"{what} has no occurrence in the next {HORIZON_YEARS} years",
                              hint="check UNTIL/COUNT and the day and month parts")


__all__ = [
    "HORIZON_YEARS", "RRuleSchedule", "Recurrence", "as_utc", "check_horizon", "dedupe",
    "localize", "parse_rrule", "wall", "zone",
]
