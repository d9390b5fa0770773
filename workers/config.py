"""The shape of one worker node: how many jobs, how many processes, which timings.

``NodeConfig`` is built once (by ``fleetsched worker`` from its flags and the settings) and
passed to the master; it is frozen so no thread can change it under another.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from scheduler.config import LEASE_MS, Settings, check_lease
from scheduler.errors import ConfigError


def default_worker_id() -> str:
    """``<hostname>-<pid>``: unique per master process, readable in ``fleetsched top``."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class NodeConfig:
    """Everything the node master needs beyond :class:`scheduler.config.Settings`."""

    settings: Settings
    # Jobs this node runs at once (SSH jobs mostly wait on the network, so hundreds are fine).
    slots: int = 50
    # Child processes at most; each runs up to ceil(slots / processes) jobs in threads.
    processes: int = 4
    # A claimed job is this node's for this long unless a heartbeat renews it.
    lease_ms: int = LEASE_MS
    # Heartbeats renew the leases of running jobs this often.
    heartbeat_ms: int = 10_000
    # SIGTERM: running jobs get this long to finish before their leases are given back.
    grace_s: float = 30.0
    # A child with no job for this long exits (the first child stays, so a due job starts at once).
    idle_s: float = 30.0
    # Children kept alive even when idle (warm: no process start on the path of a due job).
    min_processes: int = 1
    # A job whose action ignores its own timeout is stopped this long after it (at least).
    kill_margin_s: float = 2.0
    # At most this many jobs per claim (a claim asks for min(free slots, this)).
    claim_batch: int = 200
    worker_id: str = field(default_factory=default_worker_id)
    # Record events into SQL: ``serve`` starts a recorder process (workers/recorder_process.py).
    recorder: bool = True

    def __post_init__(self) -> None:
        if self.slots < 1:
            raise ConfigError(f"--slots must be at least 1, not {self.slots}")
        if self.processes < 1:
            raise ConfigError(f"--processes must be at least 1, not {self.processes}")
        if self.processes > self.slots:
            raise ConfigError(
                f"--processes ({self.processes}) is more than --slots ({self.slots})",
                hint="each child process runs at least one job; use fewer processes",
            )
        check_lease(self.lease_ms, self.heartbeat_ms, lease="--lease")
        if self.grace_s < 0:
            raise ConfigError(f"--grace must not be negative, not {self.grace_s}")
        if not self.worker_id or any(c.isspace() for c in self.worker_id):
            raise ConfigError(f"--id {self.worker_id!r} must be non-empty, without spaces")

    @property
    def threads_per_process(self) -> int:
        """Jobs one child runs at once."""
        return -(-self.slots // self.processes)
