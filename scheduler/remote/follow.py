"""``tasks wait`` and ``submit --wait`` over the API: each task followed on its Server-Sent
Events stream (``GET /tasks/{id}/events``) until its ``end`` event, which carries the exit code
``tasks wait`` gives; the failures come as ``failure`` events, summarised on the server.

``wait`` returns what ``scheduler.verbs.follow.wait`` returns (a ``Waited``), its tasks being
what the end events say (:class:`Ended`), so ``scheduler.cli.waiting`` reports the same lines.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from scheduler.errors import FleetschedError
from scheduler.progress import EXIT_CANCELLED, EXIT_FAILED, EXIT_SUCCEEDED
from scheduler.remote.client import Client, RemoteUnavailableError
from scheduler.verbs.follow import Waited

__all__ = ["Ended", "EndedProgress", "record_behind", "wait"]


@dataclass(frozen=True)
class EndedProgress:
    """A task's end as the server summarised it: its sentence, and whether a rollout stopped."""

    text: str
    state: str

    def sentence(self) -> str:
        return self.text

    @property
    def stopped(self) -> bool:
        return self.state == "stopped"


@dataclass(frozen=True)
class Ended:
    """One task's end (``task_id``, ``progress``, ``wave_line()``) as ``report_wait`` reads it."""

    task_id: str
    progress: EndedProgress
    wave: str | None

    def wave_line(self) -> str:
        return self.wave or ""


def _follow(stores: Client, task_id: str, deadline: float | None,
            failures: list[dict[str, Any]]) -> tuple[Ended, int, bool]:
    wave = None
    left = None if deadline is None else max(0.1, deadline - time.monotonic())
    for event, data in stores.events(f"/tasks/{task_id}/events", wait_s=left):
        if event == "progress":
            wave = data.get("wave")
        elif event == "failure":
            failures.append({"host": data["host"], "state": data["kind"], "job": data["job"],
                             "exit_code": data["exit_code"], "lines": data["last_lines"]})
        elif event == "end":
            ended = Ended(task_id, EndedProgress(data["sentence"], data["state"]), wave)
            return ended, int(data["exit_code"]), bool(data["record_behind"])
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError
    raise RemoteUnavailableError(f"the server {stores.url} ended task {task_id}'s event "
                                 "stream before the task ended",
                                 hint=f"wait again: fleetsched tasks wait {task_id}")


def wait(stores: Client, ids: list[str], *, timeout_s: float | None) -> Waited:
    """Block until every task ends (one stream at a time: the slowest decides anyway)."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    failures: list[dict[str, Any]] = []
    ended: list[Any] = []
    codes: list[int] = []
    behind = False
    for task_id in ids:
        try:
            done, code, late = _follow(stores, task_id, deadline, failures)
        except TimeoutError:
            raise FleetschedError(f"tasks {', '.join(ids)} still running after {timeout_s:g}s",
                                  hint="wait again, or see fleetsched top") from None
        ended.append(done)
        codes.append(code)
        behind = behind or late
    code = (EXIT_FAILED if EXIT_FAILED in codes else
            EXIT_CANCELLED if EXIT_CANCELLED in codes else EXIT_SUCCEEDED)
    return Waited(tasks=ended, exit_code=code, failures=failures, record_behind=behind)


def record_behind(_stores: Client, _recorded_done: dict[int, int]) -> list[int]:
    """Not known through the API (the queue is the server's): nothing to say."""
    return []
