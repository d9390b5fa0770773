"""The request middleware: each request is timed once, from its arrival to its last byte, and
told to the metrics (``scheduler.server.metrics``) and the access log
(``scheduler.server.access_log``).

A plain ASGI middleware rather than Starlette's ``BaseHTTPMiddleware``: it adds no task and no
copy of the response per request, and a streamed answer (SSE) is measured to its end. The
route template is read from the scope after routing (``template``);
the principal from the request's state, where ``scheduler.server.auth`` leaves it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from scheduler.server import access_log

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from scheduler.server.metrics import ServerMetrics

__all__ = ["Observe", "template"]

UNMATCHED = "unmatched"


def template(scope: Scope) -> str:
    """The matched route's path template, prefixes included (``/api/v1/tasks/{task_id}``).

    FastAPI (0.16x) keeps an included router's routes unprefixed and puts the route as matched,
    prefixes and all, in ``scope["fastapi"]["effective_route_context"]``; ``route.path_format`` is the whole
    template only for a route of the app itself (``/metrics``)."""
    matched = (scope.get("fastapi") or {}).get("effective_route_context") or scope.get("route")
    return getattr(matched, "path", None) or UNMATCHED


class Observe:
    """Times every HTTP request; tells ``metrics`` and the access log."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        state: dict[str, Any] = scope.setdefault("state", {})
        status = 500  # if the app raises before answering, the server answers 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - start
            route = template(scope)
            self.metrics.observe(scope["method"], route, status, seconds)
            client = scope.get("client")
            access_log.write(method=scope["method"], route=route, path=scope["path"],
                             status=status, seconds=seconds,
                             client=client[0] if client else None,
                             principal=state.get("principal"))
