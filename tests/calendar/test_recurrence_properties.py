"""Property tests: RRULE and cron occurrences across DST against independent oracles.

The oracles never call scheduler code: they enumerate local calendar days (RRULE, fixed-time
cron) or every UTC minute (real-time cron) and localize wall times by brute force with
``astimezone`` only. Query ranges are biased towards the DST transitions of each zone.
"""

from __future__ import annotations

from datetime import date, datetime, time, timedelta, timezone
from functools import cache
from itertools import islice
from zoneinfo import ZoneInfo

from hypothesis import HealthCheck, event, given, reject, settings
from hypothesis import strategies as st

from scheduler.calendar.cron import parse_cron
from scheduler.calendar.recurrence import parse_rrule
from scheduler.errors import ValidationError

UTC = timezone.utc
ZONES = ["Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC"]
FIRST, LAST = datetime(2020, 1, 1, tzinfo=UTC), datetime(2035, 12, 31, tzinfo=UTC)
SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
DAYS = ["MO", "TU", "WE", "TH", "FR", "SA", "SU"]
# Biased towards what DST touches: every zone here changes its clocks on a Sunday between
# 01:00 and 03:00 local time, so those hours and Sunday come up far more often than uniform.
HOURS = st.one_of(st.sampled_from([1, 2, 3]), st.integers(0, 23))
WEEKDAYS = st.one_of(st.just("SU"), st.sampled_from(DAYS))


# ---------------------------------------------------------------------- oracle helpers


@cache
def transitions(tz_name: str) -> list[datetime]:
    """Every instant (to the minute) at which the zone's UTC offset changes, 2020-2035."""
    tz = ZoneInfo(tz_name)
    found = []
    at = FIRST
    while at < LAST:
        nxt = at + timedelta(days=1)
        if at.astimezone(tz).utcoffset() != nxt.astimezone(tz).utcoffset():
            minute = at
            while minute.astimezone(tz).utcoffset() == at.astimezone(tz).utcoffset():
                minute += timedelta(minutes=1)
            found.append(minute)
        at = nxt
    return found


def oracle_instant(naive: datetime, tz: ZoneInfo) -> datetime:
    """First UTC instant whose wall time is ``naive``; in a gap, the first instant after it."""
    candidates = []
    for hours in range(-15, 16):
        for extra in (0, 30, 45):
            u = (naive - timedelta(hours=hours, minutes=extra)).replace(tzinfo=UTC)
            if u.astimezone(tz).replace(tzinfo=None) == naive:
                candidates.append(u)
    if candidates:
        return min(candidates)
    u = (naive - timedelta(hours=16)).replace(tzinfo=UTC)
    while u.astimezone(tz).replace(tzinfo=None) <= naive:
        u += timedelta(minutes=1)
    return u


@st.composite
def start_times(draw: st.DrawFn, tz_name: str, span_days: int) -> datetime:
    """A query start, half the time within a few days before a DST transition."""
    points = transitions(tz_name)
    if points and draw(st.booleans()):
        pivot = draw(st.sampled_from(points))
        return pivot - timedelta(minutes=draw(st.integers(0, span_days * 24 * 60)))
    return FIRST + timedelta(minutes=draw(st.integers(0, 15 * 365 * 24 * 60)))


def take_until(iterator, end: datetime) -> list[datetime]:
    out = []
    for at in iterator:
        if at >= end:
            break
        out.append(at)
    return out


def assert_strictly_increasing_utc(items: list[datetime]) -> None:
    assert all(a.tzinfo is not None and a.utcoffset() == timedelta(0) for a in items)
    assert all(a < b for a, b in zip(items, items[1:]))


# ------------------------------------------------------------------------------ RRULE


@st.composite
def rrules(draw: st.DrawFn):
    freq = draw(st.sampled_from(["DAILY", "WEEKLY", "MONTHLY"]))
    interval = draw(st.integers(1, 3))
    hours = draw(st.sets(HOURS, min_size=1, max_size=3))
    minutes = draw(st.sets(st.sampled_from([0, 15, 30, 45, 7, 59]), min_size=1, max_size=2))
    days: set[str] = set()
    monthdays: set[int] = set()
    if freq == "WEEKLY":
        days = draw(st.sets(WEEKDAYS, min_size=1, max_size=3))
    elif freq == "DAILY":
        days = draw(st.sets(WEEKDAYS, max_size=3))
    else:
        monthdays = draw(st.sets(st.integers(1, 31), max_size=3))
        days = draw(st.sets(WEEKDAYS, min_size=0 if monthdays else 1, max_size=2))
    parts = [f"FREQ={freq}", f"INTERVAL={interval}",
             "BYHOUR=" + ",".join(map(str, sorted(hours))),
             "BYMINUTE=" + ",".join(map(str, sorted(minutes)))]
    if days:
        parts.append("BYDAY=" + ",".join(sorted(days)))
    if monthdays:
        parts.append("BYMONTHDAY=" + ",".join(map(str, sorted(monthdays))))
    return ";".join(parts), freq, interval, hours, minutes, days, monthdays


