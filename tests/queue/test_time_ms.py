"""Times to ms epochs, exactly: a job never starts before the time asked (its due time is
rounded up to the ms, claim takes what is due at or before its clock's ms) and a window's close
is never later than asked (rounded down). The old ``int(timestamp() * 1000)`` cut a start time
of 12:00:00.124900 to .124: the job could start 0.9 ms before its ``--at``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from scheduler.record.types import due_ms, from_ms, to_ms


def test_every_whole_ms_of_a_second_is_exact_both_ways() -> None:
    for ms in range(1000):
        at = datetime(2026, 11, 25, 12, 0, 0, ms * 1000, tzinfo=timezone.utc)
        assert to_ms(at) == due_ms(at) == 1795608000000 + ms


@pytest.mark.parametrize("micros", [1, 499, 500, 999])
def test_a_part_of_a_ms_rounds_up_for_a_start_and_down_for_a_close(micros: int) -> None:
    at = datetime(2026, 11, 25, 12, 0, 0, 124_000 + micros, tzinfo=timezone.utc)
    assert due_ms(at) == 1795608000125
    assert to_ms(at) == 1795608000124
    assert from_ms(due_ms(at)) >= at > from_ms(to_ms(at))


def test_before_the_epoch_and_naive_times() -> None:
    before = datetime(1969, 12, 31, 23, 59, 59, 999_500, tzinfo=timezone.utc)
    assert (to_ms(before), due_ms(before)) == (-1, 0)
    naive = datetime(2026, 11, 25, 12, 0, 0, 124_000)  # as SQLite returns it: UTC
    assert to_ms(naive) == to_ms(naive.replace(tzinfo=timezone.utc))
    other_zone = datetime(2026, 11, 25, 13, 0, tzinfo=timezone(timedelta(hours=1)))
    assert to_ms(other_zone) == 1795608000000
