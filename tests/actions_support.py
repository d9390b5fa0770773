"""Helpers for the end-to-end action tests on the real sshd fleet (``tests/fleet.py``).

``run_action`` validates parameters as the worker will, opens a real ssh session and runs the
action with an :class:`~tasks.ActionContext` whose ``reconnect`` opens a fresh session on the
same executor, as the worker's runner does. ``CorruptingSession`` is fault injection around a
real session: its ``put`` flips the last byte, so a real file with wrong content reaches the
host and the host's real ``sha256sum`` has to catch it.
"""

from __future__ import annotations

from typing import Any

import tasks
from tasks import ActionContext, ActionResult
from tasks.host import Host, HostSession
from tests.fleet import FleetHost, SshFleet


class CorruptingSession:
    """A real session whose uploads arrive with their last byte flipped."""

    def __init__(self, inner: HostSession) -> None:
        self.inner = inner

    def put(self, data: bytes, remote_path: str, mode: int = 0o600) -> None:
        self.inner.put(data[:-1] + bytes([data[-1] ^ 0x01]), remote_path, mode)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def run_action(fleet: SshFleet, fleet_host: FleetHost, name: str, params: dict[str, Any], *,
               timeout_s: float = 30.0, host: Host | None = None, corrupt: bool = False,
               ctx: ActionContext | None = None) -> ActionResult:
    """Validate ``params`` for action ``name`` and run it on ``fleet_host`` over real SSH."""
    action = tasks.get_action(name)
    typed = action.validate(params)
    executor = fleet.executor()
    target = host or fleet_host.host()
    if ctx is None:
        ctx = ActionContext()
    ctx.reconnect = lambda: executor.session(target)
    try:
        with executor.session(target) as session:
            used: Any = CorruptingSession(session) if corrupt else session
            return action.run(used, target, typed, timeout_s, ctx)
    finally:
        executor.close()
