"""Targeted DST cases: the spring-forward gap and the fall-back fold in Berlin, New York and
Lord Howe Island (a 30-minute shift), for RRULE windows, cron fires and wall-clock ends."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from itertools import takewhile
from zoneinfo import ZoneInfo

import pytest

from scheduler.calendar.cron import fires_between, next_fire, parse_cron
from scheduler.calendar.recurrence import localize, parse_rrule
from scheduler.calendar.windows import Window, upcoming

UTC = timezone.utc
BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
LORD_HOWE = ZoneInfo("Australia/Lord_Howe")


def local(at: datetime, tz: ZoneInfo) -> str:
    return at.astimezone(tz).strftime("%Y-%m-%d %H:%M %z")


def day_of(tz: ZoneInfo, y: int, m: int, d: int) -> tuple[datetime, datetime]:
    start = localize(datetime(y, m, d), tz)
    return start, localize(datetime(y, m, d) + timedelta(days=1), tz)


def test_the_zones_change_their_clocks_when_these_tests_assume():
    # Given the tzdata on this machine, the transitions the other tests are written for
    assert localize(datetime(2026, 3, 29, 1, 59), BERLIN).astimezone(BERLIN).utcoffset() \
        == timedelta(hours=1)
    assert localize(datetime(2026, 3, 29, 3, 0), BERLIN).astimezone(BERLIN).utcoffset() \
        == timedelta(hours=2)
    assert localize(datetime(2026, 10, 4, 1, 59), LORD_HOWE).astimezone(LORD_HOWE).utcoffset() \
        == timedelta(hours=10, minutes=30)
    assert localize(datetime(2026, 10, 4, 2, 30), LORD_HOWE).astimezone(LORD_HOWE).utcoffset() \
        == timedelta(hours=11)


# ------------------------------------------------------------------------- spring forward


def test_a_berlin_window_at_0230_on_the_spring_forward_day_opens_at_0300_cest():
    window = Window("nightly", tz="Europe/Berlin", rrule="FREQ=DAILY;BYHOUR=2;BYMINUTE=30",
                    duration=timedelta(hours=1))
    got = upcoming(window, datetime(2026, 3, 28, 12, tzinfo=UTC), 3)
    assert [local(o.start_utc, BERLIN) for o in got] == [
        "2026-03-29 03:00 +0200", "2026-03-30 02:30 +0200", "2026-03-31 02:30 +0200"]
    # A duration is elapsed time: still one hour after the shifted start.
    assert got[0].length == timedelta(hours=1)


def test_a_one_off_window_given_in_the_gap_starts_at_the_end_of_the_gap():
    window = Window("once", tz="Europe/Berlin", start=datetime(2026, 3, 29, 2, 30),
                    end=datetime(2026, 3, 29, 4, 0))
    (opening,) = upcoming(window, datetime(2026, 3, 1, tzinfo=UTC), 5)
    assert local(opening.start_utc, BERLIN) == "2026-03-29 03:00 +0200"
    assert local(opening.end_utc, BERLIN) == "2026-03-29 04:00 +0200"


def test_a_query_at_the_instant_the_gap_ends_still_finds_the_shifted_occurrence():
    schedule = parse_rrule("FREQ=DAILY;BYHOUR=2;BYMINUTE=30", "Europe/Berlin")
    gap_end = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 03:00 CEST
    assert next(schedule.starts(gap_end)) == gap_end


def test_several_rrule_times_inside_one_gap_give_one_occurrence():
    schedule = parse_rrule("FREQ=DAILY;BYHOUR=2,3;BYMINUTE=0,30", "Europe/Berlin")
    start, end = day_of(BERLIN, 2026, 3, 29)
    got = [local(at, BERLIN) for at in takewhile(lambda at: at < end, schedule.starts(start))]
    assert got == ["2026-03-29 03:00 +0200", "2026-03-29 03:30 +0200"]


def test_a_fixed_time_cron_in_the_skipped_hour_runs_right_after_the_gap_in_new_york():
    fire = next_fire("30 2 * * *", "America/New_York", datetime(2026, 3, 8, 5, tzinfo=UTC))
    assert fire is not None and local(fire, NEW_YORK) == "2026-03-08 03:00 -0400"


def test_a_real_time_cron_skips_the_hour_that_does_not_exist():
    start, end = day_of(NEW_YORK, 2026, 3, 8)
    fires = fires_between("30 * * * *", "America/New_York", start, end)
    walls = [at.astimezone(NEW_YORK).strftime("%H:%M") for at in fires]
    assert "02:30" not in walls and len(fires) == 23


def test_lord_howe_springs_forward_half_an_hour_so_0210_becomes_0230():
    fire = next_fire("10 2 * * *", "Australia/Lord_Howe", datetime(2026, 10, 3, tzinfo=UTC))
    assert fire is not None and local(fire, LORD_HOWE) == "2026-10-04 02:30 +1100"
    window = Window("lh", tz="Australia/Lord_Howe", rrule="FREQ=DAILY;BYHOUR=2;BYMINUTE=0",
                    end_time="03:00")
    opening = upcoming(window, datetime(2026, 10, 3, 12, tzinfo=UTC), 1)[0]
    assert local(opening.start_utc, LORD_HOWE) == "2026-10-04 02:30 +1100"
    assert opening.length == timedelta(minutes=30)


def test_a_cron_window_whose_whole_opening_the_gap_swallows_has_no_opening_that_day():
    # 02:30-03:00 does not exist in Berlin on 2026-03-29: start and end are both 03:00 CEST.
    window = Window("short", tz="Europe/Berlin", cron="30 2 * * *", end_time="03:00")
    got = upcoming(window, datetime(2026, 3, 28, 12, tzinfo=UTC), 2)
    assert [local(o.start_utc, BERLIN) for o in got] == [
        "2026-03-30 02:30 +0200", "2026-03-31 02:30 +0200"]


# ------------------------------------------------------------------------------ fall back


def test_a_daily_0230_cron_fires_once_on_the_berlin_fall_back_night():
    start, end = day_of(BERLIN, 2026, 10, 25)
    fires = fires_between("30 2 * * *", "Europe/Berlin", start, end)
    assert [local(at, BERLIN) for at in fires] == ["2026-10-25 02:30 +0200"]


def test_a_fixed_time_cron_asked_during_the_second_pass_does_not_fire_again():
    second_pass = datetime(2026, 10, 25, 1, 10, tzinfo=UTC)  # 02:10 CET
    fire = next_fire("30 2 * * *", "Europe/Berlin", second_pass)
    assert fire is not None and local(fire, BERLIN) == "2026-10-26 02:30 +0100"


def test_a_real_time_cron_fires_in_both_passes_of_the_repeated_hour():
    start, end = day_of(BERLIN, 2026, 10, 25)
    fires = fires_between("*/30 2 * * *", "Europe/Berlin", start, end)
    assert [local(at, BERLIN) for at in fires] == [
        "2026-10-25 02:00 +0200", "2026-10-25 02:30 +0200",
        "2026-10-25 02:00 +0100", "2026-10-25 02:30 +0100"]


def test_new_york_fall_back_runs_a_0130_job_once_at_the_first_pass():
    start, end = day_of(NEW_YORK, 2026, 11, 1)
    fires = fires_between("30 1 * * *", "America/New_York", start, end)
    assert [local(at, NEW_YORK) for at in fires] == ["2026-11-01 01:30 -0400"]
    assert len(fires_between("0 * * * *", "America/New_York", start, end)) == 25


def test_lord_howe_repeats_0130_to_0200_in_autumn():
    start, end = day_of(LORD_HOWE, 2026, 4, 5)
    once = fires_between("45 1 * * *", "Australia/Lord_Howe", start, end)
    assert [local(at, LORD_HOWE) for at in once] == ["2026-04-05 01:45 +1100"]
    twice = fires_between("*/15 1 * * *", "Australia/Lord_Howe", start, end)
    assert [local(at, LORD_HOWE) for at in twice] == [
        "2026-04-05 01:00 +1100", "2026-04-05 01:15 +1100", "2026-04-05 01:30 +1100",
        "2026-04-05 01:45 +1100", "2026-04-05 01:30 +1030", "2026-04-05 01:45 +1030"]


def test_a_wall_clock_end_in_the_repeated_hour_is_its_first_pass():
    window = Window("fold", tz="Europe/Berlin", rrule="FREQ=DAILY;BYHOUR=1;BYMINUTE=0",
                    end_time="02:30")
    opening = upcoming(window, datetime(2026, 10, 24, 12, tzinfo=UTC), 1)[0]
    assert local(opening.start_utc, BERLIN) == "2026-10-25 01:00 +0200"
    assert local(opening.end_utc, BERLIN) == "2026-10-25 02:30 +0200"
    assert opening.length == timedelta(hours=1, minutes=30)


def test_a_wall_clock_end_after_a_start_in_the_second_pass_is_the_second_pass():
    window = Window("late", tz="Europe/Berlin", cron="15 * * * *", end_time="02:45")
    second = datetime(2026, 10, 25, 1, 15, tzinfo=UTC)  # 02:15 CET
    opening = next(o for o in upcoming(window, second - timedelta(minutes=1), 3)
                   if o.start_utc == second)
    assert local(opening.end_utc, BERLIN) == "2026-10-25 02:45 +0100"


def test_a_duration_across_the_fall_back_is_elapsed_time_not_wall_time():
    window = Window("long", tz="Europe/Berlin", rrule="FREQ=DAILY;BYHOUR=1;BYMINUTE=0",
                    duration=timedelta(hours=3))
    opening = upcoming(window, datetime(2026, 10, 24, 12, tzinfo=UTC), 1)[0]
    assert local(opening.end_utc, BERLIN) == "2026-10-25 03:00 +0100"  # 3 h, wall shows 2 h


@pytest.mark.parametrize("tz_name", ["Asia/Kolkata", "UTC"])
def test_zones_without_dst_fire_every_day_at_the_same_wall_time(tz_name):
    tz = ZoneInfo(tz_name)
    fires = fires_between("30 2 * * *", tz_name, datetime(2026, 1, 1, tzinfo=UTC),
                          datetime(2027, 1, 1, tzinfo=UTC))
    assert len(fires) == 365
    assert {at.astimezone(tz).strftime("%H:%M") for at in fires} == {"02:30"}
    assert parse_cron("30 2 * * *", tz_name).fixed_time
