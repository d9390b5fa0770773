"""A brief cache of the API's busiest reads: the task list, a task's detail and its job pages,
which dashboards poll and which a 10,000-host task makes costly (issue 28, "Performance").

One answer is kept per (route, query, role, tenant) for ``server_read_cache_ms`` (1 s by
default), as the JSON bytes sent, so 50 clients polling one task cost the record one query a
second instead of 50. What it may serve, and what it never does:

- an answer at most ``server_read_cache_ms`` old (the ``Age`` header says how old); no
  answer computed before a write this process served is served after it (any request but
  GET and HEAD starts a new generation, so a client reads its own writes);
- a request that says ``Cache-Control: no-cache`` is computed afresh (and refreshes the
  entry): the CLI in remote mode always says it, so it prints what direct mode prints;
- when an entry runs out while many ask for it, one request computes it and the others wait
  for that answer (no stampede on the record);
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

__all__ = ["ReadCache", "WriteGeneration", "cached"]

MAX_ENTRIES = 256


@dataclass(frozen=True)
class _Entry:
    body: bytes
    made: float  # time.monotonic() when computed
    generation: int


class ReadCache:
    """Answers by key for ``ttl_s``; 0 keeps nothing (every request computes)."""

    def __init__(self, ttl_s: float, max_entries: int = MAX_ENTRIES) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.generation = 0  # bumped by WriteGeneration around every write
        self._entries: OrderedDict[tuple[Any, ...], _Entry] = OrderedDict()
        self._guard = threading.Lock()
        self._computing: dict[tuple[Any, ...], threading.Lock] = {}
        self.hits = self.misses = 0

    def new_generation(self) -> None:
        with self._guard:
            self.generation += 1

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
        """(the JSON body, its age in seconds or None when computed now) for ``key``: the
        kept one while it is fresh, else ``compute()``'s value, rendered as FastAPI renders a
        route's value."""
        if self.ttl_s <= 0:
            return _render(compute()), None
        with self._guard:
            entry = None if fresh else self._fresh(key)
            if entry is not None:
                self.hits += 1
                return entry.body, time.monotonic() - entry.made
            computing = self._computing.setdefault(key, threading.Lock())
        with computing:  # one computes; the others wait, then take its answer
            with self._guard:
                entry = None if fresh else self._fresh(key)
                if entry is not None:
                    self.hits += 1
                    return entry.body, time.monotonic() - entry.made
                generation, self.misses = self.generation, self.misses + 1
            made = time.monotonic()
            body = _render(compute())
            with self._guard:
                self._computing.pop(key, None)
                if generation == self.generation:  # no write began meanwhile
                    self._entries[key] = _Entry(body, made, generation)
                    self._entries.move_to_end(key)
                    while len(self._entries) > self.max_entries:
                        self._entries.popitem(last=False)
            return body, None


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


class WriteGeneration:
    """ASGI middleware: every request but GET and HEAD starts a new generation of the read
    cache when it begins and again when it ends, so no answer computed before or during a
    write is served after it."""

    def __init__(self, app: Any, cache: ReadCache) -> None:
        self.app = app
        self.cache = cache

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        self.cache.new_generation()
        try:
            await self.app(scope, receive, send)
        finally:
            self.cache.new_generation()
