"""``tasks watch``, ``tasks wait`` and ``submit --wait`` over the API.

1. ``wait``: each task followed on its Server-Sent Events stream (``GET /tasks/{id}/events``)
   until its ``end`` event, which carries the exit code ``tasks wait`` gives; the failures
   come as ``failure`` events, summarised on the server. It returns what
   ``scheduler.verbs.follow.wait`` returns (a ``Waited``), its tasks being what the end events
   say (:class:`Ended`), so ``scheduler.cli.waiting`` reports the same lines.
2. ``progress``: the tasks' numbers now (``GET /tasks/{id}/progress``, the local verb run on
   the server), as ``TaskProgress``;
3. ``follow`` (``tasks watch``): the bars drawn by the loop direct mode draws with
   (``scheduler.views.live.draw``), from ``progress`` polled every interval (with the hosts
   running now, as the server reads them); the failures from each task's event stream
   (:class:`StreamFeed`, one reader thread per task), drawn as direct mode draws them, the
   last ones once the stream's end event says the record has them.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scheduler.errors import FleetschedError
from scheduler.progress import EXIT_CANCELLED, EXIT_FAILED, EXIT_SUCCEEDED, not_finished
from scheduler.remote.client import Client, RemoteUnavailableError
from scheduler.verbs.follow import RECORD_WAIT_S, Followed, Waited, exit_code

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console

    from scheduler.views import TaskProgress

__all__ = ["Ended", "EndedProgress", "StreamFeed", "follow", "progress", "record_behind",
           "wait"]


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
            raise _timed_out(stores, ids, timeout_s or 0) from None
        ended.append(done)
        codes.append(code)
        behind = behind or late
    code = (EXIT_FAILED if EXIT_FAILED in codes else
            EXIT_CANCELLED if EXIT_CANCELLED in codes else EXIT_SUCCEEDED)
    return Waited(tasks=ended, exit_code=code, failures=failures, record_behind=behind)


def _timed_out(stores: Client, ids: list[str], timeout_s: float) -> FleetschedError:
    """The error of a wait that gave up, with the jobs left as the server counts them now."""
    try:
        now = [t.progress for t in progress(stores, ids)]
    except FleetschedError:  # a task ended and left meanwhile, the server went away: no counts
        now = []
    return FleetschedError(not_finished(ids, timeout_s, now),
                           hint="wait again, or see fleetsched top")


def record_behind(_stores: Client, _recorded_done: dict[int, int]) -> list[int]:
    """Not known through the API (the queue is the server's): nothing to say."""
    return []


def progress(stores: Client, ids: list[str]) -> list[TaskProgress]:
    """The tasks' progress, read once on the server (``NotFoundError`` for a task it does not
    know)."""
    from scheduler.remote.status import task_progress

    return [task_progress(stores.get(f"/tasks/{tid}/progress")) for tid in ids]


class StreamFeed:
    """The failures of some tasks from their event streams, each returned once by ``poll``
    (``scheduler.views.live.Feed``), oldest first per task.

    1. One daemon thread per task reads its stream (``Client.events``) and keeps its
       ``failure`` events, and its ``end`` event when it comes;
    2. ``poll`` hands out the failures not yet returned;
    3. ``settle`` waits, up to a deadline, for every stream's end (the server sends it once the
       record has the task's last results, or after ``RECORD_WAIT_S``), and says whether the
       record was behind for any task; ``problems``: why a stream could not be read (its
       failures are not listed; the bars, read on their own, still end the watch).
    """

    def __init__(self, stores: Client, task_ids: list[str]) -> None:
        self._lock = threading.Lock()
        self._failures: list[dict[str, Any]] = []
        self._returned = 0
        self._ends: dict[str, dict[str, Any]] = {}
        self.problems: list[str] = []
        self._threads = [threading.Thread(target=self._read, args=(stores, tid), daemon=True,
                                          name=f"follow-{tid}") for tid in task_ids]
        for thread in self._threads:
            thread.start()

    def _read(self, stores: Client, task_id: str) -> None:
        try:
            for event, data in stores.events(f"/tasks/{task_id}/events"):
                if event == "failure":
                    with self._lock:
                        self._failures.append({
                            "kind": data["kind"], "job": data["job"], "host": data["host"],
                            "exit_code": data["exit_code"], "error": data["error"],
                            "last_lines": data["last_lines"]})
                elif event == "end":
                    with self._lock:
                        self._ends[task_id] = data
                    return
        except Exception as exc:  # noqa: BLE001 - a reader thread never prints a traceback
            with self._lock:
                self.problems.append(str(exc) or type(exc).__name__)

    def poll(self) -> list[dict[str, Any]]:
        with self._lock:
            new = self._failures[self._returned:]
            self._returned = len(self._failures)
        return new

    def settle(self, timeout_s: float) -> bool:
        """Wait for the streams' ends; True when the record had every task's last results."""
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            return not any(e.get("record_behind") for e in self._ends.values()) and (
                len(self._ends) + len(self.problems) == len(self._threads))


def follow(stores: Client, ids: list[str], *, interval_s: float, timeout_s: float | None,
           console: Console | None = None, note: Callable[[str], None] = lambda _l: None
           ) -> Followed:
    """Wait until every task has ended, drawing bars and failures on ``console`` as
    ``scheduler.verbs.follow.follow`` does (see the module docstring)."""
    import io

    from rich.console import Console

    from scheduler.views.live import draw

    console = console if console is not None else Console(file=io.StringIO(), markup=False)
    pending = [progress(stores, ids)]  # an unknown task is refused before anything is drawn
    feed = StreamFeed(stores, ids)

    def read() -> list[TaskProgress]:
        return pending.pop() if pending else progress(stores, ids)

    def settle(_ended: list[TaskProgress]) -> None:
        # As direct mode: the failures come from the record, which the server's end event
        # says has the last results (or has not, after RECORD_WAIT_S), before the last frame
        if not feed.settle(RECORD_WAIT_S + 5):
            note("warning: the SQL record is behind (is a recorder running?): "
                 "failures may be missing below")
        for problem in dict.fromkeys(feed.problems):
            note(f"warning: failures will not be listed ({problem})")

    try:
        tasks, shown = draw(read, ids, console, feed=feed, interval_s=interval_s,
                            timeout_s=timeout_s, settle=settle)
    except TimeoutError:
        raise _timed_out(stores, ids, timeout_s or 0) from None
    return Followed(tasks=tasks, exit_code=exit_code(tasks), shown_failures=shown)
