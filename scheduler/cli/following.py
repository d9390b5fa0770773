"""Printing a task's output as its hosts print it: ``tasks output --follow`` and ``submit
--follow`` (the events are ``scheduler.verbs.liveoutput``'s, in remote mode
``scheduler.remote.liveoutput``'s).

A line goes to stdout as ``host | line`` (``host | [stderr] line`` for stderr), as it arrives;
with ``-o json`` each event is one JSON object on its own line. Notes, gaps and the task's end
go to stderr; the exit code is the one ``tasks wait`` gives. With a timeout (``tasks output
--follow --timeout``, ``submit --follow --wait-timeout``), a task not ended by then is one
line and exit code 1, as ``tasks wait --timeout`` says it, whether lines still come or none
do (the events are read in a thread of their own; the main thread keeps the time).
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from scheduler.cli import output
from scheduler.cli.context import verbs_for
from scheduler.errors import FleetschedError, ValidationError

__all__ = ["follow_and_print"]


def follow_and_print(stores: Any, task_id: int, *, host: str | None = None,
                     grep: str | None = None,
                     fmt: output.OutputFormat = output.OutputFormat.table,
                     timeout_s: float | None = None) -> int:
    """Print the task's output events until it ends; its exit code (``tasks wait``'s).
    ``timeout_s``: give up then (``FleetschedError``, exit code 1, as ``tasks wait``)."""
    if fmt is output.OutputFormat.csv:
        raise ValidationError("--follow prints lines as they come: -o table or -o json",
                              hint="without --follow, -o csv prints the recorded output")
    stop = threading.Event()
    events = verbs_for(stores, "liveoutput").follow_output(stores, task_id, host=host,
                                                            grep=grep, stop=stop.is_set)
    if timeout_s is not None:
        events = _until(events, stop, time.monotonic() + timeout_s, stores, task_id, timeout_s)
    code = 1
    for event in events:
        kind = event["kind"]
        if fmt is output.OutputFormat.json:
            sys.stdout.write(json.dumps(event) + "\n")
            sys.stdout.flush()
        elif kind == "line":
            mark = "[stderr] " if event["stream"] == "err" else ""
            output.emit_line(f"{event['host']} | {mark}{event['line']}")
            sys.stdout.flush()
        elif kind == "gap":
            output.info(f"{event['host']}: {event['count']} line(s) were not streamed (the "
                        f"worker was behind); `fleetsched tasks output {task_id} --host "
                        f"{event['host']}` shows the recorded output")
        elif kind == "note":
            output.info(event["text"])
        if kind == "end":
            if fmt is not output.OutputFormat.json:
                output.info(f"task {task_id}: {event['sentence']}")
            code = int(event["exit_code"])
    return code


_DONE = object()


def _until(events: Iterator[dict[str, Any]], stop: threading.Event, deadline: float,
           stores: Any, task_id: int, timeout_s: float) -> Iterator[dict[str, Any]]:
    """``events`` until ``deadline``; then the error ``tasks wait --timeout`` gives. They are
    read in a daemon thread (a read may block while no line comes), which ``stop`` ends."""
    got: queue.Queue[Any] = queue.Queue()

    def read() -> None:
        try:
            for event in events:
                got.put(event)
        except BaseException as exc:  # noqa: BLE001 - given to the main thread, raised there
            got.put(exc)
        got.put(_DONE)

    threading.Thread(target=read, daemon=True, name=f"follow-output-{task_id}").start()
    try:
        while True:
            try:
                item = got.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise _timed_out(stores, task_id, timeout_s) from None
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()


def _timed_out(stores: Any, task_id: int, timeout_s: float) -> FleetschedError:
    """The error of a follow that gave up: ``tasks wait --timeout``'s, with the jobs left."""
    from scheduler.progress import not_finished

    try:
        now = [t.progress for t in verbs_for(stores, "follow").progress(stores, [str(task_id)])]
    except FleetschedError:  # the task left, the server went away: no counts
        now = []
    return FleetschedError(not_finished([str(task_id)], timeout_s, now),
                           hint=f"follow again, or wait: fleetsched tasks wait {task_id}")
