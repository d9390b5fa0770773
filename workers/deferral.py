"""The claim-time hook for service windows: should a just-claimed job wait for its next window?

The master calls :func:`window_deferral` for every claimed job that carries a window (``window``
or ``wclose_ms`` set), before the job is started. A :class:`Deferral` makes the master call
``Queue.defer`` (no attempt counted) instead of running the job. Until service windows land this
defers nothing; the windows code replaces the body of this one function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis

from scheduler.keys import Keys


@dataclass(frozen=True)
class Deferral:
    """Run the job at ``due_ms`` (ms epoch) instead, in the opening that closes at ``wclose_ms``."""

    due_ms: int
    wclose_ms: int | None
    reason: str  # one line for the operator, e.g. "window maint-sun closed at 04:00 UTC"


def window_deferral(client: redis.Redis, keys: Keys, job: Any, now_ms: int,
                    expected_ms: int) -> Deferral | None:
    """Whether ``job`` (a ``ClaimedJob``) must wait for its window's next opening.

    ``now_ms`` is the Redis clock at the claim; ``expected_ms`` the action's expected duration
    (a job that cannot finish before ``job.wclose_ms`` should wait too).
    """
    return None