def rrule_day_matches(d: date, freq: str, interval: int, days: set[str],
                      monthdays: set[int], anchor: date) -> bool:
    if d < anchor:
        return False
    weekday_ok = not days or DAYS[d.weekday()] in days
    if freq == "DAILY":
        return (d - anchor).days % interval == 0 and weekday_ok
    if freq == "WEEKLY":  # weeks start on Monday (WKST default)
        weeks = ((d - timedelta(days=d.weekday())) - (anchor - timedelta(days=anchor.weekday())))
        return (weeks.days // 7) % interval == 0 and weekday_ok
    months = (d.year - anchor.year) * 12 + d.month - anchor.month
    return months % interval == 0 and weekday_ok and (not monthdays or d.day in monthdays)


@SETTINGS
@given(data=st.data(), rule=rrules(), tz_name=st.sampled_from(ZONES))
def test_every_rrule_occurrence_is_produced_once_in_order_and_never_in_a_gap(data, rule, tz_name):
    text, freq, interval, hours, minutes, days, monthdays = rule
    tz = ZoneInfo(tz_name)
    span = 40 if freq == "MONTHLY" else 10
    start = data.draw(start_times(tz_name, span))
    anchor = start.date() - timedelta(days=data.draw(st.integers(0, 3 * 366)))
    end = start + timedelta(days=span)
    schedule = parse_rrule(text, tz_name, anchor=datetime.combine(anchor, time()),
                           check_future=False)

    got = take_until(schedule.starts(start), end)

    # Oracle: every matching local day and time, localized by brute force.
    wanted: set[datetime] = set()
    intended: dict[datetime, set[datetime]] = {}
    d = (start - timedelta(days=2)).date()
    while d <= (end + timedelta(days=2)).date():
        if rrule_day_matches(d, freq, interval, days, monthdays, anchor):
            for h in hours:
                for m in minutes:
                    naive = datetime.combine(d, time(h, m))
                    at = oracle_instant(naive, tz)
                    if start <= at < end:
                        wanted.add(at)
                        intended.setdefault(at, set()).add(naive)
        d += timedelta(days=1)
    event("an intended wall time fell in a gap" if any(
        naive not in {at.astimezone(tz).replace(tzinfo=None)} for at, ns in intended.items()
        for naive in ns) else "no gap")
    assert got == sorted(wanted)
    assert_strictly_increasing_utc(got)
    for at in got:  # round trip, or the first instant after a gap
        local = at.astimezone(tz).replace(tzinfo=None)
        if local not in intended[at]:
            before = (at - timedelta(minutes=1)).astimezone(tz).replace(tzinfo=None)
            assert all(before < naive < local for naive in intended[at])


@st.composite
def anchored_rules(draw: st.DrawFn):
    freq = draw(st.sampled_from(["YEARLY", "MONTHLY", "WEEKLY", "DAILY", "HOURLY"]))
    parts = [f"FREQ={freq}", f"INTERVAL={draw(st.integers(1, 5))}"]
    if draw(st.booleans()):
        parts.append("BYHOUR=" + ",".join(map(str, sorted(draw(
            st.sets(st.integers(0, 23), min_size=1, max_size=3))))))
    if freq in ("WEEKLY", "MONTHLY", "DAILY") and draw(st.booleans()):
        parts.append("BYDAY=" + ",".join(sorted(draw(
            st.sets(st.sampled_from(DAYS), min_size=1, max_size=3)))))
    if freq == "MONTHLY" and draw(st.booleans()):
        parts.append("BYMONTHDAY=" + ",".join(map(str, sorted(draw(
            st.sets(st.sampled_from([1, 15, 28, 29, 30, 31, -1]), min_size=1, max_size=2))))))
    if freq == "MONTHLY" and "BYDAY" in parts[-1] and draw(st.booleans()):
        parts.append(f"BYSETPOS={draw(st.sampled_from([1, -1, 2]))}")
    anchor = datetime(2000, 1, 1) + timedelta(
        minutes=draw(st.integers(0, 30 * 365 * 24 * 60)))
    if draw(st.booleans()):  # the awkward month ends: 29 February, the 31st
        anchor = anchor.replace(month=draw(st.sampled_from([1, 3, 5, 12])), day=31)
        if draw(st.booleans()):
            anchor = anchor.replace(year=2000 + 4 * draw(st.integers(0, 7)), month=2, day=29)
    return ";".join(parts), anchor.replace(second=0)


@SETTINGS
@given(rule=anchored_rules(), tz_name=st.sampled_from(ZONES),
       offset_days=st.integers(0, 40 * 366))
def test_a_re_anchored_rule_gives_the_same_occurrences_as_walking_from_dtstart(
        rule, tz_name, offset_days):
    # Given a rule anchored years before the query, with every default taken from DTSTART
    text, anchor = rule
    try:
        schedule = parse_rrule(text, tz_name, anchor=anchor, check_future=False)
    except ValidationError:  # e.g. FREQ=HOURLY;INTERVAL=2;BYHOUR=1 from an even hour: never
        reject()
    local = anchor + timedelta(days=offset_days, hours=offset_days % 24)
    # When the fast path (moved DTSTART) and the slow path (the original rule) are asked
    fast = list(islice(schedule._near(local).xafter(local, inc=True), 12))
    slow = list(islice(schedule._rule.xafter(local, inc=True), 12))
    # Then they agree
    assert fast == slow


# ------------------------------------------------------------------------------- cron


def field_text(values: set[int], full: range, step: int | None) -> str:
    if step is not None:
        return f"*/{step}" if step > 1 else "*"
    return ",".join(map(str, sorted(values)))


@st.composite
def crons(draw: st.DrawFn):
    fixed = draw(st.booleans())
    if fixed:  # minute and hour start with a digit: Debian fixed-time rules
        minutes = draw(st.sets(st.sampled_from([0, 1, 15, 30, 45, 59]), min_size=1, max_size=2))
        hours = draw(st.sets(HOURS, min_size=1, max_size=3))
        minute_f, hour_f = field_text(minutes, range(60), None), field_text(hours, range(24), None)
    else:
        mstep = draw(st.sampled_from([None, 15, 30]))
        minutes = set(range(0, 60, mstep)) if mstep else draw(
            st.sets(st.sampled_from([0, 30, 45]), min_size=1, max_size=2))
        hstep = None if mstep else draw(st.sampled_from([1, 2, 3]))
        hours = set(range(0, 24, hstep)) if hstep else draw(
            st.sets(HOURS, min_size=1, max_size=4))
        minute_f = f"*/{mstep}" if mstep else field_text(minutes, range(60), None)
        hour_f = ("*" if hstep == 1 else f"*/{hstep}") if hstep else field_text(
            hours, range(24), None)
    dom = draw(st.sets(st.integers(1, 31), max_size=3))
    dow = draw(st.sets(st.one_of(st.just(0), st.integers(0, 6)), max_size=3))
    expr = " ".join([minute_f, hour_f, field_text(dom, range(1, 32), None) or "*", "*",
                     field_text(dow, range(7), None) or "*"])
    return expr, fixed, minutes, hours, dom, dow


def cron_day_matches(d: date, dom: set[int], dow: set[int]) -> bool:
    sunday_zero = (d.weekday() + 1) % 7
    dom_ok = not dom or d.day in dom
    dow_ok = not dow or sunday_zero in dow
    if not dom or not dow:  # a "*" field: both must match (Debian)
        return dom_ok and dow_ok
    return dom_ok or dow_ok


@SETTINGS
@given(data=st.data(), cron=crons(), tz_name=st.sampled_from(ZONES))
def test_every_cron_fire_follows_debian_cron_across_dst(data, cron, tz_name):
    expr, fixed, minutes, hours, dom, dow = cron
    tz = ZoneInfo(tz_name)
    span = 3
    start = data.draw(start_times(tz_name, span))
    end = start + timedelta(days=span)
    schedule = parse_cron(expr, tz_name, check_future=False)

    got = take_until(schedule.starts(start), end)

    wanted: set[datetime] = set()
    if fixed:  # each matching wall time once: first pass, or right after a gap
        d = (start - timedelta(days=2)).date()
        while d <= (end + timedelta(days=2)).date():
            if cron_day_matches(d, dom, dow):
                for h in hours:
                    for m in minutes:
                        at = oracle_instant(datetime.combine(d, time(h, m)), tz)
                        if start <= at < end:
                            wanted.add(at)
            d += timedelta(days=1)
    else:  # real time: every UTC minute whose wall time matches
        at = start.replace(second=0, microsecond=0)
        if at < start:
            at += timedelta(minutes=1)
        while at < end:
            w = at.astimezone(tz)
            if w.minute in minutes and w.hour in hours and cron_day_matches(w.date(), dom, dow):
                wanted.add(at)
            at += timedelta(minutes=1)
    assert got == sorted(wanted)
    assert_strictly_increasing_utc(got)


def test_the_transition_table_of_the_oracle_is_not_empty():
    # Guards the bias towards transitions: four DST changes a year except in the fixed zones.
    assert len(transitions("Europe/Berlin")) == 2 * 16
    assert len(transitions("Australia/Lord_Howe")) == 2 * 16
    assert transitions("Asia/Kolkata") == [] and transitions("UTC") == []
