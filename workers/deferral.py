"""The claim-time hook for service windows and freezes: should a just-claimed job wait?

The master calls :func:`window_deferral` for every claimed job that carries a window (``window``
or ``wclose_ms`` set) or whose host a freeze covers now (the host hash's ``freezes`` field,
read by the claim itself), before the job is started. A :class:`Deferral` makes the master call
``Queue.defer`` (no attempt counted, a ``defer`` event) instead of running the job.

How it decides, judged by the Redis clock at the claim (``Claim.now_ms``):

1. The job's ``window`` field names the windows and freezes that applied to its host at
   submission (``scheduler.windows.assignment.window_field``: ``"maint-sun !year-end"``; a
   job that needs no window names its freezes only); the host's ``freezes`` field adds the
   freezes assigned since (``scheduler.windows.freezes``). A task submitted with
   ``--break-glass`` (``scheduler.windows.wire.BREAK_GLASS`` in the field) ignores every
   freeze. The definitions are read from ``Keys.window`` (one pipelined round trip, parsed
   once per definition and cached).
2. ``scheduler.calendar.windows.next_opening(windows, now, expected, freezes=...)`` (``windows``
   None for a job that needs none): the first instant at or after ``now`` from which the
   action's expected duration fits inside an approved opening and outside every freeze. If
   that instant is ``now``, the job runs.
3. Otherwise the job is deferred to that instant, with the opening's close as its new
   ``wclose`` (none for a job without a window), and a reason saying which case it was:
   outside the window (closed, not yet open), inside a freeze, or too little time left
   before the window closes or a freeze begins for the expected duration (the cutoff, as in
   AWS SSM maintenance windows).
4. No opening within the search horizon, or a definition missing from Redis: deferred by
   :data:`RECHECK_MS` with a reason naming the problem (the operator approves or fixes the
   window, or cancels the task); the job never starts outside a window nor inside a freeze.
5. A window or freeze removed since submission (its Redis copy is a tombstone,
   ``scheduler.windows.wire.unpublish``) is gone for good: a removed freeze holds nothing
   back; a job whose every window was removed can never run inside one, so it fails for good
   (``Deferral.fail``) with a reason naming them, instead of being deferred forever.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import redis

from scheduler.calendar.windows import Window, is_open, next_opening
from scheduler.errors import FleetschedError
from scheduler.queue.keys import Keys
from scheduler.windows.wire import REMOVED, breaks_glass, parse_window_field, window_from_hash

if TYPE_CHECKING:
    from scheduler.queue.types import ClaimedJob

RECHECK_MS = 300_000
"""A job whose window cannot be evaluated (missing, corrupt, no opening) looks again this late."""

_CACHE = 256  # parsed window definitions kept per process
_parsed: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], Window | str] = OrderedDict()


@dataclass(frozen=True)
class Deferral:
    """Run the job at ``due_ms`` (ms epoch) instead, in the opening that closes at ``wclose_ms``."""

    due_ms: int
    wclose_ms: int | None
    reason: str  # one line for the operator, e.g. "window maint-sun closed at 04:00 UTC"
    fail: bool = False  # the job can never run (its windows were removed): fail it for good


def _at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, timezone.utc)


def _ms_ceil(at: datetime) -> int:
    """A datetime as ms epoch, rounded up (a job never becomes due before its opening)."""
    whole = int(at.timestamp()) * 1000
    return whole + -(-at.microsecond // 1000)


def _fmt(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True)
class Removed:
    """A window removed since the job was submitted (its Redis copy is a tombstone)."""

    name: str


def _window(name: str, data: dict[str, str]) -> Window | Removed | str:
    """The parsed definition (cached by content), or a message saying why it is unusable."""
    if REMOVED in data:
        return Removed(name)
    key = (name, tuple(sorted(data.items())))
    found = _parsed.get(key)
    if found is None:
        if not data:
            found = f"window {name} is not in Redis (removed? run `fleetsched windows sync`)"
        else:
            try:
                found = window_from_hash(name, data)
            except (FleetschedError, ValueError) as exc:
                found = f"window {name} cannot be read: {exc}"
        _parsed[key] = found
        if len(_parsed) > _CACHE:
            _parsed.popitem(last=False)
    return found


def _definitions(client: redis.Redis, keys: Keys,
                 names: list[str]) -> list[Window | Removed | str]:
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(keys.window(name))
    return [_window(n, {_s(k): _s(v) for k, v in d.items()})
            for n, d in zip(names, pipe.execute())]


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def window_deferral(client: redis.Redis, keys: Keys, job: ClaimedJob, now_ms: int,
                    expected_ms: int, host_freezes: str = "") -> Deferral | None:
    """Whether ``job`` (a ``ClaimedJob``) must wait for its window's next opening or the end
    of a freeze (see above).

    ``now_ms`` is the Redis clock at the claim; ``expected_ms`` the action's expected duration
    (a job that cannot finish before its window closes or a freeze begins waits);
    ``host_freezes`` the host hash's ``freezes`` field (the freezes assigned to it now).
    """
    field = job.window or ""
    if not field and not host_freezes:
        return None  # a window close alone (queue-core tests) says nothing about openings
    wanted, frozen = parse_window_field(field)
    frozen = [] if breaks_glass(field) else list(dict.fromkeys(frozen + host_freezes.split()))
    if not wanted and not frozen:
        return None  # break-glass without a window: nothing to wait for, no Redis read
    defs = _definitions(client, keys, wanted + frozen)
    problems = [d for d in defs if isinstance(d, str)]
    now = _at(now_ms)
    if problems:
        return Deferral(now_ms + RECHECK_MS, None, f"{problems[0]}; checking again in 5 min")
    windows = [d for d in defs[:len(wanted)] if isinstance(d, Window)] if wanted else None
    freezes = [d for d in defs[len(wanted):] if isinstance(d, Window)]
    if windows is not None and not windows:
        gone = " ".join(d.name for d in defs[:len(wanted)] if isinstance(d, Removed))
        return Deferral(now_ms, None, f"its service window {gone} was removed after the task was "
                                      f"submitted; it cannot run inside a window any more "
                                      f"(submit it again to use the windows in force)", fail=True)
    need = timedelta(milliseconds=max(0, expected_ms))
    found = next_opening(windows, now, need, freezes=freezes)
    if found is not None and found.start_utc <= now:
        return None
    if found is None:
        what = f"approved opening of {' '.join(wanted)}" if wanted else "time outside its freezes"
        return Deferral(now_ms + RECHECK_MS, None,
                        f"no {what} fits {need.total_seconds():g}s in the next two years; "
                        f"checking again in 5 min")
    due = _ms_ceil(found.start_utc)
    wclose = _ms_ceil(found.end_utc) if windows is not None else None
    if any(is_open([replace(f, freeze=False, approved=True)], now) for f in freezes):
        why = "inside a freeze period"
    elif is_open(windows, now):
        why = (f"{need.total_seconds():g}s expected, but "
               f"{'the window closes' if windows is not None else 'a freeze begins'} before that "
               f"(cutoff)")
    else:
        why = "outside its window"
    if windows is None:
        return Deferral(due, None, f"{why}; deferred to {_fmt(found.start_utc)}, when its "
                                   f"freezes allow it")
    return Deferral(due, wclose, f"{why}; deferred to the next opening at {_fmt(found.start_utc)} "
                                 f"(closes {_fmt(found.end_utc)})")


__all__ = ["Deferral", "RECHECK_MS", "Removed", "window_deferral"]
