"""The node's schedule firer: fires the schedule entries the master's claims return.

1. The master hands over ``Claim.schedules`` (with ``Claim.now_ms``) and goes on claiming;
   firing (SQL + fan-out) happens in this thread, so jobs never wait behind a schedule.
2. Each entry is fired by ``scheduler.schedules.firing.fire_claimed`` with its own ``Queue``-free Redis
   calls and an engine on the configured database (the recorder's if the node runs one).
3. A failure (Redis or SQL down) is logged; the entry's lease runs out and any worker fires it
   again, completing what this one started (the task is unique per occurrence in SQL).
4. On stop, what is queued here is dropped (the leases run out); a fire in progress finishes.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import TYPE_CHECKING, Any

import redis

from scheduler.queue.keys import Keys
from scheduler.queue.shards import Shards

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from scheduler.config import Settings
    from scheduler.queue.types import Claim

log = logging.getLogger(__name__)


class Firer:
    """A thread that fires claimed schedule entries, started on the first one."""

    def __init__(self, settings: Settings, client: redis.Redis, keys: Keys | Shards, worker: str,
                 engine: Engine | None = None) -> None:
        self.settings = settings
        self.client = client
        self.keys = keys
        self.worker = worker
        self._engine = engine
        self._own_engine = False
        self._todo: queue.Queue[tuple[Any, int] | None] = queue.Queue()
        self._thread: threading.Thread | None = None
        self.fired = 0
        self.failed = 0

    def submit(self, claim: Claim) -> None:
        """Queue every schedule entry of ``claim`` for firing."""
        for entry in claim.schedules:
            self._todo.put((entry, claim.now_ms))
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="firer", daemon=True)
            self._thread.start()

    def _engine_now(self) -> Any:
        if self._engine is None:
            from scheduler.record.engine import engine_for

            self._engine = engine_for(self.settings)
            self._own_engine = True
        return self._engine

    def _run(self) -> None:
        from scheduler.schedules.firing import fire_claimed

        while (item := self._todo.get()) is not None:
            entry, now_ms = item
            try:
                result = fire_claimed(self._engine_now(), self.client, self.keys, entry, now_ms,
                                      worker=self.worker)
                self.fired += 1
                log.info("schedule %s fired: tasks %s, %d missed, next %s", entry.name,
                         result.tasks, result.missed, result.next_at)
            except Exception as exc:  # noqa: BLE001 - the lease expiry is the retry
                self.failed += 1
                from scheduler.redact import redact_exception

                log.error("schedule %s could not fire (%s: %s); it fires again when its lease "
                          "runs out", entry.name, type(exc).__name__, redact_exception(exc))

    def stop(self, timeout: float = 10.0) -> None:
        """Drop what waits, let a fire in progress finish (at most ``timeout``)."""
        if self._thread is None:
            return
        while True:
            try:
                self._todo.get_nowait()
            except queue.Empty:
                break
        self._todo.put(None)
        self._thread.join(timeout)
        if self._own_engine and self._engine is not None:
            self._engine.dispose()
