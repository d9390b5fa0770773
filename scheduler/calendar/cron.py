"""Cron expressions in IANA time zones: validation, fires, English, with Debian cron's DST rules.

cronsim does the work (it follows Debian cron across DST; croniter fires a fixed-time job twice
on the fall-back night, so it is not used). Instants in and out are aware; out in UTC.

Public API
----------
``parse_cron(expr, tz)``                -> ``CronSchedule`` (5 fields or ``@daily``-style macro)
``next_fire(expr, tz, after_utc)``      the first fire strictly after ``after_utc``
``fires_between(expr, tz, a, b)``       fires in ``[a, b)``, oldest first
``explain_cron(expr)``                  short English ("At 02:30 every day"), by cronsim

DST rules (Debian cron, as cronsim implements it)
-------------------------------------------------
An expression whose minute and hour fields both start with a digit is a fixed-time job: it
runs once in a repeated hour (the first pass) and, when the clocks skip its time, right after
the gap (several skipped times give one fire). An expression whose minute or hour field starts
with ``*`` (``*/15 2 * * *``, ``30 * * * *``) follows real time: it fires in both passes of a
repeated hour and not at all in a skipped one.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from scheduler.calendar.recurrence import as_utc, check_horizon, dedupe, localize, wall, zone
from scheduler.errors import ValidationError

CRON_FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
CRON_MACROS = {
    "@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


UTC = timezone.utc
_MARGIN = timedelta(hours=3)  # longer than any DST shift: the fold a naive wall time hides


def _cron_error(expr: str, why: str) -> ValidationError:
    return ValidationError(f"invalid cron expression {expr!r}: {why}",
                           hint="five fields: minute hour day-of-month month day-of-week, "
                                "e.g. '30 2 * * SUN'")


def _cron_fields(expr: str) -> str:
    """The five-field form of ``expr`` (macros expanded), or ``ValidationError`` naming the field."""
    if not isinstance(expr, str):
        raise _cron_error(str(expr), "not a string")
    text = " ".join(expr.split())
    if text.startswith("@"):
        if text.lower() not in CRON_MACROS:
            raise _cron_error(expr, f"unknown macro {text} (known: {', '.join(CRON_MACROS)})")
        return CRON_MACROS[text.lower()]
    fields = text.split(" ") if text else []
    if len(fields) != 5:
        raise _cron_error(expr, f"expected 5 fields ({' '.join(CRON_FIELDS)}), "
                                f"got {len(fields)}")
    try:
        CronSim(text, datetime(2000, 1, 1))
    except CronSimError as exc:
        name = str(exc).removeprefix("Bad ")
        if name == "day-of-month" and _parses(f"0 0 {fields[2]} * *"):
            raise _cron_error(expr, f"day-of-month {fields[2]!r} never falls in month "
                                    f"{fields[3]!r}, so it never fires") from None
        if name in CRON_FIELDS:
            i = CRON_FIELDS.index(name)
            raise _cron_error(expr, f"bad {name} field {fields[i]!r}") from None
        raise _cron_error(expr, str(exc)) from None
    except (ValueError, IndexError, TypeError) as exc:
        raise _cron_error(expr, str(exc) or type(exc).__name__) from None
    return text


def _parses(fields: str) -> bool:
    try:
        CronSim(fields, datetime(2000, 1, 1))
    except (CronSimError, ValueError, IndexError, TypeError):
        return False
    return True


@dataclass(frozen=True)
class CronSchedule:
    """A validated five-field cron expression in a zone (Debian cron's DST behaviour)."""

    expr: str  # as given
    tz: str
    fields: str  # the five fields cronsim reads (macros expanded)

    @property
    def fixed_time(self) -> bool:
        """Minute and hour both start with a digit: Debian's fixed-time DST rules apply."""
        minute, hour = self.fields.split(" ")[:2]
        return not minute.startswith("*") and not hour.startswith("*")

    def starts(self, from_utc: datetime) -> Iterator[datetime]:
        """Fires at or after ``from_utc``, strictly increasing, in UTC.

        cronsim matches the fields against naive wall times; we map each matching wall time
        to instants ourselves (cronsim's own aware mode drops fires after a 30-minute DST
        shift, as on Lord Howe Island): a fixed-time expression fires at the wall time's
        first pass, or right after the gap that skips it; a real-time one at every instant
        showing that wall time (none in a gap, two in a repeated hour).
        """
        start = as_utc(from_utc)
        tz = ZoneInfo(self.tz)
        # A margin early: a repeated hour's second pass shows an earlier wall time.
        walls = _until_exhausted(CronSim(self.fields, wall(start - _MARGIN, tz)))
        if self.fixed_time:
            return dedupe((localize(w, tz) for w in walls), start)
        return dedupe(_every_pass(walls, tz), start)

    def explain(self) -> str:
        return explain_cron(self.fields)

    def clock_times(self) -> tuple[set[int], set[int], set[int]]:
        """The hours, minutes and seconds a fire can have (before DST shifts)."""
        sim = CronSim(self.fields, datetime(2000, 1, 1))
        return set(sim.hours), set(sim.minutes), {0}


def _every_pass(walls: Iterator[datetime], tz: ZoneInfo) -> Iterator[datetime]:
    """Every instant showing one of ``walls`` (increasing), in increasing order."""
    pending: list[datetime] = []
    for naive in walls:
        # Instants of later wall times are never before this one's first pass (or gap end).
        bound = localize(naive, tz)
        while pending and pending[0] < bound:
            yield heapq.heappop(pending)
        for fold in (0, 1):
            at = naive.replace(tzinfo=tz, fold=fold).astimezone(UTC)
            if at.astimezone(tz).replace(tzinfo=None) == naive and at not in pending:
                heapq.heappush(pending, at)
    yield from sorted(pending)


def _until_exhausted(sim: CronSim) -> Iterator[datetime]:
    while True:
        try:
            yield next(sim)
        except StopIteration:  # cronsim gives up after 50 years without a match
            return


def parse_cron(expr: str, tz: str, *, now: datetime | None = None,
               check_future: bool = True) -> CronSchedule:
    """Validate ``expr`` (5 fields or an ``@daily``-style macro) in zone ``tz``.

    Refused with one line naming the field: wrong field count, out-of-range values, days
    that never exist (``0 0 30 2 *``), nothing in the next ``HORIZON_YEARS`` after ``now``.
    """
    zone(tz)
    schedule = CronSchedule(expr.strip() if isinstance(expr, str) else str(expr), tz,
                            _cron_fields(expr))
    if check_future:
        check_horizon(schedule, now, f"cron expression {schedule.expr!r}")
    return schedule


def next_fire(expr: str | CronSchedule, tz: str, after_utc: datetime) -> datetime | None:
    """The first fire strictly after ``after_utc`` (UTC), or None if there is none."""
    schedule = expr if isinstance(expr, CronSchedule) else parse_cron(expr, tz, now=after_utc)
    return next(schedule.starts(as_utc(after_utc) + timedelta(microseconds=1)), None)


def fires_between(expr: str | CronSchedule, tz: str, start_utc: datetime,
                  end_utc: datetime) -> list[datetime]:
    """Every fire in ``[start_utc, end_utc)``, oldest first, in UTC."""
    schedule = expr if isinstance(expr, CronSchedule) else parse_cron(expr, tz, now=start_utc)
    end = as_utc(end_utc)
    out: list[datetime] = []
    for at in schedule.starts(start_utc):
        if at >= end:
            break
        out.append(at)
    return out


def explain_cron(expr: str) -> str:
    """Short English for a cron expression, by cronsim ("At 02:30 every day")."""
    fields = _cron_fields(expr)
    return CronSim(fields, datetime(2000, 1, 1)).explain()


__all__ = [
    "CRON_FIELDS", "CRON_MACROS", "CronSchedule", "explain_cron", "fires_between", "next_fire",
    "parse_cron",
]
