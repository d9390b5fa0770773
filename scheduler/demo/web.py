"""``fleetsched demo --web``: the demo's fleet in the web console.

1. ``start(...)`` runs ``fleetsched server`` (the same command an operator runs, as a child
   process in the demo's environment, so on the demo's own Redis and SQLite) on a free
   loopback port, waits until it answers, and creates an admin token for the demo's record;
2. the demo prints the console's URL and the token, one line each, and goes on;
3. ``stop()`` stops the server (SIGTERM: open pages' streams are closed within
   ``scheduler.server.service.SHUTDOWN_GRACE_S``) before the demo removes its directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scheduler.errors import FleetschedError

if TYPE_CHECKING:
    from collections.abc import Callable

    from scheduler.config import Settings

__all__ = ["WebConsole", "start"]

START_S = 60.0  # the server's start on a busy machine (imports, the record's schema check)
STOP_S = 20.0  # SIGTERM, then SIGKILL


@dataclass
class WebConsole:
    """The demo's running server: its console's URL and an admin token for it."""

    process: subprocess.Popen[bytes]
    url: str
    token: str
    log: Path

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(settings: Settings, env: dict[str, str], directory: Path,
          check_interrupt: Callable[[], None], preexec: Callable[[], None]) -> WebConsole:
    """The server on the demo's deployment (``env``: the demo's settings), and a token."""
    from scheduler.principal import Principal
    from scheduler.verbs import tokens
    from scheduler.verbs.stores import Stores

    port = _free_port()
    log_path = directory / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-P", "-m", "scheduler", "server", "--port", str(port),
             "--log-format", "text"], stdin=subprocess.DEVNULL, stdout=log,
            stderr=subprocess.STDOUT, env=env, start_new_session=True,
            preexec_fn=preexec)  # noqa: PLW1509 - the demo starts no thread of its own
    made = tokens.create(Stores(settings), Principal.local(settings), "demo web console",
                         role="admin")
    console = WebConsole(process, f"http://127.0.0.1:{port}/ui/", made.token, log_path)
    deadline = time.monotonic() + START_S
    while not _answers(port):
        check_interrupt()
        if not console.alive() or time.monotonic() > deadline:
            console.stop()
            tail = log_path.read_text(errors="replace").strip().splitlines()
            raise FleetschedError(
                "the demo's web console did not start: "
                + (tail[-1] if tail else f"exit code {process.returncode}"),
                hint="run fleetsched demo --web --keep and read server.log in its directory")
        time.sleep(0.1)
    return console


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
