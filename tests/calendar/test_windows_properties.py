"""Property test: next_opening and is_open against a brute-force minute grid.

Random approved and unapproved windows (one-off and daily recurring, in UTC so the oracle can
place their openings by plain arithmetic) and freeze periods over a few days; the oracle marks
every minute free or not and looks for the first run of free minutes long enough for the job.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduler.calendar.windows import Window, is_open, next_opening

UTC = timezone.utc
T0 = datetime(2026, 6, 1, tzinfo=UTC)
DAYS = 4
GRID = (DAYS + 3) * 24 * 60  # minutes the oracle looks at
MIN = timedelta(minutes=1)


@st.composite
def one_offs(draw: st.DrawFn, freeze: bool) -> tuple[Window, list[tuple[int, int]]]:
    start = draw(st.integers(0, DAYS * 24 * 4)) * 15
    length = draw(st.integers(1, 16)) * 15
    approved = freeze or draw(st.booleans())
    window = Window(f"o{start}-{length}", start=T0 + start * MIN, duration=length * MIN,
                    approved=approved, freeze=freeze)
    return window, [(start, start + length)] if approved else []


@st.composite
def dailies(draw: st.DrawFn, freeze: bool) -> tuple[Window, list[tuple[int, int]]]:
    hour, minute = draw(st.integers(0, 23)), draw(st.sampled_from([0, 15, 30, 45]))
    length = draw(st.integers(1, 12)) * 15
    window = Window(f"d{hour}-{minute}-{length}", rrule=f"FREQ=DAILY;BYHOUR={hour};BYMINUTE={minute}",
                    duration=length * MIN, freeze=freeze)
    first = -24 * 60 + hour * 60 + minute  # the day before T0 too: it may still be open
    return window, [(first + day * 24 * 60, first + day * 24 * 60 + length)
                    for day in range(DAYS + 4)]


def windows(freeze: bool):
    return st.lists(st.one_of(one_offs(freeze), dailies(freeze)), max_size=3,
                    unique_by=lambda pair: pair[0].name)


@settings(max_examples=200, deadline=None)
@given(wins=windows(False), freezes=windows(True), at_min=st.integers(0, DAYS * 24 * 60),
       need=st.integers(0, 6 * 60))
def test_next_opening_is_the_first_minute_from_which_the_job_fits(wins, freezes, at_min, need):
    free = [False] * GRID
    for _, spans in wins:
        for a, b in spans:
            for m in range(max(a, 0), min(b, GRID)):
                free[m] = True
    for _, spans in freezes:
        for a, b in spans:
            for m in range(max(a, 0), min(b, GRID)):
                free[m] = False
    horizon = timedelta(days=2)
    limit = at_min + 2 * 24 * 60

    expected = None
    for t in range(at_min, limit):
        if all(free[t:t + max(need, 1)]):
            end = t
            while end < GRID and free[end]:
                end += 1
            expected = (T0 + t * MIN, T0 + end * MIN)
            break

    found = next_opening([w for w, _ in wins], T0 + at_min * MIN, need * MIN,
                         freezes=[f for f, _ in freezes], horizon=horizon)
    if expected is None:
        assert found is None
    else:
        assert found is not None and (found.start_utc, found.end_utc) == expected
    assert is_open([w for w, _ in wins], T0 + at_min * MIN,
                   freezes=[f for f, _ in freezes]) == free[at_min]
