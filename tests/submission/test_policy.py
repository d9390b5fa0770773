"""Limits, durations and times as operators type them."""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scheduler.errors import ValidationError
from scheduler.parse import format_duration, parse_duration, parse_limit, parse_time


def test_a_percentage_limit_rounds_up_and_never_reaches_zero() -> None:
    assert parse_limit("10%").of(3000) == 300
    assert parse_limit("10%").of(4) == 1
    assert parse_limit("25%").of(5) == 2
    assert parse_limit("20").of(3000) == 20


@pytest.mark.parametrize("text", ["0", "-3", "0%", "101%", "ten", "", "5.5", "\u0661", "1e3", "nan%",
                                  "10000001", "99999999999999999999999"])
def test_a_bad_limit_is_refused(text: str) -> None:
    with pytest.raises(ValidationError):
        parse_limit(text, "--max-concurrency")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("500ms", 0.5), ("10m", 600), ("1h30m", 5400), ("90d", 90 * 86400), ("2w", 1209600)],
)
def test_durations_parse(text: str, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["10", "90", "1.5"])
def test_a_duration_without_a_unit_is_refused_and_the_hint_names_the_choices(text: str) -> None:
    # --in 10: ten seconds or ten minutes? --older-than 90: ninety days or seconds?
    with pytest.raises(ValidationError) as err:
        parse_duration(text, "--in")
    assert str(err.value) == f"--in {text!r} has no unit" and f"{text}m" in err.value.hint
    assert parse_duration(text, bare_seconds=True) == timedelta(seconds=float(text))


@pytest.mark.parametrize("text", ["", "0s", "10 minutes", "1h-5m", "m", "5x", "1.2.3s"])
def test_a_bad_duration_is_refused_with_one_line(text: str) -> None:
    with pytest.raises(ValidationError) as err:
        parse_duration(text, "--timeout")
    assert "--timeout" in str(err.value)


def test_a_time_without_offset_is_read_in_the_given_zone() -> None:
    t = parse_time("2026-07-01T22:00", "Europe/Berlin")
    assert t == datetime(2026, 7, 1, 20, 0, tzinfo=timezone.utc)
    assert parse_time("2026-07-01T22:00+00:00") == datetime(2026, 7, 1, 22, 0, tzinfo=timezone.utc)


def test_a_bad_time_or_zone_is_refused() -> None:
    with pytest.raises(ValidationError):
        parse_time("tomorrow")
    with pytest.raises(ValidationError):
        parse_time("2026-07-01T22:00", "Mars/Olympus")


def test_durations_format_shortly() -> None:
    assert [format_duration(s) for s in (0.84, 42, 185, 7800, 270000)] == [
        "0.8s", "42s", "3m05s", "2h10m", "3d3h"]


@given(st.text(max_size=20))
def test_any_text_is_a_duration_or_a_validation_error(text: str) -> None:
    try:
        assert parse_duration(text).total_seconds() > 0
    except ValidationError:
        pass
