"""The ``simulate`` executor: pretend to run, for the demo and the benchmarks.

Options (all optional): ``duration_ms`` and ``jitter_ms`` (each command takes
``duration_ms ± jitter_ms``, never below zero), ``failure_rate`` (0..1, the chance a command
exits with ``exit_code``), ``seed`` (makes one process's sequence of outcomes reproducible).

Every result is ``simulated=True`` and its output says ``[simulated]``; ``put``, ``rename`` and
``remove`` touch nothing and are recorded on the session. A zero duration makes no sleep call
at all, so benchmarks measure the queue, not the simulator. A duration beyond the command's
timeout sleeps until the timeout and reports ``timed_out=True``.
"""

from __future__ import annotations

import os
import random
import shlex
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from scheduler.config import Settings
from scheduler.errors import ValidationError
from tasks.executors.options import EXECUTOR_DEFAULTS, read_options
from tasks.host import CommandResult, Host

DEFAULTS = EXECUTOR_DEFAULTS["simulate"]


class SimulateSession:
    """One host's simulated session; ``operations`` lists the file operations not done."""

    def __init__(self, executor: "SimulateExecutor", host: Host) -> None:
        self.executor = executor
        self.host = host
        self.operations: list[str] = []

    def run(self, argv: list[str], timeout: float, stdin: bytes | None = None) -> CommandResult:
        if not argv:
            raise ValueError("argv must not be empty")
        command = shlex.join(argv)
        duration_s, fails = self.executor.draw()
        if duration_s > timeout:
            time.sleep(timeout)
            return CommandResult(command=command, exit_code=None, duration_s=timeout,
                                 timed_out=True, simulated=True,
                                 stderr_head="[simulated] timed out\n", stderr_bytes=22)
        if duration_s > 0:
            time.sleep(duration_s)
        opts = self.executor.options
        who = (f" (as {opts['become_user'] or 'root'} through sudo)"
               if opts["become"] or opts["become_user"] else "")
        out = f"[simulated] {self.host.name}: {command}{who}\n"
        err = "[simulated] failure\n" if fails else ""
        return CommandResult(
            command=command, exit_code=self.executor.options["exit_code"] if fails else 0,
            stdout_head=out, stdout_bytes=len(out.encode()), stderr_head=err,
            stderr_bytes=len(err), duration_s=duration_s, simulated=True,
        )

    def put(self, data: bytes, remote_path: str, mode: int = 0o600) -> None:
        self.operations.append(f"[simulated] put {remote_path} ({len(data)} bytes, "
                               f"mode {mode:04o})")

    def rename(self, src: str, dst: str) -> None:
        self.operations.append(f"[simulated] rename {src} {dst}")

    def remove(self, remote_path: str) -> None:
        self.operations.append(f"[simulated] remove {remote_path}")


class SimulateExecutor:
    """Draws durations and outcomes from one random generator (per process)."""

    name = "simulate"

    def __init__(self, options: Mapping[str, Any] | None = None,
                 settings: Settings | None = None) -> None:
        self.options = read_options(self.name, options, DEFAULTS)
        self.settings = settings
        rate = self.options["failure_rate"]
        if not 0.0 <= rate <= 1.0:
            raise ValidationError(f"simulate executor option failure_rate={rate} is not "
                                  f"between 0 and 1")
        self._lock = threading.Lock()
        self._pid = -1
        self._rng = random.Random()

    def draw(self) -> tuple[float, bool]:
        """(duration in seconds, fails?) for the next command."""
        o = self.options
        with self._lock:
            if self._pid != os.getpid():
                # A forked child must not replay its parent's sequence.
                seed = o["seed"]
                self._rng = random.Random(f"{seed}:{os.getpid()}" if seed and self._pid != -1
                                          else (seed or None))
                self._pid = os.getpid()
            jitter = self._rng.uniform(-o["jitter_ms"], o["jitter_ms"]) if o["jitter_ms"] else 0
            fails = o["failure_rate"] > 0 and self._rng.random() < o["failure_rate"]
        return max(0.0, (o["duration_ms"] + jitter) / 1000), fails

    @contextmanager
    def session(self, host: Host) -> Iterator[SimulateSession]:
        yield SimulateSession(self, host)

    def close(self) -> None:
        pass


__all__ = ["SimulateExecutor", "SimulateSession"]
