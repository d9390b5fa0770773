"""Service windows and freeze periods: the model, and the queries submission and claim call.

A ``Window`` is recurring (an RRULE or a cron expression for its start, a duration or a
wall-clock end, an IANA zone) or one-off (a start and an end). A freeze period is a ``Window``
with ``freeze=True``: nothing may run inside it, whatever the windows say. Every instant in
and out is an aware datetime (returned in UTC). Pure functions: no clock, Redis or SQL.

Public API
----------
1. ``Window(...)``: validated on construction (``ValidationError``, one line); call
   ``check_future(now)`` when an operator creates one (refuses windows that never open).
2. ``openings(window, start_utc, end_utc)``: the openings overlapping ``[start, end)``
   (overlapping or touching openings of one window merged), any approval.
3. ``upcoming(window, after, count)``: the next ``count`` openings (``windows next NAME``).
4. ``effective_window(host, groups, assignments)``: the windows and freezes that apply to a
   host (host > deepest group > name order > fleet-wide; freezes always add up).
5. ``next_opening(windows, at, min_remaining, freezes=...)``: the first instant ``>= at`` at
   which a job of expected duration ``min_remaining`` fits wholly inside an approved opening
   and outside every freeze, as ``Opening(start_utc=that instant, end_utc=end of the free
   stretch)``, or None within ``horizon``. ``windows=None`` means no window is required.
6. ``is_open(windows, at, freezes=...)``: whether a job may start at ``at``.

Unapproved windows are ignored by 5 and 6 (a job that requires a window never runs in one);
freezes apply whether approved or not. An approval may be partial: ``approved_until`` cuts the
approved openings at its expiry, and a window not approved as a whole may still have some
openings approved one by one (``approved_starts``: their start instants), and some openings of an
approved window denied one by one (``denied_starts``).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, time, timedelta, timezone
from itertools import islice
from zoneinfo import ZoneInfo

from scheduler.calendar.cron import parse_cron
from scheduler.calendar.recurrence import (
    HORIZON_YEARS,
    Recurrence,
    as_utc,
    localize,
    parse_rrule,
    wall,
    zone,
)
from scheduler.errors import ValidationError

DEFAULT_HORIZON = timedelta(days=2 * 366)  # how far next_opening looks before giving up
UPCOMING_FIRST_SPAN = timedelta(days=8)  # upcoming's first search, four times longer each next
CONTINUOUS_SHOWN = timedelta(days=31)  # upcoming: an opening this long is shown cut there
_LOOKBACK = timedelta(days=2)  # longer than any wall-clock-end opening (< 24 h + a DST shift)


@dataclass(frozen=True, order=True)
class Opening:
    """One period in which a window is open: ``[start_utc, end_utc)``."""

    start_utc: datetime
    end_utc: datetime
    tz: str = "UTC"
    window: str = ""

    @property
    def start_local(self) -> datetime:
        return self.start_utc.astimezone(ZoneInfo(self.tz))

    @property
    def end_local(self) -> datetime:
        return self.end_utc.astimezone(ZoneInfo(self.tz))

    @property
    def length(self) -> timedelta:
        return self.end_utc - self.start_utc


def _bad(name: str, why: str, hint: str | None = None) -> ValidationError:
    return ValidationError(f"window {name!r}: {why}", hint=hint)


def parse_clock(value: time | str, name: str = "?") -> time:
    """A wall-clock time from ``HH:MM`` or ``HH:MM:SS`` (or a ``time``)."""
    if isinstance(value, time):
        return value.replace(tzinfo=None)
    try:
        parts = [int(p) for p in value.strip().split(":")]
        if len(parts) not in (2, 3) or not all(p >= 0 for p in parts):
            raise ValueError
        return time(*parts)
    except (ValueError, TypeError, AttributeError):
        raise _bad(name, f"end time {value!r} is not HH:MM", "example: 05:30") from None


@dataclass(frozen=True)
class Window:
    """A service window or freeze period (see the module docstring).

    Recurring: ``rrule`` or ``cron``, plus ``duration`` (absolute elapsed time) or
    ``end_time`` (wall clock: the first instant at or after the start showing that time, first
    pass of a repeated hour unless the start is already past it, end of a gap if skipped).
    ``start`` is then the anchor (RRULE DTSTART; no opening starts before it) and ``end`` the
    last moment an opening may start. One-off: ``start`` and ``end`` (or ``duration``).
    Naive ``start``/``end`` are wall times in ``tz``; aware ones are instants.
    """

    name: str
    tz: str = "UTC"
    rrule: str | None = None
    cron: str | None = None
    duration: timedelta | None = None
    end_time: time | str | None = None
    start: datetime | None = None
    end: datetime | None = None
    approved: bool = True
    freeze: bool = False
    approved_until: datetime | None = None  # the approval expires: no approved time after it
    approved_starts: frozenset[datetime] = frozenset()  # openings approved one by one
    denied_starts: frozenset[datetime] = frozenset()  # openings denied one by one
    _rec: Recurrence | None = field(default=None, init=False, repr=False, compare=False)
    _first: datetime | None = field(default=None, init=False, repr=False, compare=False)
    _last: datetime | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        name = self.name
        if not isinstance(name, str) or not name or len(name) > 255 or \
                any(c.isspace() or not c.isprintable() for c in name):
            raise ValidationError(f"window name {name!r} must be 1-255 printable characters "
                                  "without spaces")
        tz = zone(self.tz)
        put = object.__setattr__
        if self.duration is not None and self.duration <= timedelta(0):
            raise _bad(name, f"duration {self.duration} must be positive")
        if self.end_time is not None:
            put(self, "end_time", parse_clock(self.end_time, name))
        first = self._instant(self.start, tz)
        last = self._instant(self.end, tz)
        if self.rrule is not None and self.cron is not None:
            raise _bad(name, "give an RRULE or a cron expression, not both")
        if self.rrule is None and self.cron is None:
            self._check_one_off(first, last)
            put(self, "_first", first)
            put(self, "_last", last if last is not None else first + self.duration)  # type: ignore[operator]
            return
        if (self.duration is None) == (self.end_time is None):
            raise _bad(name, "a recurring window needs a duration or an end time (one of them)")
        if first is not None and last is not None and last < first:
            raise _bad(name, f"end {self.end} is before start {self.start}")
        rec: Recurrence = (
            parse_rrule(self.rrule, self.tz, anchor=self.start, check_future=False)
            if self.rrule is not None else parse_cron(self.cron or "", self.tz, check_future=False))
        if isinstance(self.end_time, time):
            hours, minutes, seconds = rec.clock_times()
            t = self.end_time
            if t.hour in hours and t.minute in minutes and t.second in seconds:
                raise _bad(name, f"end time {t:%H:%M:%S} equals a start time of the rule",
                           "an opening needs a length: use a later end time or a duration")
        put(self, "_rec", rec)
        put(self, "_first", first)
        put(self, "_last", last)

    @staticmethod
    def _instant(value: datetime | None, tz: ZoneInfo) -> datetime | None:
        if value is None:
            return None
        return localize(value, tz) if value.tzinfo is None else as_utc(value)

    def _check_one_off(self, first: datetime | None, last: datetime | None) -> None:
        if first is None:
            raise _bad(self.name, "needs an RRULE, a cron expression, or a start (one-off)")
        if self.end_time is not None:
            raise _bad(self.name, "a one-off window takes an end or a duration, not an end time")
        if (last is None) == (self.duration is None):
            raise _bad(self.name, "a one-off window needs an end or a duration (one of them)")
        if last is not None and last <= first:
            raise _bad(self.name, f"end {self.end} is not after start {self.start}")

    @property
    def recurring(self) -> bool:
        return self._rec is not None

    def check_future(self, now: datetime | None = None) -> None:
        """``ValidationError`` if the window has no opening in the next ``HORIZON_YEARS``."""
        at = as_utc(now) if now is not None else datetime.now(timezone.utc)
        if self._rec is None:
            if self._last is not None and self._last <= at:
                raise _bad(self.name, f"it ended at {self._last:%Y-%m-%d %H:%M} UTC")
            return
        if next(_raw(self, at, at.replace(year=at.year + HORIZON_YEARS, day=1)), None) is None:
            raise _bad(self.name, f"it has no opening in the next {HORIZON_YEARS} years",
                       "check the rule's UNTIL/COUNT, the window's start and end")


def _end_of(start: datetime, end_time: time, tz: ZoneInfo) -> datetime:
    day = wall(start, tz).date()
    for offset in range(3):
        naive = datetime.combine(day + timedelta(days=offset), end_time)
        for fold in (0, 1):
            at = localize(naive, tz, fold=fold)
            if at >= start:
                return at
    raise AssertionError("unreachable: a wall time recurs within three days")


def _raw(w: Window, from_utc: datetime, until_utc: datetime) -> Iterator[Opening]:
    """Openings with ``end > from_utc`` and ``start < until_utc``, by start, not merged."""
    if w._rec is None:
        assert w._first is not None and w._last is not None
        if w._last > from_utc and w._first < until_utc:
            yield Opening(w._first, w._last, w.tz, w.name)
        return
    tz = ZoneInfo(w.tz)
    begin = from_utc - (w.duration or _LOOKBACK)
    if w._first is not None and w.cron is not None:
        begin = max(begin, w._first)
    for start in w._rec.starts(begin):
        if start >= until_utc or (w._last is not None and start > w._last):
            return
        end = start + w.duration if w.duration else _end_of(start, w.end_time, tz)  # type: ignore[arg-type]
        if end > start and end > from_utc:
            yield Opening(start, end, w.tz, w.name)


def _merge(items: Iterable[Opening]) -> Iterator[Opening]:
    """Overlapping or touching openings (sorted by start) as one."""
    cur: Opening | None = None
    for o in items:
        if cur is not None and o.start_utc <= cur.end_utc:
            if o.end_utc > cur.end_utc:
                cur = replace(cur, end_utc=o.end_utc)
            continue
        if cur is not None:
            yield cur
        cur = o
    if cur is not None:
        yield cur


def _union(ws: Iterable[Window], from_utc: datetime, until_utc: datetime) -> Iterator[Opening]:
    return _merge(heapq.merge(*(_raw(w, from_utc, until_utc) for w in ws)))


def _approved_raw(w: Window, from_utc: datetime, until_utc: datetime) -> Iterator[Opening]:
    """The approved parts of ``_raw``: every opening (``approved``) or those whose start was
    approved one by one, cut at ``approved_until``."""
    expiry = as_utc(w.approved_until) if w.approved_until is not None else None
    for o in _raw(w, from_utc, until_utc):
        if expiry is not None and o.start_utc >= expiry:
            return
        if o.start_utc in w.denied_starts or (
                not w.approved and o.start_utc not in w.approved_starts):
            continue
        yield o if expiry is None or o.end_utc <= expiry else replace(o, end_utc=expiry)


def _approved_union(ws: Iterable[Window], from_utc: datetime,
                    until_utc: datetime) -> Iterator[Opening]:
    return _merge(heapq.merge(*(_approved_raw(w, from_utc, until_utc) for w in ws)))


def openings(window: Window, start_utc: datetime, end_utc: datetime) -> list[Opening]:
    """The (merged) openings of ``window`` that overlap ``[start_utc, end_utc)``."""
    return list(_union([window], as_utc(start_utc), as_utc(end_utc)))


def upcoming(window: Window, after: datetime, count: int = 5) -> list[Opening]:
    """The next ``count`` openings ending after ``after`` (one in progress comes first).

    ``Opening.start_local``/``end_local`` give the window's zone for display next to UTC.
    An opening that runs on without a break for ``CONTINUOUS_SHOWN`` or more (an hourly window
    two hours long never closes) ends where the search stopped, that far ahead or more:
    its end is for display, never for a job's placement (``next_opening`` has its own horizon).
    """
    at = as_utc(after)
    horizon = at.replace(year=at.year + HORIZON_YEARS, day=1)
    span = UPCOMING_FIRST_SPAN
    while True:
        # Searched over a span that grows until it holds ``count`` openings, the last one
        # closed inside it: a nightly window costs a week's openings, not ten years'.
        until = min(at + span, horizon)
        found = list(islice(_union([window], at, until), max(count, 0)))
        at_edge = bool(found) and found[-1].end_utc >= until
        if until == horizon or (len(found) >= max(count, 0) and not at_edge) or (
                at_edge and span >= CONTINUOUS_SHOWN):
            return found
        span *= 4


def _subtract(stretches: Iterator[Opening], freezes: Iterator[Opening]) -> Iterator[Opening]:
    """The parts of ``stretches`` outside every freeze (both sorted and merged)."""
    pending = next(freezes, None)
    for o in stretches:
        cur = o.start_utc
        while pending is not None and pending.start_utc < o.end_utc:
            if pending.end_utc > cur:
                if pending.start_utc > cur:
                    yield replace(o, start_utc=cur, end_utc=pending.start_utc)
                cur = pending.end_utc
                if cur >= o.end_utc:
                    break  # this freeze may cover the next stretch too: keep it
            pending = next(freezes, None)
        if cur < o.end_utc:
            yield replace(o, start_utc=cur)


def next_opening(windows: Sequence[Window] | None, at: datetime,
                 min_remaining: timedelta = timedelta(0), *, freezes: Sequence[Window] = (),
                 horizon: timedelta = DEFAULT_HORIZON) -> Opening | None:
    """The first instant ``>= at`` from which a job of ``min_remaining`` fits (see module doc).

    ``windows=None``: no window required (only freezes restrict); an empty sequence: never.
    Returns ``Opening(start, end)`` with ``start >= at`` the instant and ``end`` the end of
    the free stretch (the window closes or a freeze begins; for a stretch longer than
    ``2 * horizon``, cut there), or None if nothing fits before ``at + horizon``. Unapproved
    windows count as absent.
    """
    start = as_utc(at)
    if min_remaining < timedelta(0):
        raise ValueError("min_remaining must not be negative")
    for w in windows or ():
        if w.freeze:
            raise ValueError(f"{w.name!r} is a freeze period: pass it in freezes=")
    approved = None if windows is None else \
        [w for w in windows if w.approved or w.approved_starts]
    until = start + horizon + min_remaining
    for free in _free(approved, freezes, start, until):
        begin = max(free.start_utc, start)
        if begin >= start + horizon:
            return None
        if free.end_utc > begin and free.end_utc - begin >= min_remaining:
            return _full_end(replace(free, start_utc=begin), approved, freezes, until, horizon)
    return None


def _free(approved: Sequence[Window] | None, freezes: Sequence[Window], start: datetime,
          until: datetime) -> Iterator[Opening]:
    """Free stretches (approved openings minus freezes) overlapping ``[start, until)``."""
    stretches = iter([Opening(start, until)]) if approved is None else \
        _approved_union(approved, start, until)
    return _subtract(stretches, _union(freezes, start, until))


def _full_end(found: Opening, approved: Sequence[Window] | None, freezes: Sequence[Window],
              until: datetime, horizon: timedelta) -> Opening:
    """``found`` with the end of its whole free stretch: the search stopped generating
    openings at ``until``, so a stretch reaching past it may go on (up to ``horizon`` more)."""
    begin = found.start_utc
    while found.end_utc >= until and until - begin < 2 * horizon:
        until = found.end_utc + horizon
        whole = next(p for p in _free(approved, freezes, begin, until) if p.end_utc > begin)
        found = replace(found, end_utc=whole.end_utc)
    return found


def is_open(windows: Sequence[Window] | None, at: datetime, *,
            freezes: Sequence[Window] = ()) -> bool:
    """Whether a job may start at ``at``: inside an approved opening, outside every freeze."""
    found = next_opening(windows, at, freezes=freezes, horizon=timedelta(microseconds=1))
    return found is not None and found.start_utc == as_utc(at)


# ----------------------------------------------------------------------- assignments


@dataclass(frozen=True)
class Assignment:
    """``window`` applies to ``host``, or to every host of ``group``, or (neither) to all."""

    window: Window
    host: str | None = None
    group: str | None = None


@dataclass(frozen=True)
class EffectiveWindows:
    """What applies to one host: its windows (one source), every freeze, and the source."""

    windows: tuple[Window, ...]
    freezes: tuple[Window, ...]
    source: str  # "host", "group:<name>", "fleet" or "none"


def effective_window(host: str, groups: Mapping[str, int],
                     assignments: Iterable[Assignment]) -> EffectiveWindows:
    """The windows and freezes of ``host``. ``groups``: every group the host is in, directly
    or through parents, with its depth (``all`` 0, top groups 1, a child deeper than its
    parents; as ``scheduler.inventory`` computes it).

    Windows come from the most specific source only: the host's own assignments; else the
    deepest of its groups that has windows (a tie goes to the group name first in sort
    order); else fleet-wide ones. Freezes add up from every source.
    """
    by_source: dict[str, list[Window]] = {}
    freezes: dict[str, Window] = {}
    for a in assignments:
        if a.host is not None and a.group is not None:
            raise ValueError("an assignment names a host or a group, not both")
        if a.host is not None and a.host != host:
            continue
        if a.group is not None and a.group not in groups:
            continue
        if a.window.freeze:
            freezes.setdefault(a.window.name, a.window)
            continue
        key = "host" if a.host is not None else f"group:{a.group}" if a.group else "fleet"
        by_source.setdefault(key, []).append(a.window)
    group_keys = sorted((k for k in by_source if k.startswith("group:")),
                        key=lambda k: (-groups[k[6:]], k[6:]))
    order = (["host"] if "host" in by_source else []) + group_keys + \
        (["fleet"] if "fleet" in by_source else [])
    source = order[0] if order else "none"
    chosen = {w.name: w for w in by_source.get(source, [])}
    return EffectiveWindows(tuple(chosen[n] for n in sorted(chosen)),
                            tuple(freezes[n] for n in sorted(freezes)), source)


__all__ = [
    "Assignment", "CONTINUOUS_SHOWN", "DEFAULT_HORIZON", "EffectiveWindows", "Opening",
    "Window", "effective_window", "is_open", "next_opening", "openings", "parse_clock",
    "upcoming",
]
