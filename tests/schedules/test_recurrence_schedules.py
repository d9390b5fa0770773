"""Cron schedules: next fire, fires in a range, English, and catch-up after downtime."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.calendar.catchup import Policy, catch_up
from scheduler.calendar.cron import explain_cron, fires_between, next_fire, parse_cron

UTC = timezone.utc
T0 = datetime(2026, 5, 4, tzinfo=UTC)  # a Monday


def hours(*hs: float) -> tuple[datetime, ...]:
    return tuple(T0 + timedelta(hours=h) for h in hs)


# ------------------------------------------------------------------------ fires, English


def test_next_fire_is_strictly_after_the_given_instant():
    assert next_fire("0 * * * *", "UTC", T0) == T0 + timedelta(hours=1)
    assert next_fire("0 * * * *", "UTC", T0 - timedelta(microseconds=1)) == T0


def test_fires_between_is_half_open_and_ordered():
    fires = fires_between("0 */6 * * *", "UTC", T0, T0 + timedelta(days=1))
    assert tuple(fires) == hours(0, 6, 12, 18)


def test_a_schedule_in_a_zone_fires_at_local_wall_time():
    fire = next_fire("0 9 * * MON-FRI", "Asia/Kolkata", T0)
    assert fire == datetime(2026, 5, 4, 3, 30, tzinfo=UTC)


@pytest.mark.parametrize(("macro", "fields"), [
    ("@daily", "0 0 * * *"), ("@hourly", "0 * * * *"), ("@weekly", "0 0 * * 0"),
    ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"), ("@ANNUALLY", "0 0 1 1 *"),
])
def test_macros_mean_their_five_fields(macro, fields):
    assert parse_cron(macro, "UTC").fields == fields
    assert fires_between(macro, "UTC", T0, T0 + timedelta(days=400)) == fires_between(
        fields, "UTC", T0, T0 + timedelta(days=400))


@pytest.mark.parametrize(("expr", "english"), [
    ("30 2 * * *", "At 02:30 every day"),
    ("0 0 * * MON-FRI", "At 00:00 on Monday through Friday"),
    ("*/15 * * * *", "Every 15th minute of every hour"),
    ("@daily", "At 00:00 every day"),
])
def test_explain_cron_says_it_in_short_english(expr, english):
    assert explain_cron(expr) == english
    assert parse_cron(expr, "Europe/Berlin").explain() == english


def test_a_fixed_time_expression_is_told_apart_from_a_real_time_one():
    assert parse_cron("30 2 * * *", "UTC").fixed_time
    assert parse_cron("0,30 1-3 * * *", "UTC").fixed_time
    assert not parse_cron("*/15 2 * * *", "UTC").fixed_time
    assert not parse_cron("30 * * * *", "UTC").fixed_time


# ------------------------------------------------------------------------------ catch-up


HOURLY = parse_cron("0 * * * *", "UTC")


def test_skip_runs_nothing_late_and_reports_every_late_fire_as_missed():
    # Given an hourly schedule last fired at T0, and workers back at 05:00:30
    result = catch_up(HOURLY, T0, T0 + timedelta(hours=5, seconds=30), Policy.SKIP)
    # Then the 05:00 fire is on time (within the grace) and runs; 01:00-04:00 are missed
    assert result.run == hours(5)
    assert result.missed == hours(1, 2, 3, 4)
    assert result.unlisted is None and result.next_fire == T0 + timedelta(hours=6)


def test_skip_with_nothing_on_time_runs_nothing():
    result = catch_up(HOURLY, T0, T0 + timedelta(hours=5, minutes=10), "skip")
    assert result.run == () and result.missed == hours(1, 2, 3, 4, 5)


def test_latest_runs_the_newest_late_fire_inside_the_window_and_misses_the_rest():
    now = T0 + timedelta(hours=5, minutes=10)
    result = catch_up(HOURLY, T0, now, "latest", window=timedelta(hours=1))
    assert result.run == hours(5) and result.missed == hours(1, 2, 3, 4)
    too_old = catch_up(HOURLY, T0, now, "latest", window=timedelta(minutes=5))
    assert too_old.run == () and too_old.missed == hours(1, 2, 3, 4, 5)


def test_latest_prefers_the_on_time_fire():
    result = catch_up(HOURLY, T0, T0 + timedelta(hours=3), "latest")
    assert result.run == hours(3) and result.missed == hours(1, 2)


def test_all_runs_each_late_fire_inside_the_window_and_misses_the_older_ones():
    now = T0 + timedelta(hours=5, minutes=10)
    result = catch_up(HOURLY, T0, now, "all", window=timedelta(hours=2, minutes=30))
    assert result.run == hours(3, 4, 5) and result.missed == hours(1, 2)
    unlimited = catch_up(HOURLY, T0, now, "all")
    assert unlimited.run == hours(1, 2, 3, 4, 5) and unlimited.missed == ()


def test_no_downtime_means_nothing_to_run_or_miss():
    result = catch_up(HOURLY, T0, T0 + timedelta(minutes=59), "all")
    assert result.run == () and result.missed == () and result.next_fire == hours(1)[0]


def test_a_long_outage_lists_the_newest_fires_and_reports_the_older_ones_as_a_range():
    # Given a per-minute schedule down for a year
    every_minute = parse_cron("* * * * *", "UTC")
    now = T0 + timedelta(days=365)
    result = catch_up(every_minute, T0, now, "all", window=timedelta(minutes=30), limit=100)
    # Then 100 are listed (30 run, the rest missed) and the older ones are a range
    assert len(result.run) == 31 and len(result.missed) == 69  # 30 late + the on-time one
    assert result.unlisted == (T0, now - timedelta(minutes=99))
    assert result.missed[0] == result.unlisted[1]


@settings(max_examples=100, deadline=None)
@given(expr=st.sampled_from(["*/7 * * * *", "30 2 * * *", "0,30 1-3 * * *", "15 */2 * * *",
                             "0 0 * * SUN", "*/20 1 * * *"]),
       tz=st.sampled_from(["Europe/Berlin", "Australia/Lord_Howe", "America/New_York", "UTC"]),
       last_min=st.integers(0, 6 * 366 * 24 * 60), down_min=st.integers(0, 4 * 24 * 60),
       policy=st.sampled_from(list(Policy)), window_min=st.none() | st.integers(0, 600),
       limit=st.integers(1, 50))
def test_every_fire_during_an_outage_is_run_missed_or_in_the_unlisted_range(
        expr, tz, last_min, down_min, policy, window_min, limit):
    schedule = parse_cron(expr, tz, check_future=False)
    last = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(minutes=last_min)
    now = last + timedelta(minutes=down_min, seconds=17)
    window = None if window_min is None else timedelta(minutes=window_min)
    result = catch_up(schedule, last, now, policy, window=window, limit=limit)
    due = fires_between(schedule, tz, last + timedelta(microseconds=1),
                        now + timedelta(microseconds=1))
    listed = sorted(result.run + result.missed)
    assert len(set(listed)) == len(listed)  # nothing both run and missed
    if result.unlisted is None:
        assert listed == due
    else:
        assert len(listed) == limit and listed == due[-limit:]
        assert result.unlisted == (last, listed[0])
    assert list(result.run) == sorted(result.run)
    if policy is Policy.SKIP:
        assert all(now - at <= timedelta(minutes=1) for at in result.run)
    if policy is Policy.LATEST:
        assert len(result.run) <= 1 and all(at == due[-1] for at in result.run)
    for at in result.run:
        assert now - at <= timedelta(minutes=1) or window is None or now - at <= window
    assert result.next_fire == next_fire(schedule, tz, now)
