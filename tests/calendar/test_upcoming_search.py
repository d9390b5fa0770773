"""``upcoming``: the next openings of a window, searched over a span that grows until it holds
them, give what a search over the whole ten-year horizon gives; an opening that never closes
(an hourly window two hours long) is shown cut about a month ahead instead of after merging ten
years of openings (the web console's window pages and `windows list` took seconds on one)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scheduler.calendar.windows import CONTINUOUS_SHOWN, Window, openings, upcoming

AT = datetime(2026, 11, 28, 1, 30, tzinfo=UTC)


@pytest.mark.parametrize("window", [
    Window("nightly", tz="Europe/Berlin", cron="0 2 * * *", duration=timedelta(hours=2)),
    Window("weekly", tz="America/New_York", rrule="FREQ=WEEKLY;BYDAY=TU;BYHOUR=22",
           duration=timedelta(hours=3)),
    Window("yearly", tz="UTC", rrule="FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=29;BYHOUR=1",
           duration=timedelta(hours=1)),
    Window("once", tz="UTC", start=datetime(2029, 5, 1, 8), end=datetime(2029, 7, 1, 8)),
    Window("straddling", tz="UTC", cron="0 0 1 * *", duration=timedelta(days=20)),
    Window("in-progress", tz="UTC", cron="0 1 * * *", duration=timedelta(hours=3)),
], ids=lambda w: w.name)
def test_the_next_openings_are_those_of_the_whole_horizon(window: Window) -> None:
    whole = openings(window, AT, AT.replace(year=AT.year + 10, day=1))
    for count in (1, 3, 5):
        assert upcoming(window, AT, count) == whole[:count]


def test_an_opening_that_never_closes_is_shown_at_once_cut_a_month_ahead() -> None:
    window = Window("always", tz="UTC", cron="0 * * * *", duration=timedelta(hours=2))
    (opening,) = upcoming(window, AT, 5)
    # One opening, begun with the two-hour opening still running at 01:30, shown ending
    # between one and five months ahead (the whole horizon would end it ten years ahead,
    # after merging 87,600 openings)
    assert opening.start_utc == datetime(2026, 11, 28, 0, 0, tzinfo=UTC)
    assert CONTINUOUS_SHOWN <= opening.end_utc - AT <= 5 * CONTINUOUS_SHOWN
