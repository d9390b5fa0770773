"""``RRuleSchedule.clock_times()``: the wall-clock times a rule's starts can have, read from the
rule's text and anchor (no dateutil internals). A window refuses an end time equal to one of
them (an opening needs a length). Checked against the starts the rule actually produces."""

from __future__ import annotations

from datetime import datetime, timezone
from zoneinfo import ZoneInfo

import pytest

from scheduler.calendar.recurrence import parse_rrule, wall
from scheduler.calendar.windows import Window
from scheduler.errors import ValidationError

RULES = [
    ("FREQ=DAILY;BYHOUR=9,17;BYMINUTE=0,30", None),
    ("FREQ=WEEKLY;BYDAY=SA;BYHOUR=2", None),
    ("FREQ=DAILY", datetime(2024, 3, 1, 22, 5, 7)),
    ("FREQ=MONTHLY;BYMONTHDAY=1,15;BYSECOND=30", datetime(2024, 1, 1, 4, 45)),
    ("FREQ=HOURLY;INTERVAL=6", datetime(2024, 1, 1, 1, 15)),
    ("FREQ=HOURLY;INTERVAL=5;BYMINUTE=10", datetime(2024, 1, 1, 0, 0)),
    ("FREQ=HOURLY;BYDAY=MO,TU", datetime(2024, 1, 1, 3, 20)),
]


@pytest.mark.parametrize(("rule", "anchor"), RULES)
def test_clock_times_are_exactly_the_wall_times_the_rule_starts_at(
        rule: str, anchor: datetime | None) -> None:
    # Given a rule in a zone without DST (so wall times are never shifted)
    schedule = parse_rrule(rule, "Asia/Tokyo", anchor=anchor, check_future=False)
    hours, minutes, seconds = schedule.clock_times()
    # When its starts over two months are read back as wall times
    tz = ZoneInfo("Asia/Tokyo")
    seen = set()
    starts = schedule.starts(datetime(2024, 3, 1, tzinfo=timezone.utc))
    for start in starts:
        if start > datetime(2024, 5, 1, tzinfo=timezone.utc):
            break
        local = wall(start, tz)
        seen.add((local.hour, local.minute, local.second))
    # Then every start is one of the clock times, and every clock time occurs
    assert seen == {(h, m, s) for h in hours for m in minutes for s in seconds}


def test_an_hourly_window_may_end_between_its_starts_but_not_on_one() -> None:
    # Given starts every 6 hours from midnight (00, 06, 12, 18)
    anchor = datetime(2024, 1, 1, 0, 0)
    # Then an end time between two starts is accepted
    Window("quarter", rrule="FREQ=HOURLY;INTERVAL=6", start=anchor, end_time="03:00")
    # And an end time on a start is refused in one line
    with pytest.raises(ValidationError, match="end time 12:00:00 equals a start time"):
        Window("quarter", rrule="FREQ=HOURLY;INTERVAL=6", start=anchor, end_time="12:00")
