"""What keeps a server's long streams in bounds: the output followers' own threads, how many
each principal may hold open, and whether the principal of an open stream may still read it.

1. ``OUTPUT_THREADS``: ``GET /tasks/{id}/output/stream`` reads a task's Redis stream with
   blocking reads (``scheduler.verbs.liveoutput``); those run in a pool of their own
   (``output_pool``), never in the event loop's default one, which the task event streams'
   pollers, the console's live pages and every synchronous route share: however many output
   followers are open, the other streams keep their threads. Followers beyond the pool's
   threads take turns (each read blocks at most ``liveoutput.POLL_S``).
2. ``Slots``: at most the setting ``server_output_streams_per_principal`` output followers at
   once per principal (an API token, a single sign-on session's person); one more is refused
   with HTTP 429 and one line (``too_many``).
3. ``still_allowed``: the check ``auth.allowed`` makes when a request comes, made again (a
   stream checks it at each heartbeat, ``server_stream_heartbeat_ms``): a token revoked or
   expired since, or a session ended, ends the stream it opened. The streams of one token
   share the answer for that interval (``Rechecks``): ten followers cost one check.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from fastapi import Request
from fastapi.responses import JSONResponse

from scheduler.errors import ForbiddenError, UnauthenticatedError
from scheduler.principal import Principal
from scheduler.server.auth import stores_of
from scheduler.server.errors import body
from scheduler.server.sso import cookie_principal
from scheduler.verbs import access

__all__ = ["OUTPUT_THREADS", "Rechecks", "Slots", "output_pool", "principal_key", "slots_of", "still_allowed",
           "too_many"]

OUTPUT_THREADS = 32  # the output followers' own threads, whatever the number of followers

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def output_pool() -> ThreadPoolExecutor:
    """The process's pool for the output followers' reads (made on first use)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(OUTPUT_THREADS, thread_name_prefix="output-follow")
        return _pool


def principal_key(who: Principal) -> str:
    """Who holds a stream: the token or the person, not the name (two tokens of one owner
    are two principals, as they are two credentials)."""
    return f"{who.via}|{who.name}"


class Slots:
    """The open output followers of each principal, in one server process."""

    def __init__(self) -> None:
        self.open: dict[str, int] = {}
        self.lock = threading.Lock()

    def take(self, key: str, cap: int) -> bool:
        """One more follower for ``key``; False when it holds ``cap`` already."""
        with self.lock:
            if self.open.get(key, 0) >= cap:
                return False
            self.open[key] = self.open.get(key, 0) + 1
            return True

    def give_back(self, key: str) -> None:
        with self.lock:
            left = self.open.get(key, 0) - 1
            if left > 0:
                self.open[key] = left
            else:
                self.open.pop(key, None)


def slots_of(request: Request) -> Slots:
    slots: Slots | None = getattr(request.app.state, "output_slots", None)
    if slots is None:
        slots = request.app.state.output_slots = Slots()
    return slots


def too_many(cap: int) -> JSONResponse:
    """The 429 of a principal that follows ``cap`` tasks' output already."""
    return JSONResponse(body(1, "TooManyStreams",
                             f"this token already follows {cap} output streams, the most "
                             "one principal may hold open at once",
                             "end one first, or raise the server's setting "
                             "server_output_streams_per_principal"),
                        status_code=429, headers={"Retry-After": "5"})


class Rechecks:
    """The answers of ``still_allowed``, one per credential and verb, kept for a heartbeat
    interval: the streams one token holds open re-check it once per interval between them,
    not once each, so followers cost the record what one does (``benchmarks/bench_sse.py``);
    one check runs at a time per credential, the others wait for its answer."""

    def __init__(self) -> None:
        self.answers: dict[tuple[str, str], tuple[float, bool]] = {}
        self.locks: dict[tuple[str, str], threading.Lock] = {}
        self.lock = threading.Lock()

    def ask(self, key: tuple[str, str], fresh_s: float, check: Callable[[], bool]) -> bool:
        with self.lock:
            one = self.locks.setdefault(key, threading.Lock())
        with one:
            now = time.monotonic()
            with self.lock:
                kept = self.answers.get(key)
            if kept is not None and now - kept[0] < fresh_s:
                return kept[1]
            answer = check()
            with self.lock:
                self.answers = {k: v for k, v in self.answers.items() if now - v[0] < fresh_s}
                self.answers[key] = (time.monotonic(), answer)
            return answer


def _rechecks(request: Request) -> Rechecks:
    kept: Rechecks | None = getattr(request.app.state, "stream_rechecks", None)
    if kept is None:
        kept = request.app.state.stream_rechecks = Rechecks()
    return kept


def still_allowed(request: Request, verb: str) -> bool:
    """Whether the request's credentials (its bearer token, or its session cookie) are still
    good and their role may still call ``verb`` (run in a thread: it reads the record), as
    answered at most a heartbeat interval ago for the same credentials (``Rechecks``). Only a
    refusal says no: the record away for a moment ends no stream (asked again next time)."""
    credential = (request.headers.get("authorization", "") + "|"
                  + ";".join(f"{k}={v}" for k, v in sorted(request.cookies.items())))
    key = (hashlib.sha256(credential.encode()).hexdigest(), verb)
    fresh_s = stores_of(request).settings.server_stream_heartbeat_ms / 1000
    return _rechecks(request).ask(key, fresh_s, lambda: _allowed_now(request, verb))


def _allowed_now(request: Request, verb: str) -> bool:
    try:
        who = cookie_principal(request)
        if who is None:
            scheme, _, token = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                return False
            who = access.authenticate(stores_of(request), token.strip())
        access.authorize(who, verb)
    except (UnauthenticatedError, ForbiddenError):
        return False
    return True
