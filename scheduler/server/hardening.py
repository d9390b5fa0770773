"""What every request meets before a route: limits and headers (issue 28 section 5).

1. Failed authentications (any 401 answer) are counted per client address; past
   ``AUTH_FAILURES_PER_MINUTE`` in the current minute, every request from that address is
   answered 429 with ``Retry-After`` until the minute ends, before it reaches a route, the
   record or Redis. Each failure is logged with the address, method and path: never a header,
   a query string or a body, where a token could be.
2. A request body past ``MAX_BODY_BYTES`` is refused 413 before it is parsed: at once when its
   ``Content-Length`` says so, else as soon as the bytes read pass the limit (a chunked body).
3. Security headers on every answer: ``nosniff``, no framing, no referrer, a content security
   policy that lets a JSON answer load nothing, and ``Cache-Control: no-store`` unless the
   route chose its own.
4. An API request whose path or query string holds a NUL character is refused 400 before a
   route: PostgreSQL takes none in a text, so a name or filter with one would reach the
   record as an error (the web console refuses it on its pages, ``console.web``).
5. Failed authentications (every 401, and a single sign-on login refused 403) are recorded
   as ``auth_fail`` audit events, as few as ``scheduler.access.refusals`` allows: the first
   of an address's minute at once (what the route that refused it left in the request's
   state as ``refused``: a callable describing what was presented, run only then), the rest
   counted into one event after the minute.

The counts live in this process (one server process per address is the usual deployment;
several processes each count their own, so the limit is per process). A plain ASGI middleware,
like ``scheduler.server.observe``: no task or copy per request, and a stream passes through.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from scheduler.access.refusals import Refusal, RefusalLog
from scheduler.server.errors import body
from scheduler.server.headers import CACHE_CONTROL, SECURITY_HEADERS

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from scheduler.verbs.stores import Stores

__all__ = ["AUTH_FAILURES_PER_MINUTE", "MAX_BODY_BYTES", "Hardening"]

log = logging.getLogger("fleetsched.server")

AUTH_FAILURES_PER_MINUTE = 20
MAX_BODY_BYTES = 1024 * 1024  # a task file of 10,000 hosts fits; a submit is far smaller
API = "/api/"
WINDOW_S = 60
TRACKED_ADDRESSES = 10_000  # past this many, the addresses of ended minutes are forgotten


class BodyTooLarge(Exception):
    """Raised into the app by ``receive`` once a body passes the limit."""


class Failures:
    """Failed authentications per address in the current minute (a fixed window)."""

    def __init__(self, limit: int = AUTH_FAILURES_PER_MINUTE) -> None:
        self.limit = limit
        self._seen: dict[str, tuple[float, int]] = {}

    def retry_after(self, address: str, now: float) -> int:
        """Seconds until ``address`` may try again; 0 when it may now."""
        start, count = self._seen.get(address, (now, 0))
        if now - start >= WINDOW_S or count < self.limit:
            return 0
        return max(1, int(start + WINDOW_S - now + 0.999))

    def failed(self, address: str, now: float) -> int:
        """Count one failure; returns the count of this minute."""
        if len(self._seen) >= TRACKED_ADDRESSES:
            self._seen = {a: v for a, v in self._seen.items() if now - v[0] < WINDOW_S}
        start, count = self._seen.get(address, (now, 0))
        if now - start >= WINDOW_S:
            start, count = now, 0
        self._seen[address] = (start, count + 1)
        return count + 1


async def _answer(send: Send, status: int, message: str, hint: str | None,
                  extra: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    payload = json.dumps(body(1, "HTTPError", message, hint)).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
        *extra, *SECURITY_HEADERS, CACHE_CONTROL]})
    await send({"type": "http.response.body", "body": payload})


class Hardening:
    """The limits and headers above, around the whole application."""

    def __init__(self, app: ASGIApp, max_body: int = MAX_BODY_BYTES,
                 failures: Failures | None = None) -> None:
        self.app = app
        self.max_body = max_body
        self.failures = failures or Failures()
        self.refusals = RefusalLog()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        address = client[0] if client else "unknown"
        ended = self.refusals.ended(time.time())
        if ended:
            await _record(scope, ended)
        wait = self.failures.retry_after(address, time.monotonic())
        if wait:
            await _answer(send, 429, "too many failed authentications from this address",
                          f"wait {wait} s", ((b"retry-after", str(wait).encode()),))
            return
        if scope["path"].startswith(API) and (
                "\x00" in scope["path"] or b"%00" in scope.get("query_string", b"")):
            await _answer(send, 400, "the address holds a NUL character", None)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_body):
            await self._too_large(send, declared.isdigit())
            return
        await self._pass(scope, receive, send, address)

    async def _too_large(self, send: Send, declared_ok: bool = True) -> None:
        if not declared_ok:
            await _answer(send, 400, "the Content-Length header is not a number", None)
            return
        await _answer(send, 413, f"the request body is over {self.max_body} bytes",
                      "send less per request")

    async def _pass(self, scope: Scope, receive: Receive, send: Send, address: str) -> None:
        read = 0
        over = False
        started = False

        async def receiving() -> Message:
            nonlocal read, over
            message = await receive()
            read += len(message.get("body", b""))
            if read > self.max_body:
                over = True
                raise BodyTooLarge
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            if over:  # the app's answer to a body it could not read is replaced by a 413
                if not started:
                    started = True
                    await self._too_large(send)
                return
            if message["type"] == "http.response.start":
                started = True
                message = self._headed(message, scope, address)
                await self._refused(message["status"], scope, address)
            await send(message)

        try:
            await self.app(scope, receiving, sending)
        except BodyTooLarge:
            if not started:
                started = True
                await self._too_large(send)

    def _headed(self, message: Message, scope: Scope, address: str) -> Message:
        headers = list(message.get("headers", []))
        names = {name.lower() for name, _ in headers}
        headers += [h for h in SECURITY_HEADERS if h[0] not in names]
        if CACHE_CONTROL[0] not in names:
            headers.append(CACHE_CONTROL)
        if message["status"] == 401:
            count = self.failures.failed(address, time.monotonic())
            log.warning("authentication refused from %s: %s %r (%d this minute)", address,
                        scope["method"], scope["path"], count)
        return {**message, "headers": headers}

    async def _refused(self, status: int, scope: Scope, address: str) -> None:
        """Record a failed authentication (responsibility 5)."""
        state: dict[str, Any] = scope.get("state") or {}
        describe = state.get("refused")
        if status != 401 and not (status == 403 and describe is not None):
            return
        first = self.refusals.refused(address, time.time())
        if first is None:
            return
        where = {"method": scope["method"], "path": scope["path"]}
        await _record(scope, [first], describe or (lambda: {"presented": "nothing"}), where)


async def _record(scope: Scope, refusals: list[Refusal],
                  describe: Callable[[], dict[str, Any]] | None = None,
                  where: dict[str, str] | None = None) -> None:
    """Write the events in a thread (the record is not asked on the event loop); a record
    that cannot be written is logged, never the request's failure."""
    from scheduler.verbs.access import record_refusals

    def write() -> None:
        stores: Stores = scope["app"].state.stores
        rows = refusals
        if describe is not None:
            rows = [replace(r, detail={**describe(), **(where or {})}) for r in refusals]
        record_refusals(stores, rows)

    try:
        await asyncio.to_thread(write)
    except Exception as exc:  # noqa: BLE001 - the audit record away: say so, answer anyway
        from scheduler.redact import redact_exception

        log.error("failed authentications could not be recorded: %s: %s",
                  type(exc).__name__, redact_exception(exc))
