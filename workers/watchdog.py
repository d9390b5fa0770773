"""The watchdog: jobs past their timeout, and children to retire or stop.

Ten times a second it:

1. hands every job past its deadline (its task's timeout plus a margin in which a well-behaved
   action reports the timeout itself) to the finisher, once, which fails it and retires its
   child;
2. lets the pool kill retiring children whose other jobs are done (or whose grace is over) and
   stop children idle for longer than ``idle_s``.
"""

from __future__ import annotations

import threading
import time

from workers.finisher import Finisher
from workers.pool import Pool
from workers.slots import Slots

TICK_S = 0.1


class Watchdog:
    def __init__(self, slots: Slots, pool: Pool, finisher: Finisher) -> None:
        self.slots = slots
        self.pool = pool
        self.finisher = finisher
        self._reported: set[tuple[str, int]] = set()

    def tick(self) -> None:
        now = time.monotonic()
        overdue = self.slots.overdue(now)
        current = {(r.job_id, r.token) for r in overdue}
        for r in overdue:
            if (r.job_id, r.token) not in self._reported:
                self.finisher.timed_out(r)
        self._reported = current
        self.pool.tend(now, live_jobs=lambda c: len(self.slots.of_child(c)))

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(TICK_S):
            self.tick()
