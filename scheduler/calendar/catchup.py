"""Catch-up after downtime: which missed occurrences of a schedule to run, which to report.

Pure: the caller passes the last occurrence that fired and the current time. Every
occurrence in ``(last_fired, now]`` ends up in exactly one of ``CatchUp.run``,
``CatchUp.missed`` or (when there are more than ``limit``) the ``CatchUp.unlisted`` range;
none is dropped silently. Semantics in docs/concepts/windows-and-schedules.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from scheduler.calendar.cron import CronSchedule
from scheduler.calendar.recurrence import as_utc


class Policy(StrEnum):
    """What a schedule does with the occurrences it missed while nothing ran."""

    SKIP = "skip"  # run none of them
    LATEST = "latest"  # run the newest one (inside the catch-up window)
    ALL = "all"  # run each one inside the catch-up window


@dataclass(frozen=True)
class CatchUp:
    """The outcome of ``catch_up``. Every occurrence is in ``run`` or ``missed``, or in the
    ``unlisted`` range when there were more than ``limit`` of them."""

    run: tuple[datetime, ...]  # to fire now, oldest first
    missed: tuple[datetime, ...]  # not to be run, to be reported, oldest first
    unlisted: tuple[datetime, datetime] | None  # (a, b): fires in (a, b) were missed too
    next_fire: datetime | None  # the first occurrence after now


def _newest(schedule: CronSchedule, last: datetime, end: datetime, limit: int
            ) -> tuple[list[datetime], tuple[datetime, datetime] | None]:
    """The newest ``limit`` fires in ``(last, end]``, and the range of older ones if any.

    Looks back one day, then four times further each round, so a long outage of a frequent
    schedule costs about ``limit`` fires, not one per fire since ``last``."""
    span = timedelta(days=1)
    while True:
        low = max(last, end - span)
        fires = []
        for at in schedule.starts(low + timedelta(microseconds=1)):
            if at > end:
                break
            fires.append(at)
        if len(fires) > limit or low == last:
            break
        span *= 4
    if len(fires) <= limit:
        return fires, None
    return fires[-limit:], (last, fires[-limit])


def catch_up(schedule: CronSchedule, last_fired: datetime, now: datetime,
             policy: Policy | str, *, window: timedelta | None = None,
             grace: timedelta = timedelta(minutes=1), limit: int = 1000) -> CatchUp:
    """Split the occurrences in ``(last_fired, now]`` into those to run and those missed.

    An occurrence at most ``grace`` old is on time: it runs under every policy. Older ones
    are late: ``skip`` runs none of them; ``latest`` runs the newest late one if there is no
    on-time one and it is inside ``window`` (None = no limit); ``all`` runs every late one
    inside ``window``. Every late occurrence not run is in ``missed``. Only the newest
    ``limit`` occurrences are listed; older ones are reported as the range ``unlisted``.
    Pass the schedule's creation time as ``last_fired`` if it never fired.
    """
    policy = Policy(policy)
    last, end = as_utc(last_fired), as_utc(now)
    if limit < 1:
        raise ValueError("limit must be at least 1")
    due, unlisted = _newest(schedule, last, end, limit)
    on_time = [at for at in due if end - at <= grace]
    late = [at for at in due if end - at > grace]
    fresh = [at for at in late if window is None or end - at <= window]
    if policy is Policy.SKIP:
        run = on_time
    elif policy is Policy.LATEST:
        run = on_time[-1:] or fresh[-1:]
    else:
        run = fresh + on_time
    missed = tuple(at for at in due if at not in run)
    return CatchUp(tuple(run), missed, unlisted, next(schedule.starts(end + timedelta(
        microseconds=1)), None))


__all__ = ["CatchUp", "Policy", "catch_up"]
