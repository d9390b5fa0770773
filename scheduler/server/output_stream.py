"""``GET /api/v1/tasks/{id}/output/stream``: a task's output as its hosts print it, as
Server-Sent Events (``tasks output --follow`` and ``submit --follow`` over HTTP).

The events are ``scheduler.verbs.liveoutput.follow_output``'s, one SSE event each with its kind
as the event name: ``line`` (host, job, attempt, stream, line: secrets already masked by the
worker), ``gap``, ``note``, and last ``end`` (the exit code ``tasks wait`` gives, the
sentence); a comment line on a stream quiet for ``server_stream_heartbeat_ms``. The same role as
``GET /tasks/{id}/output`` (``tasks.output``); a customer follows only a task with jobs of its
own (another's is a 404), only its own hosts' lines, and none where the task does not show
output to customers (``record.tenancy.output_shown``: a note, then the end). Refusals (no such
task, host or customer's task, a bad ``grep``) come before the stream starts, as errors.

Each follower reads the task's Redis stream (an ``XREAD`` that blocks at most ``POLL_S``) in
the output followers' own threads (``stream_guard.output_pool``), never in the pool the task
event streams and the console's live pages share, so that no number of output followers
slows those; it ends within a read of the follower leaving. One principal (token, person)
holds at most ``server_output_streams_per_principal`` of these streams at once; one more is a
429. At each heartbeat interval the stream checks its credentials again, as the request was
checked: a token revoked or expired since (a session ended, a role that lost ``tasks.output``)
gets an ``error`` event (its message and hint) and the stream ends.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.server.ids import TaskId
from scheduler.server.stream_guard import (
    output_pool,
    principal_key,
    slots_of,
    still_allowed,
    too_many,
)
from scheduler.verbs import liveoutput

__all__ = ["router"]

router = APIRouter(tags=["tasks"])

_END = object()
VERB = "tasks.output"
REVOKED = {"message": "the credentials this stream was opened with are no longer good "
                      "(revoked, expired, signed out, or no longer allowed tasks.output)",
           "hint": "follow again with a valid token"}


def _next(events: Iterator[dict[str, Any]]) -> Any:
    return next(events, _END)


async def _frames(request: Request, events: Iterator[dict[str, Any]], stop: threading.Event,
                  heartbeat_s: float) -> AsyncIterator[str]:
    loop = asyncio.get_running_loop()
    checked = loop.time()
    try:
        yield "retry: 2000\n\n"
        while True:
            event = await loop.run_in_executor(output_pool(), _next, events)
            if event is _END:
                return
            if loop.time() - checked >= heartbeat_s:
                checked = loop.time()
                if not await asyncio.to_thread(still_allowed, request, VERB):
                    yield f"event: error\ndata: {json.dumps(REVOKED, separators=(',', ':'))}\n\n"
                    return
            kind = event["kind"]
            if kind == "idle":
                yield ": heartbeat\n\n"
                continue
            data = {k: v for k, v in event.items() if k != "kind"}
            yield f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n"
            if kind == "end":
                return
    finally:
        stop.set()  # the reading thread ends at its next read


class _OutputStream(StreamingResponse):
    """A follower's stream, which gives back its principal's slot however it ends (also when
    its first byte never went out)."""

    def __init__(self, frames: AsyncIterator[str], *, done: Any) -> None:
        super().__init__(frames, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.done = done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.done()


@router.get("/tasks/{task_id}/output/stream",
            summary="Follow a task's output: each host's lines as they are printed, as "
                    "Server-Sent Events (line, gap, note, then end with the exit code)",
            response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}}},
                       429: {"description": "This principal follows as many output streams "
                                            "as it may (server_output_streams_per_principal)"}})
async def task_output_stream(
        request: Request, task_id: TaskId,
        who: Annotated[Principal, Depends(allowed("tasks.output"))],
        host: Annotated[str | None, Query(min_length=1, description="Only this host's lines.")] = None,
        grep: Annotated[str | None, Query(description="Only lines matching this regular "
                                          "expression.")] = None
        ) -> Response:
    stores = stores_of(request)
    cap = stores.settings.server_output_streams_per_principal
    slots, key = slots_of(request), principal_key(who)
    if not slots.take(key, cap):
        return too_many(cap)
    stop = threading.Event()
    heartbeat_s = stores.settings.server_stream_heartbeat_ms / 1000
    try:
        events = await asyncio.to_thread(
            liveoutput.follow_output, stores, task_id, host=host, grep=grep, tenant=who.tenant,
            stop=stop.is_set, idle_s=heartbeat_s)
    except BaseException:
        slots.give_back(key)
        raise
    return _OutputStream(_frames(request, events, stop, heartbeat_s),
                         done=lambda: slots.give_back(key))
