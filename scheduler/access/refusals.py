"""Failed authentications as audit events, without letting a flood of them into the record.

Every refused authentication the server answers (any 401: a bad, unknown, revoked or expired
token, a dead session cookie, no credentials, a failed single sign-on callback; and a login
the identity provider vouched for that maps to no role) is an ``auth_fail`` event, but not
one per request:

1. the first failure of an address in a minute (of the wall clock, UTC) is recorded at once,
   with what was presented and why it was refused (``scheduler.verbs.access.refusal``: a
   token's id, never the token; a session cookie, never its id);
2. that address's other failures in the same minute are counted, and recorded as one more
   event with their ``count`` once the minute is over (at the first request the process
   serves after it, so a quiet server writes it late, never loses it while it runs);
3. at most ``ADDRESSES_PER_MINUTE`` addresses get events of their own in a minute; the
   failures of every further address are counted together into one event of that minute
   (``source`` null, ``addresses``: how many, up to ``TRACKED_OTHERS``).

So a server process writes at most 2 x ``ADDRESSES_PER_MINUTE`` + 1 of these events a minute,
whatever is sent to it (``scheduler.server.hardening`` also answers an address 429 after 20
failures in a minute, before any route: those are not authentications and are not counted).
The counts live in the process, like hardening's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

__all__ = ["ADDRESSES_PER_MINUTE", "Refusal", "RefusalLog"]

ADDRESSES_PER_MINUTE = 100
TRACKED_OTHERS = 10_000  # distinct addresses counted past the cap, for the summary's number


@dataclass(frozen=True)
class Refusal:
    """One ``auth_fail`` event to write: from ``source`` (None: the addresses past the cap),
    ``count`` failures in the ``minute`` starting then, ``detail`` what the first presented
    (empty for a later count)."""

    source: str | None
    count: int
    minute: datetime
    detail: dict[str, Any] = field(default_factory=dict)
    addresses: int = 1


class RefusalLog:
    """The failures of the current minute (see the module docstring)."""

    def __init__(self, per_minute: int = ADDRESSES_PER_MINUTE) -> None:
        self.per_minute = per_minute
        self.minute = -1
        self.repeats: dict[str, int] = {}  # address -> failures after its recorded first
        self.others = 0
        self.other_addresses: set[str] = set()

    def refused(self, address: str, now: float) -> Refusal | None:
        """Count one failure from ``address`` at ``now`` (seconds since the epoch, in the
        minute ``ended`` was last asked about); the event to write now when it is the first of
        this address's minute (its ``detail`` for the caller to fill), else None."""
        if address in self.repeats:
            self.repeats[address] += 1
        elif len(self.repeats) < self.per_minute:
            self.repeats[address] = 0
            return Refusal(address, 1, _start(int(now // 60)))
        else:
            self.others += 1
            if len(self.other_addresses) < TRACKED_OTHERS:
                self.other_addresses.add(address)
        return None

    def ended(self, now: float) -> list[Refusal]:
        """The counts of a minute that ended before ``now`` (once); nothing while it lasts."""
        minute = int(now // 60)
        if minute == self.minute:
            return []
        start = _start(self.minute)
        due = [Refusal(a, n, start) for a, n in self.repeats.items() if n]
        if self.others:
            due.append(Refusal(None, self.others, start,
                               addresses=len(self.other_addresses)))
        self.minute, self.repeats, self.others = minute, {}, 0
        self.other_addresses = set()
        return due


def _start(minute: int) -> datetime:
    return datetime.fromtimestamp(max(minute, 0) * 60, UTC)
