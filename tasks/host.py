"""The executor contract: run operations on one host and report what happened.

An executor knows nothing about queues, leases or tasks (like Fabric's result objects). It opens
a :class:`HostSession` on a :class:`Host`; an action drives that session (run a command, put a
file) and gets :class:`CommandResult` objects back. Implementations: ``ssh`` (paramiko),
``local`` (a process on the worker node) and ``simulate`` (for the demo and the benchmarks).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Host:
    """One machine of the fleet, as an executor needs it."""

    name: str
    address: str | None = None  # defaults to name
    port: int = 22
    user: str | None = None
    vars: dict[str, Any] = field(default_factory=dict)

    @property
    def connect_address(self) -> str:
        return self.address or self.name


@dataclass(frozen=True)
class CommandResult:
    """What one command did: the command as run, its exit status, output head and tail."""

    command: str
    exit_code: int | None  # None when it never finished (timeout, connection lost)
    stdout_head: str = ""
    stdout_tail: str = ""
    stderr_head: str = ""
    stderr_tail: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    stdout_cut: int = 0  # bytes between head and tail that were not kept (raw bytes)
    stderr_cut: int = 0
    duration_s: float = 0.0
    timed_out: bool = False
    simulated: bool = False
    error: str | None = None  # why there is no exit code, other than a timeout (connection lost)

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


class HostSession(Protocol):
    """An open connection to one host. Commands are argv lists, quoted by the session."""

    def run(self, argv: list[str], timeout: float, stdin: bytes | None = None) -> CommandResult:
        """Run ``argv`` on the host (each element quoted; never interpreted by a shell)."""
        ...

    def put(self, data: bytes, remote_path: str, mode: int = 0o600) -> None:
        """Write ``data`` to ``remote_path`` on the host (SFTP for ssh)."""
        ...

    def rename(self, src: str, dst: str) -> None:
        """Atomically rename a file on the host."""
        ...

    def remove(self, remote_path: str) -> None:
        """Remove a file on the host; a missing file is not an error."""
        ...


class Executor(Protocol):
    """Opens sessions on hosts. ``name`` is ``ssh``, ``local`` or ``simulate``."""

    name: str

    def session(self, host: Host) -> AbstractContextManager[HostSession]:
        """A session on ``host``, closed (or returned to a pool) when the block ends."""
        ...

    def close(self) -> None:
        """Release whatever the executor keeps between sessions (pooled SSH connections)."""
        ...


__all__ = ["CommandResult", "Executor", "Host", "HostSession"]
