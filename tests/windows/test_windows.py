"""Service windows: approval, freezes, the expected-duration cutoff, assignment precedence."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from scheduler.calendar.windows import (
    Assignment,
    Opening,
    Window,
    effective_window,
    is_open,
    next_opening,
    openings,
    upcoming,
)

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
# Saturday nights 22:00-02:00 Berlin time, approved by the customer.
SATURDAY = Window("sat-night", tz="Europe/Berlin", rrule="FREQ=WEEKLY;BYDAY=SA;BYHOUR=22;BYMINUTE=0",
                  end_time="02:00")
MON = datetime(2026, 6, 1, 9, tzinfo=UTC)  # Monday 2026-06-01 11:00 CEST
SAT_OPEN = datetime(2026, 6, 6, 20, tzinfo=UTC)  # 22:00 CEST
SAT_CLOSE = datetime(2026, 6, 7, 0, tzinfo=UTC)  # 02:00 CEST
WEEK = timedelta(days=7)


def test_a_job_due_outside_its_window_gets_the_next_opening():
    assert next_opening([SATURDAY], MON) == Opening(SAT_OPEN, SAT_CLOSE, "Europe/Berlin",
                                                    "sat-night")


def test_a_job_inside_its_window_may_start_now_and_must_end_by_the_close():
    at = SAT_OPEN + timedelta(hours=1)
    found = next_opening([SATURDAY], at, timedelta(hours=2))
    assert found is not None and (found.start_utc, found.end_utc) == (at, SAT_CLOSE)
    assert is_open([SATURDAY], at)


def test_a_job_that_cannot_finish_before_the_window_ends_waits_for_the_next_opening():
    # Given 90 minutes left in tonight's window and a job expected to take two hours
    at = SAT_CLOSE - timedelta(minutes=90)
    found = next_opening([SATURDAY], at, timedelta(hours=2))
    # Then it is deferred to next Saturday's opening
    assert found is not None and found.start_utc == SAT_OPEN + WEEK
    # and a job that fits exactly may still start
    assert next_opening([SATURDAY], at, timedelta(minutes=90)).start_utc == at  # type: ignore[union-attr]


def test_a_job_longer_than_any_opening_never_gets_one():
    assert next_opening([SATURDAY], MON, timedelta(hours=5)) is None


def test_the_window_is_closed_at_its_end_instant_and_open_at_its_start():
    assert is_open([SATURDAY], SAT_OPEN)
    assert not is_open([SATURDAY], SAT_CLOSE)
    assert not is_open([SATURDAY], SAT_OPEN - timedelta(microseconds=1))


def test_an_unapproved_window_is_never_used():
    pending = Window("weekday", tz="Europe/Berlin", rrule="FREQ=DAILY;BYHOUR=12;BYMINUTE=0",
                     duration=timedelta(hours=1), approved=False)
    assert next_opening([pending], MON) is None
    assert not is_open([pending], MON + timedelta(hours=1, minutes=30))
    # With an approved one beside it, only the approved one counts
    assert next_opening([pending, SATURDAY], MON).start_utc == SAT_OPEN  # type: ignore[union-attr]
    # Listing its openings for the operator still works
    assert upcoming(pending, MON, 1)[0].start_local == datetime(2026, 6, 1, 12, tzinfo=BERLIN)


def test_a_freeze_covering_an_opening_pushes_the_job_to_the_next_one():
    freeze = Window("june-freeze", start=datetime(2026, 6, 5, tzinfo=UTC),
                    end=datetime(2026, 6, 8, tzinfo=UTC), freeze=True)
    found = next_opening([SATURDAY], MON, timedelta(minutes=30), freezes=[freeze])
    assert found is not None and found.start_utc == SAT_OPEN + WEEK
    assert not is_open([SATURDAY], SAT_OPEN, freezes=[freeze])


def test_the_free_part_of_a_partly_frozen_opening_is_used_if_the_job_fits():
    # Given a freeze from 23:00 to 01:00 inside the 22:00-02:00 opening
    freeze = Window("maint", start=SAT_OPEN + timedelta(hours=1),
                    end=SAT_OPEN + timedelta(hours=3), freeze=True)
    # A 45-minute job runs from 22:00 and must end by 23:00
    early = next_opening([SATURDAY], MON, timedelta(minutes=45), freezes=[freeze])
    assert early == Opening(SAT_OPEN, SAT_OPEN + timedelta(hours=1), "Europe/Berlin", "sat-night")
    # A 61-minute job fits neither free hour: next week
    late = next_opening([SATURDAY], MON, timedelta(minutes=61), freezes=[freeze])
    assert late is not None and late.start_utc == SAT_OPEN + WEEK
    # Asked at 23:30 (frozen), a short job starts at 01:00 when the freeze ends
    mid = next_opening([SATURDAY], SAT_OPEN + timedelta(minutes=90), timedelta(minutes=30),
                       freezes=[freeze])
    assert mid is not None and (mid.start_utc, mid.end_utc) == (SAT_OPEN + timedelta(hours=3),
                                                                SAT_CLOSE)


def test_a_recurring_freeze_applies_even_when_not_approved():
    year_end = Window("year-end", tz="Europe/Berlin", rrule="FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=20",
                      duration=timedelta(days=14), freeze=True, approved=False)
    before = datetime(2026, 12, 19, 22, tzinfo=UTC)  # one hour before the freeze
    assert next_opening(None, before, timedelta(hours=1), freezes=[year_end]).start_utc == before  # type: ignore[union-attr]
    assert next_opening(None, before, timedelta(hours=2), freezes=[year_end]).start_local \
        == datetime(2027, 1, 3, tzinfo=BERLIN)  # type: ignore[union-attr]
    found = next_opening(None, datetime(2026, 12, 21, tzinfo=UTC), timedelta(hours=1),
                         freezes=[year_end])
    assert found is not None
    assert found.start_local == datetime(2027, 1, 3, tzinfo=BERLIN)


def test_without_a_window_requirement_only_freezes_restrict():
    freeze = Window("f", start=MON, end=MON + timedelta(hours=2), freeze=True)
    assert next_opening(None, MON - timedelta(hours=1)).start_utc == MON - timedelta(hours=1)  # type: ignore[union-attr]
    assert next_opening(None, MON, freezes=[freeze]).start_utc == MON + timedelta(hours=2)  # type: ignore[union-attr]
    assert is_open(None, MON - timedelta(hours=1), freezes=[freeze])
    assert not is_open(None, MON, freezes=[freeze])
    # An empty list of windows means the host has none: never open
    assert next_opening([], MON) is None


def test_a_freeze_passed_as_a_window_is_a_programming_error():
    freeze = Window("f", start=MON, end=MON + timedelta(hours=2), freeze=True)
    with pytest.raises(ValueError, match="freeze period"):
        next_opening([freeze], MON)


def test_two_windows_of_a_host_join_where_they_touch():
    evening = Window("evening", rrule="FREQ=DAILY;BYHOUR=18;BYMINUTE=0", end_time="20:00")
    night = Window("night", rrule="FREQ=DAILY;BYHOUR=20;BYMINUTE=0", end_time="23:00")
    found = next_opening([evening, night], MON, timedelta(hours=4))
    assert found is not None
    assert (found.start_utc, found.end_utc) == (datetime(2026, 6, 1, 18, tzinfo=UTC),
                                                datetime(2026, 6, 1, 23, tzinfo=UTC))


def test_overlapping_openings_of_one_window_are_listed_as_one():
    # Every 6 hours for 8 hours: always open
    always = Window("always", rrule="FREQ=HOURLY;INTERVAL=6;BYMINUTE=0",
                    start=datetime(2026, 1, 1), duration=timedelta(hours=8))
    got = openings(always, MON, MON + timedelta(days=2))
    assert len(got) == 1 and got[0].start_utc <= MON and got[0].end_utc >= MON + timedelta(days=2)


def test_upcoming_lists_openings_in_the_window_zone_and_in_utc():
    got = upcoming(SATURDAY, MON, 3)
    assert [o.start_local.strftime("%a %H:%M %Z") for o in got] == ["Sat 22:00 CEST"] * 3
    assert [o.start_utc.strftime("%d %H:%M") for o in got] == ["06 20:00", "13 20:00", "20 20:00"]
    assert [o.end_local.strftime("%a %H:%M") for o in got] == ["Sun 02:00"] * 3
    # An opening in progress comes first
    assert upcoming(SATURDAY, SAT_OPEN + timedelta(minutes=5), 1)[0].start_utc == SAT_OPEN


def test_a_one_off_window_opens_once():
    once = Window("upgrade", tz="Europe/Berlin", start=datetime(2026, 6, 3, 1),
                  duration=timedelta(hours=3))
    assert upcoming(once, MON, 5) == [Opening(datetime(2026, 6, 2, 23, tzinfo=UTC),
                                              datetime(2026, 6, 3, 2, tzinfo=UTC),
                                              "Europe/Berlin", "upgrade")]
    assert next_opening([once], datetime(2026, 6, 3, 2, tzinfo=UTC)) is None


def test_a_cron_window_opens_at_its_fires_and_respects_its_start_and_end():
    window = Window("cronwin", cron="0 3 * * *", duration=timedelta(hours=1),
                    start=datetime(2026, 6, 3, tzinfo=UTC), end=datetime(2026, 6, 5, 3, tzinfo=UTC))
    got = upcoming(window, MON, 10)
    assert [o.start_utc.day for o in got] == [3, 4, 5]


def test_the_search_gives_up_at_the_horizon():
    yearly = Window("yearly", rrule="FREQ=YEARLY;BYMONTH=1;BYMONTHDAY=1",
                    duration=timedelta(hours=1))
    assert next_opening([yearly], MON, horizon=timedelta(days=100)) is None
    assert next_opening([yearly], MON).start_utc == datetime(2027, 1, 1, tzinfo=UTC)  # type: ignore[union-attr]


# ------------------------------------------------------------------------- assignments


def w(name: str, freeze: bool = False) -> Window:
    return Window(name, rrule="FREQ=DAILY", duration=timedelta(hours=1), freeze=freeze)


def test_a_host_assignment_wins_over_its_groups():
    result = effective_window("web1", {"all": 0, "web": 1}, [
        Assignment(w("g"), group="web"), Assignment(w("h"), host="web1"),
        Assignment(w("other"), host="web2")])
    assert [x.name for x in result.windows] == ["h"] and result.source == "host"


def test_the_deepest_group_wins_then_the_first_name():
    groups = {"all": 0, "europe": 1, "berlin": 2, "acme": 2}
    assignments = [Assignment(w("eu"), group="europe"), Assignment(w("ber"), group="berlin"),
                   Assignment(w("acm"), group="acme"), Assignment(w("fleet"))]
    result = effective_window("h1", groups, assignments)
    assert result.source == "group:acme" and [x.name for x in result.windows] == ["acm"]
    assert effective_window("h1", {"europe": 1}, assignments).source == "group:europe"
    assert effective_window("h1", {"other": 3}, assignments).source == "fleet"
    none = effective_window("h1", {}, [Assignment(w("x"), host="h2")])
    assert none.windows == () and none.source == "none"


def test_all_windows_of_the_winning_source_apply_and_freezes_add_up_from_everywhere():
    groups = {"all": 0, "web": 1}
    result = effective_window("web1", groups, [
        Assignment(w("tue"), host="web1"), Assignment(w("sat"), host="web1"),
        Assignment(w("grp"), group="web"),
        Assignment(w("year-end", freeze=True)),  # fleet-wide
        Assignment(w("web-freeze", freeze=True), group="web"),
        Assignment(w("host-freeze", freeze=True), host="web1"),
        Assignment(w("not-mine", freeze=True), host="db1")])
    assert [x.name for x in result.windows] == ["sat", "tue"]
    assert [x.name for x in result.freezes] == ["host-freeze", "web-freeze", "year-end"]


def test_an_assignment_to_both_a_host_and_a_group_is_a_programming_error():
    with pytest.raises(ValueError):
        effective_window("h", {"g": 1}, [Assignment(w("x"), host="h", group="g")])
