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

Each follower reads the task's Redis stream in a thread of its own (an ``XREAD`` that blocks
at most ``POLL_S``), which ends within a read of the follower leaving.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from scheduler.principal import Principal
from scheduler.server.auth import allowed, stores_of
from scheduler.server.ids import TaskId
from scheduler.verbs import liveoutput

__all__ = ["router"]

router = APIRouter(tags=["tasks"])

_END = object()


def _next(events: Iterator[dict[str, Any]]) -> Any:
    return next(events, _END)


async def _frames(events: Iterator[dict[str, Any]], stop: threading.Event) -> AsyncIterator[str]:
    try:
        yield "retry: 2000\n\n"
        while True:
            event = await asyncio.to_thread(_next, events)
            if event is _END:
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


@router.get("/tasks/{task_id}/output/stream",
            summary="Follow a task's output: each host's lines as they are printed, as "
                    "Server-Sent Events (line, gap, note, then end with the exit code)",
            response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}}}})
async def task_output_stream(
        request: Request, task_id: TaskId,
        who: Annotated[Principal, Depends(allowed("tasks.output"))],
        host: Annotated[str | None, Query(min_length=1, description="Only this host's lines.")] = None,
        grep: Annotated[str | None, Query(description="Only lines matching this regular "
                                          "expression.")] = None) -> StreamingResponse:
    stores = stores_of(request)
    stop = threading.Event()
    heartbeat_s = stores.settings.server_stream_heartbeat_ms / 1000
    events = await asyncio.to_thread(
        liveoutput.follow_output, stores, task_id, host=host, grep=grep, tenant=who.tenant,
        stop=stop.is_set, idle_s=heartbeat_s)
    return StreamingResponse(_frames(events, stop), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
