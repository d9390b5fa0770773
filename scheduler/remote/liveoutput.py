"""``tasks output --follow`` and ``submit --follow`` over the API: the events of
``GET /tasks/{id}/output/stream`` (Server-Sent Events, ``scheduler.server.output_stream``), as
``scheduler.verbs.liveoutput.follow_output`` yields them in direct mode, so
``scheduler.cli.following`` prints the same lines."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlencode

from scheduler.errors import UnauthenticatedError
from scheduler.remote.client import Client, RemoteUnavailableError

__all__ = ["follow_output"]


def follow_output(stores: Client, task_id: int, *, host: str | None = None,
                  grep: str | None = None, stop: Callable[[], bool] | None = None
                  ) -> Iterator[dict[str, Any]]:
    """The task's output events, until its ``end`` (the server chose what this token sees).
    ``stop``: asked at each event; True ends them early (no ``end``), as in direct mode."""
    query = urlencode({k: v for k, v in (("host", host), ("grep", grep)) if v is not None})
    path = f"/tasks/{int(task_id)}/output/stream" + (f"?{query}" if query else "")
    for event, data in stores.events(path):
        if stop is not None and stop():
            return
        if event == "error":  # the token was revoked or expired while following
            raise UnauthenticatedError(str(data.get("message") or "the server ended the stream"),
                                       hint=data.get("hint"))
        yield {"kind": event, **data}
        if event == "end":
            return
    raise RemoteUnavailableError(f"the server {stores.url} ended task {task_id}'s output "
                                 "stream before the task ended",
                                 hint=f"follow again: fleetsched tasks output {task_id} --follow")
