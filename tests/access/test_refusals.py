"""``RefusalLog``: which failed authentications become ``auth_fail`` events, as a flood of
them from one address and from many addresses arrives minute after minute."""

from __future__ import annotations

from datetime import UTC, datetime

from scheduler.access.refusals import RefusalLog

MINUTE = 1_800_000_000 - 1_800_000_000 % 60  # a minute's first second


def _failures(log: RefusalLog, addresses: list[str], at: float) -> list[object]:
    due = log.ended(at)
    for address in addresses:
        first = log.refused(address, at)
        if first is not None:
            due.append(first)
    return due


def test_one_address_gets_one_event_at_once_and_one_count_after_its_minute() -> None:
    log = RefusalLog()
    # Given 500 failures from one address in one minute
    now = _failures(log, ["10.0.0.1"] * 500, MINUTE + 5)
    # Then one event is due at once, its first
    assert [(r.source, r.count) for r in now] == [("10.0.0.1", 1)]
    assert now[0].minute == datetime.fromtimestamp(MINUTE, UTC)
    assert log.ended(MINUTE + 59) == []  # nothing more while the minute lasts
    # And once the minute is over, one event counts the other 499, once
    later = log.ended(MINUTE + 61)
    assert [(r.source, r.count, r.minute) for r in later] == [
        ("10.0.0.1", 499, datetime.fromtimestamp(MINUTE, UTC))]
    assert log.ended(MINUTE + 62) == []


def test_past_the_cap_the_addresses_of_a_minute_share_one_event() -> None:
    log = RefusalLog(per_minute=100)
    # Given 10,000 addresses failing twice each in one minute
    addresses = [f"10.1.{n // 256}.{n % 256}" for n in range(10_000)]
    now = _failures(log, addresses * 2, MINUTE + 1)
    # Then the first 100 addresses get an event each at once, no other
    assert len(now) == 100 and {r.count for r in now} == {1}
    # And after the minute: each of them one count, and one event for all the others
    later = log.ended(MINUTE + 60)
    own = [r for r in later if r.source is not None]
    assert len(own) == 100 and {r.count for r in own} == {1}
    [rest] = [r for r in later if r.source is None]
    assert (rest.count, rest.addresses) == (2 * 9_900, 9_900)
    # So a minute of it made 201 events, whatever was sent
    assert len(now) + len(later) == 201
