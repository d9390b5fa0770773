"""Executors: how a job's operations reach a host (``ssh``, ``local``, ``simulate``).

``build_executor(name, options, settings)`` is the one way in; the contract the actions code
against is in :mod:`tasks.host`. They live beside the actions they serve and import nothing of
the worker node, which only calls ``build_executor``:

- ``options``: each executor's option names and defaults, read typed;
- ``capture``: the bounded head and tail of a command's output;
- ``local`` and ``simulate``: a process on the worker node, and a pretend host;
- ``ssh/``: everything SSH in one place (connect, host keys, become, probe, the executor).

Each executor's module is imported when one is first built (``ssh`` loads paramiko).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from scheduler.config import Settings
from scheduler.errors import ValidationError
from tasks.executors.options import EXECUTORS
from tasks.host import CommandResult, Executor, Host, HostSession


def build_executor(name: str, options: Mapping[str, Any] | None = None,
                   settings: Settings | None = None) -> Executor:
    """The executor called ``name``, configured by ``options`` (unknown options are an error)."""
    settings = settings or Settings()
    if name in ("local", "ssh"):
        # The node's output cap, unless the task names its own capture_bytes.
        options = {"capture_bytes": settings.output_cap_bytes, **(options or {})}
    if name == "local":
        from tasks.executors.local import LocalExecutor

        return LocalExecutor(options, settings)
    if name == "ssh":
        from tasks.executors.ssh.executor import SshExecutor

        return SshExecutor(options, settings)
    if name == "simulate":
        from tasks.executors.simulate import SimulateExecutor

        return SimulateExecutor(options, settings)
    raise ValidationError(f"unknown executor {name!r}", hint="choose one of: " + ", ".join(EXECUTORS))


__all__ = ["EXECUTORS", "CommandResult", "Executor", "Host", "HostSession", "build_executor"]
