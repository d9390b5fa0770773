"""A brief cache of the API's busiest reads: the task list, a task's detail and its job pages,
which dashboards poll and which a 10,000-host task makes costly (issue 28, "Performance").

One answer is kept per (route, query, role, tenant) for ``server_read_cache_ms`` (1 s by
default), as the JSON bytes sent, so 50 clients polling one task cost the record one query a
second instead of 50. What it may serve, and what it never does:

- an answer at most ``server_read_cache_ms`` old (the ``Age`` header says how old), or the
  one a request computing it now brings; no answer computed before or during a write this
  process served is served after it (a request but GET and HEAD, once authenticated and
  allowed, is a write: a client reads its own writes; a refused one changes nothing);
- a request that says ``Cache-Control: no-cache`` is computed afresh (and refreshes the
  entry): the CLI in remote mode always says it, so it prints what direct mode prints;
- when an entry runs out while many ask for it, one request computes it and the others wait
  for that answer (no stampede on the record); what is kept is bounded (entries and bytes),
  and what failed leaves nothing behind;
- authentication and authorization still run on every request: a revoked token is refused
  at once, and an answer is only shared by principals of one role and tenant.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse

from scheduler.principal import Principal

__all__ = ["ReadCache", "WriteGeneration", "cached", "write_begins"]

MAX_ENTRIES = 256
MAX_BYTES = 32 * 1024 * 1024  # of kept answers, whatever their number


@dataclass(frozen=True)
class _Entry:
    body: bytes
    made: float  # time.monotonic() when its computing began
    generation: int


class _Flight:
    """One computing of a key that others wait for: its answer, or None when it failed or
    may be older than a write (the waiters then compute their own, side by side)."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.entry: _Entry | None = None


class ReadCache:
    """Answers by key for ``ttl_s``; 0 keeps nothing (every request computes)."""

    def __init__(self, ttl_s: float, max_entries: int = MAX_ENTRIES,
                 max_bytes: int = MAX_BYTES) -> None:
        self.ttl_s = ttl_s
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self.generation = 0  # bumped when a write ends
        self.writing = 0  # writes begun and not ended
        self._entries: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self._bytes = 0
        self._guard = threading.Lock()
        self._flights: dict[tuple[Any, ...], _Flight] = {}
        self.hits = self.misses = 0

    def write_began(self) -> None:
        with self._guard:
            self.writing += 1

    def write_ended(self) -> None:
        with self._guard:
            self.writing -= 1
            self.generation += 1

    def new_generation(self) -> None:
        """A write began and ended."""
        self.write_began()
        self.write_ended()

    def _fresh(self, key: tuple[Any, ...]) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is None or entry.generation != self.generation:
            return None
        if time.monotonic() - entry.made >= self.ttl_s:
            return None
        self._entries.move_to_end(key)
        return entry

    def answer(self, key: tuple[Any, ...], compute: Callable[[], Any], *,
               fresh: bool = False) -> tuple[bytes, float | None]:
        """(the JSON body, its age in seconds or None when computed for this request) for
        ``key``: the kept one while it is fresh, or the one a request computing it now
        brings, else ``compute()``'s value, rendered as FastAPI renders a route's value."""
        if self.ttl_s <= 0:
            return _render(compute()), None
        with self._guard:
            entry = None if fresh else self._fresh(key)
            if entry is not None:
                self.hits += 1
                return entry.body, time.monotonic() - entry.made
            flight = None if fresh else self._flights.get(key)
            leader = flight is None
            if leader:
                flight = _Flight()
                if not fresh:
                    self._flights[key] = flight
            self.misses += leader
            generation, quiet = self.generation, self.writing == 0
        assert flight is not None
        if not leader:  # another request computes it: take its answer, whatever its age
            flight.done.wait()
            if flight.entry is not None:
                with self._guard:
                    self.hits += 1
                return flight.entry.body, time.monotonic() - flight.entry.made
            return _render(compute()), None  # it failed or a write came: each its own
        made = time.monotonic()
        try:
            body = _render(compute())
            with self._guard:
                if quiet and self.writing == 0 and generation == self.generation:
                    flight.entry = _Entry(body, made, generation)
                    self._keep(key, flight.entry)
            return body, None
        finally:
            with self._guard:
                if self._flights.get(key) is flight:
                    del self._flights[key]
            flight.done.set()

    def _keep(self, key: tuple[Any, ...], entry: _Entry) -> None:
        """Under the guard: keep ``entry``, dropping what ran out and then the least recently
        used past the bounds."""
        old = self._entries.pop(key, None)
        self._bytes -= len(old.body) if old else 0
        self._entries[key] = entry
        self._bytes += len(entry.body)
        now = time.monotonic()
        for k in [k for k, e in self._entries.items() if now - e.made >= self.ttl_s]:
            self._bytes -= len(self._entries.pop(k).body)
        while len(self._entries) > self.max_entries or self._bytes > self.max_bytes:
            self._bytes -= len(self._entries.popitem(last=False)[1].body)


def _render(value: Any) -> bytes:
    return JSONResponse(jsonable_encoder(value)).body


def cached(request: Request, who: Principal, compute: Callable[[], Any]) -> Response:
    """The route's answer through the app's read cache (``compute`` makes it afresh)."""
    cache: ReadCache = request.app.state.read_cache
    key = (request.url.path, str(request.url.query), who.role, who.tenant)
    fresh = "no-cache" in request.headers.get("cache-control", "").lower()
    body, age = cache.answer(key, compute, fresh=fresh)
    response = Response(body, media_type="application/json")
    if age is not None:
        response.headers["age"] = str(int(age))
    return response


def write_begins(request: Request) -> None:
    """Called once a request that may change something (any method but GET and HEAD) is
    authenticated and allowed: until it ends, no answer is kept, and none kept before it is
    given after it (``WriteGeneration`` ends it). A request refused before this (no token,
    no route, no right) changes nothing and leaves the kept answers alone."""
    if request.method in ("GET", "HEAD") or getattr(request.state, "writing", False):
        return
    request.app.state.read_cache.write_began()
    request.state.writing = True


class WriteGeneration:
    """ASGI middleware: ends, when its answer is sent, the write a request began
    (``write_begins``)."""

    def __init__(self, app: Any, cache: ReadCache) -> None:
        self.app = app
        self.cache = cache

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            await self.app(scope, receive, send)
        finally:
            if scope.get("state", {}).get("writing"):
                self.cache.write_ended()
