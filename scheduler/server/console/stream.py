"""Live pages: a page's changing parts as Server-Sent Events of HTML rendered on the server.

``fragments(request, read)`` calls ``read()`` (in a thread: it asks Redis and the record)
every ``interval_s`` and sends each fragment whose HTML changed since the last send, as a
``fragment`` event whose data is the element's id and then its HTML; the page's script
(``static/console.js``) puts it in the element of that id. Only what is shown travels: a summary and the rows in view,
never a 10,000-host table. The stream ends when the browser leaves, when ``read`` says
``done`` (the task ended) or when the session ends. A stream that sent nothing for the setting
``server_stream_heartbeat_ms`` (15 s by default, as the API's event streams) gets a
``: still here`` comment, so that proxies keep it open; it checks its session that often too
(one lookup per stream and interval), so a logout or a revoked token stops what it was
watching within one heartbeat.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import StreamingResponse

from scheduler.errors import FleetschedError
from scheduler.server.auth import stores_of
from scheduler.server.console.web import SignInRequired, page_headers, viewer

__all__ = ["Frame", "fragments"]

# What one read gives: the HTML of each fragment by its element id, and whether the stream
# may end after sending them.
Frame = tuple[dict[str, str], bool]


def _event(name: str, html: str) -> str:
    """A ``fragment`` event: its first data line the element's id, the rest its HTML (an
    ``end`` event has no element)."""
    if name == "end":
        return "event: end\ndata: \n\n"
    data = "\n".join(f"data: {line}" for line in [name, *html.splitlines()])
    return f"event: fragment\n{data}\n\n"


def fragments(request: Request, read: Callable[[], Frame], *,
              interval_s: float = 1.0) -> StreamingResponse:
    """The response that streams ``read``'s fragments (see the module docstring)."""
    heartbeat_s = stores_of(request).settings.server_stream_heartbeat_ms / 1000

    async def events() -> AsyncIterator[str]:
        sent: dict[str, str] = {}
        quiet_since = checked = time.monotonic()
        yield "retry: 3000\n\n"
        while not await request.is_disconnected():
            try:
                parts, done = await asyncio.to_thread(read)
            except FleetschedError as exc:  # Redis or the record away: say so, keep trying
                parts, done = {"problem": f"<p class=\"problem\" role=\"status\">{_esc(exc)}</p>"}, False
            else:
                parts = {"problem": "", **parts}
            for name, html in parts.items():
                if sent.get(name) != html:
                    sent[name] = html
                    quiet_since = time.monotonic()
                    yield _event(name, html)
            if done:
                yield _event("end", "")
                return
            now = time.monotonic()
            if now - quiet_since >= heartbeat_s:
                quiet_since = now
                yield ": still here\n\n"
            if now - checked >= heartbeat_s:
                checked = now
                try:
                    await asyncio.to_thread(viewer, request)
                except SignInRequired:
                    yield _event("end", "")
                    return
            await asyncio.sleep(interval_s)

    headers: dict[str, Any] = {**page_headers(), "cache-control": "no-cache",
                               "x-accel-buffering": "no"}
    return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


def _esc(exc: Exception) -> str:
    from markupsafe import escape

    return str(escape(str(exc)))
