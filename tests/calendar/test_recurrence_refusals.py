"""Bad input to the calendar core: each refusal is one ValidationError line naming the problem."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from scheduler.calendar.cron import explain_cron, parse_cron
from scheduler.calendar.recurrence import parse_rrule, zone
from scheduler.calendar.windows import Window
from scheduler.errors import ValidationError

UTC = timezone.utc
NOW = datetime(2026, 6, 1, tzinfo=UTC)


def refusal(call) -> str:
    with pytest.raises(ValidationError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and "Traceback" not in message
    assert caught.value.exit_code == 2
    return message


@pytest.mark.parametrize(("expr", "names"), [
    ("61 * * * *", "bad minute field '61'"),
    ("* 24 * * *", "bad hour field '24'"),
    ("0 0 0 * *", "bad day-of-month field '0'"),
    ("0 0 * 13 *", "bad month field '13'"),
    ("0 0 * * 8", "bad day-of-week field '8'"),
    ("0 0 * * MOO", "bad day-of-week field 'MOO'"),
    ("*/0 * * * *", "bad minute field '*/0'"),
    ("5-1 * * * *", "bad minute field '5-1'"),
    ("* * * *", "expected 5 fields"),
    ("0 * * * * *", "got 6"),
    ("", "got 0"),
    ("@reboot", "unknown macro @reboot"),
    ("0 0 30 2 *", "never falls in month '2'"),
    ("0 0 31 4,6 *", "never falls in month '4,6'"),
])
def test_an_invalid_cron_expression_is_refused_in_one_line_naming_the_field(expr, names):
    message = refusal(lambda: parse_cron(expr, "UTC", now=NOW))
    assert names in message and message.startswith("invalid cron expression")
    assert names in refusal(lambda: explain_cron(expr))


@pytest.mark.parametrize(("rule", "names"), [
    ("garbage", "is not NAME=VALUE"),
    ("", "empty rule"),
    ("FREQ=SOMETIMES", "FREQ must be one of"),
    ("FREQ=MINUTELY", "FREQ must be one of"),
    ("FREQ=DAILY;BYHOUR=25", "hour must be in 0..23"),
    ("FREQ=DAILY;BYDAY=XX", "BYDAY"),
    ("FREQ=DAILY;INTERVAL=0", "INTERVAL must be a whole number"),
    ("FREQ=DAILY;INTERVAL=-1", "INTERVAL must be a whole number"),
    ("FREQ=DAILY;COUNT=x", "COUNT must be a whole number"),
    ("FREQ=DAILY;FOO=1", "unknown or unsupported part FOO"),
    ("FREQ=DAILY;FREQ=WEEKLY", "FREQ is given twice"),
    ("FREQ=DAILY;BYHOUR=", "is not NAME=VALUE"),
    ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=0", "bysetpos"),
    ("FREQ=DAILY;BYSETPOS=2", "BYSETPOS needs FREQ=YEARLY or MONTHLY"),
    ("FREQ=DAILY;BYYEARDAY=366", "BYYEARDAY needs FREQ=YEARLY"),
    ("FREQ=WEEKLY;BYWEEKNO=1;BYDAY=MO", "BYWEEKNO needs FREQ=YEARLY"),
    ("FREQ=MONTHLY;BYDAY=MO;BYSETPOS=6", "no occurrence in the next 10 years"),
    ("FREQ=DAILY;UNTIL=soon", "until"),
    ("FREQ=DAILY;UNTIL=20300101T000000ZZ", "UNTIL"),
    ("DTSTART:20260101T020000\nRRULE:FREQ=DAILY", "one RRULE line only"),
    ("FREQ=YEARLY;BYMONTH=2;BYMONTHDAY=30", "never occurs"),
    ("FREQ=YEARLY;BYMONTH=4;BYMONTHDAY=31", "never occurs"),
    ("FREQ=WEEKLY", "needs BYDAY"),
    ("FREQ=DAILY;INTERVAL=2", "INTERVAL > 1 counts from an anchor"),
    ("FREQ=DAILY;UNTIL=20200101", "no occurrence in the next 10 years"),
    ("FREQ=DAILY;COUNT=3", "no occurrence in the next 10 years"),  # all three in 2000
])
def test_an_invalid_rrule_is_refused_in_one_line(rule, names):
    message = refusal(lambda: parse_rrule(rule, "UTC", now=NOW))
    assert names.lower() in message.lower()


def test_a_rule_that_can_occur_but_not_before_the_horizon_is_refused():
    message = refusal(lambda: parse_rrule("FREQ=YEARLY;BYMONTH=1;BYMONTHDAY=1", "UTC",
                                          anchor=datetime(2040, 1, 1), now=NOW))
    assert "no occurrence in the next 10 years" in message


@pytest.mark.parametrize("name", ["Mars/Olympus_Mons", "", " UTC", "../etc/passwd",
                                  "Europe/Berlin\n"])
def test_an_unknown_zone_is_refused_in_one_line(name):
    assert "zone" in refusal(lambda: zone(name))
    assert "zone" in refusal(lambda: parse_cron("0 0 * * *", name))


@pytest.mark.parametrize(("kwargs", "names"), [
    ({"rrule": "FREQ=DAILY", "duration": timedelta(0)}, "must be positive"),
    ({"rrule": "FREQ=DAILY", "duration": timedelta(minutes=-5)}, "must be positive"),
    ({"start": datetime(2026, 7, 2), "end": datetime(2026, 7, 1)}, "is not after start"),
    ({"start": datetime(2026, 7, 1), "end": datetime(2026, 7, 1)}, "is not after start"),
    ({"rrule": "FREQ=DAILY;BYHOUR=2;BYMINUTE=0", "end_time": "02:00"}, "equals a start time"),
    ({"cron": "0 2,4 * * *", "end_time": "04:00"}, "equals a start time"),
    ({"rrule": "FREQ=DAILY", "end_time": "25:00"}, "is not HH:MM"),
    ({"rrule": "FREQ=DAILY", "end_time": "noon"}, "is not HH:MM"),
    ({"rrule": "FREQ=DAILY"}, "needs a duration or an end time"),
    ({"rrule": "FREQ=DAILY", "duration": timedelta(hours=1), "end_time": "03:00"},
     "needs a duration or an end time"),
    ({"rrule": "FREQ=DAILY", "cron": "0 0 * * *", "duration": timedelta(hours=1)}, "not both"),
    ({}, "needs an RRULE, a cron expression, or a start"),
    ({"start": datetime(2026, 7, 1)}, "needs an end or a duration"),
    ({"cron": "61 0 * * *", "duration": timedelta(hours=1)}, "bad minute field"),
    ({"rrule": "FREQ=DAILY;BYHOUR=2", "duration": timedelta(hours=1), "tz": "Nowhere/Land"},
     "unknown time zone"),
    ({"rrule": "FREQ=DAILY", "duration": timedelta(hours=1), "start": datetime(2027, 1, 1),
      "end": datetime(2026, 1, 1)}, "is before start"),
])
def test_a_malformed_window_is_refused_in_one_line(kwargs, names):
    assert names in refusal(lambda: Window("w1", **kwargs))


@pytest.mark.parametrize("name", ["", "two words", "tab\there", "x" * 256])
def test_a_window_name_must_be_printable_without_spaces(name):
    assert "window name" in refusal(lambda: Window(name, rrule="FREQ=DAILY",
                                                   duration=timedelta(hours=1)))


def test_a_stored_window_whose_rule_has_ended_loads_but_is_refused_as_new():
    # Given a rule that ended in 2021: reading it back from SQL must not fail
    window = Window("old", rrule="FREQ=DAILY;UNTIL=20210101", duration=timedelta(hours=1),
                    start=datetime(2020, 1, 1))
    # When an operator tries to create it now, it is refused
    assert "no opening in the next 10 years" in refusal(lambda: window.check_future(NOW))
    past = Window("gone", start=datetime(2026, 1, 1), end=datetime(2026, 1, 2))
    assert "it ended at 2026-01-02" in refusal(lambda: past.check_future(NOW))
    far = Window("far", rrule="FREQ=DAILY", duration=timedelta(hours=1), start=datetime(2040, 1, 1))
    assert "no opening in the next 10 years" in refusal(lambda: far.check_future(NOW))
    # while windows with a future opening pass
    Window("fine", rrule="FREQ=DAILY", duration=timedelta(hours=1)).check_future(NOW)
    Window("soon", start=datetime(2026, 7, 1), end=datetime(2026, 7, 2)).check_future(NOW)
