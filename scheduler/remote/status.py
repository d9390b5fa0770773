"""``status`` and ``top`` over the API: the health findings of ``GET /status``, as ``Finding``
objects, and the queue's frames of ``GET /status/queue``, as ``QueueSnapshot`` objects."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from scheduler.remote.client import Client

if TYPE_CHECKING:
    from scheduler.health.checks import Finding
    from scheduler.views import QueueSnapshot, TaskProgress

__all__ = ["frames", "snapshot", "status", "task_progress"]


def status(stores: Client) -> list[Finding]:
    """The server's health checks (``scheduler.verbs.status.status`` run there)."""
    from scheduler.health.checks import Finding

    return [Finding(**f) for f in stores.get("/status")["findings"]]


def _fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def task_progress(data: dict[str, Any]) -> TaskProgress:
    """A task's numbers as the server wrote them (``TaskProgress.as_dict``: its ``state`` is
    the state the counts make, the field's value is ``recorded_state``), rebuilt."""
    from scheduler.views import TaskProgress

    return TaskProgress(**{**_fields(TaskProgress, data), "state": data["recorded_state"]})


def snapshot(stores: Client) -> QueueSnapshot:
    """One frame of the queue (``scheduler.verbs.status.snapshot`` run on the server)."""
    from scheduler.views import QueueSnapshot

    frame = stores.get("/status/queue")
    snap = QueueSnapshot(**_fields(QueueSnapshot, frame))
    snap.tasks = [task_progress(t) for t in frame["tasks"]]
    return snap


@contextmanager
def frames(stores: Client) -> Iterator[Callable[[], QueueSnapshot]]:
    """``take()``: a frame of the queue each time it is called (one request each)."""
    yield lambda: snapshot(stores)
