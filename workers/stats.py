"""What a node has done since it started: counters and start lateness, for status and benchmarks.

The counters are the one count of the node's outcomes: its presence reports them, and the
metrics endpoint (``workers.metrics``) listens to every :meth:`NodeStats.add`."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

LATENESS_SAMPLES = 100_000


@dataclass
class NodeStats:
    claimed: int = 0
    acked: int = 0
    failed: int = 0
    retried: int = 0
    released: int = 0
    deferred: int = 0
    lost_seen: int = 0  # jobs this node's claims found lost by another worker
    timed_out: int = 0
    children_died: int = 0
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    # Child start time minus the job's due time, ms (wall clock of this node).
    lateness_ms: deque[float] = field(default_factory=lambda: deque(maxlen=LATENESS_SAMPLES))
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Told every add (``workers.metrics.NodeMetrics.counted``), after the counters moved.
    listener: Callable[[dict[str, int]], None] | None = field(default=None, repr=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)
        if self.listener is not None:
            self.listener(counts)

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            return {k: getattr(self, k) for k in (
                "claimed", "acked", "failed", "retried", "released", "deferred", "lost_seen",
                "timed_out", "children_died", "started_ms")}
