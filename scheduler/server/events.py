"""``GET /api/v1/tasks/{id}/events``: a task's progress as Server-Sent Events (``tasks watch``
over HTTP), and ``GET /api/v1/status/followers``, what following costs.

1. One ``Feed`` per followed task (and host asked for) in the server process: one poller reads
   the task through one ``scheduler.verbs.tracking.Tracker`` every ``POLL_S`` and publishes what
   changed; every follower of the task is woken to send it, so 100 followers cost the record
   and Redis what one does (``POLLS`` and ``QUERIES`` count the pollers' reads and round trips,
   ``FEEDS`` and ``FOLLOWERS`` what is open: for the benchmark and the metrics).
2. A follower gets, summarised on the server: ``progress`` (the counts and state, whenever
   they change), ``failure`` (each failed or lost job with its last lines, the first
   ``FAILURES_SENT``; the counts carry the rest), with ``?host=H`` ``host`` (that host's job
   and its output, when the task's done count moves), ``problem`` (the poller could not read;
   it keeps trying), and at the end ``end`` (the final counts, the exit code ``tasks wait``
   would give, whether the record was behind). A comment on a stream quiet for the setting
   ``server_stream_heartbeat_ms`` (15 s by default; the console's live pages read it too)
   keeps proxies from closing it; that often too the follower's credentials are checked again,
   as the request's were (``stream_guard.still_allowed``): a token revoked or expired since, a
   session ended, ends the stream with an ``error`` event (its message and hint).
3. Resume: a failure event's id is its place in the task's failures (oldest first, as the
   record orders them), and every other event carries the last one's; ``Last-Event-ID: N``
   skips the first N failures. Progress is a snapshot: the current one is sent on connect.
4. The last follower to leave stops the poller; a task that does not exist is a 404 before any
   stream starts.
5. A customer follows a task of its own hosts (``tracking.TenantScope``; another's task is a
   404, as elsewhere) on the same feed, filtered on its way out: progress and the end counted
   over its own jobs (the poller reads the counts of every followed tenant in one query, and
   only while a customer follows), the failures and the host of its own hosts only, numbered
   among its own, their output only where the task says so (``record.tenancy.output_shown``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from scheduler.errors import FleetschedError
from scheduler.principal import Principal
from scheduler.progress import from_job_states
from scheduler.redact import redact_exception
from scheduler.server.auth import allowed, stores_of
from scheduler.server.ids import TaskId
from scheduler.server.stream_guard import still_allowed
from scheduler.verbs.stores import Stores
from scheduler.verbs.tracking import TenantScope, Tracked, Tracker, tenant_jobs, tenant_scope

__all__ = ["FAILURES_SENT", "FEEDS", "FOLLOWERS", "POLLS", "POLL_S", "QUERIES",
           "router", "stats", "status"]

log = logging.getLogger("fleetsched.server")

POLL_S = 1.0  # a followed task is read this often, whatever the number of followers
FAILURES_SENT = 100  # failure events per task; the counts carry the rest
PROBLEM_BACKOFF_S = (1.0, 2.0, 5.0)  # between reads the poller could not make

router = APIRouter(tags=["tasks"])
status = APIRouter(tags=["status"])


# What following costs, for the whole process (the benchmark reads them at
# /api/v1/status/followers, the metrics at each scrape): the pollers' reads and their round
# trips to Redis and SQL since the server started, and the feeds and followers now.
POLLS = 0
QUERIES = 0
FEEDS = 0
FOLLOWERS = 0


def stats() -> dict[str, int]:
    """``POLLS``, ``QUERIES``, ``FEEDS`` and ``FOLLOWERS`` now."""
    return {"polls": POLLS, "queries": QUERIES, "feeds": FEEDS, "followers": FOLLOWERS}


@dataclass
class Feed:
    """One followed task (and host): what its poller read last, and who is woken by it."""

    task_id: int
    host: str | None
    failures: list[dict[str, Any]] = field(default_factory=list)
    progress: dict[str, Any] | None = None
    host_jobs: dict[str, Any] | None = None
    problem: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    error: FleetschedError | None = None  # the first read failed: no stream is served
    # Per tenant whose customers follow: its progress and end events (its own jobs' counts)
    tenant_progress: dict[str, dict[str, Any]] = field(default_factory=dict)
    tenant_end: dict[str, dict[str, Any]] = field(default_factory=dict)
    version: int = 0
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    followers: dict[asyncio.Event, str | None] = field(default_factory=dict)  # -> its tenant
    poller: asyncio.Task[None] | None = None
    counted: int = 0  # the tracker's queries already in QUERIES

    def publish(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self, key, value)
        self.version += 1
        self.ready.set()
        for wake in self.followers:
            wake.set()

    async def run(self, stores: Stores) -> None:
        """The poller: read, publish, sleep, until the task ends or nobody follows. A first
        read that fails is the request's error; a later one is a ``problem``, tried again."""
        tracker: Tracker | None = None
        failed_reads = 0
        try:
            while True:
                try:
                    if tracker is None:
                        tracker = await asyncio.to_thread(
                            Tracker, stores, self.task_id, host=self.host,
                            failures_cap=FAILURES_SENT)
                    read = await asyncio.to_thread(tracker.read, self.tenants())
                except Exception as exc:  # noqa: BLE001 - Redis or the record away: try again
                    if self.progress is None:
                        self.publish(error=_as_error(exc))
                        return
                    failed_reads += 1
                    error = _as_error(exc)
                    self.publish(problem={"message": str(error), "hint": error.hint})
                    await asyncio.sleep(PROBLEM_BACKOFF_S[min(failed_reads,
                                                              len(PROBLEM_BACKOFF_S)) - 1])
                    continue
                failed_reads = 0
                self._count(tracker, polls=1)
                self._publish_read(read)
                if read.progress.progress.ended:
                    await self._finish(tracker, read)
                    return
                await asyncio.sleep(POLL_S)
        finally:
            if tracker is not None:
                await asyncio.to_thread(tracker.close)

    def tenants(self) -> set[str]:
        """The tenants of the customers following now."""
        return {t for t in self.followers.values() if t is not None}

    def _count(self, tracker: Tracker, *, polls: int = 0) -> None:
        global POLLS, QUERIES
        POLLS += polls
        QUERIES += tracker.queries - self.counted
        self.counted = tracker.queries

    def _publish_read(self, read: Tracked) -> None:
        changes: dict[str, Any] = {"problem": None} if self.problem is not None else {}
        counts = _counts(read)
        if counts != self.progress:
            changes["progress"] = counts
        if read.failures:
            changes["failures"] = self.failures + [_failure(f) for f in read.failures]
        if read.host_jobs is not None:
            changes["host_jobs"] = {"host": self.host, "jobs": read.host_jobs}
        tenants = {t: _tenant_counts(read, jobs) for t, jobs in read.tenant_jobs.items()}
        if any(self.tenant_progress.get(t) != p for t, p in tenants.items()):
            # unchanged ones keep their object: a follower sends a tenant's when it is new
            changes["tenant_progress"] = {**self.tenant_progress, **{
                t: p for t, p in tenants.items() if self.tenant_progress.get(t) != p}}
        if changes or not self.ready.is_set():
            self.publish(**changes)

    async def _finish(self, tracker: Tracker, read: Tracked) -> None:
        try:
            last, behind = await asyncio.to_thread(tracker.settle, read.progress)
        except Exception as exc:  # noqa: BLE001 - the end is known; only the record is not
            _as_error(exc)
            last, behind = Tracked(progress=read.progress, failures=[], host_jobs=None), True
        self._count(tracker)
        ended = read.progress.progress
        changes: dict[str, Any] = {"end": {
            **ended.counts(), "task_id": self.task_id, "exit_code": ended.exit_code,
            "sentence": ended.sentence(), "record_behind": behind}}
        if last.failures:
            changes["failures"] = self.failures + [_failure(f) for f in last.failures]
        if last.host_jobs is not None and last.host_jobs != (self.host_jobs or {}).get("jobs"):
            changes["host_jobs"] = {"host": self.host, "jobs": last.host_jobs}
        tenants = self.tenants()
        if tenants:
            try:
                jobs = await asyncio.to_thread(tracker.tenant_jobs, tenants)
            except Exception as exc:  # noqa: BLE001 - each customer's end is read on its own
                _as_error(exc)
                jobs = {}
            self._count(tracker)
            changes["tenant_end"] = {t: _tenant_end(self.task_id, ended.recorded_state, n,
                                                    behind) for t, n in jobs.items()}
        self.publish(**changes)

    async def end_of(self, stores: Stores, tenant: str) -> dict[str, Any]:
        """``tenant``'s end event, read now for a customer who came after the end was."""
        if tenant not in self.tenant_end:
            jobs = await asyncio.to_thread(_tenant_jobs_now, stores, self.task_id, tenant)
            assert self.end is not None
            self.tenant_end[tenant] = _tenant_end(self.task_id, self.end["state"], jobs,
                                                  self.end["record_behind"])
        return self.tenant_end[tenant]


def _as_error(exc: Exception) -> FleetschedError:
    """A read's failure as the error a follower is shown: a ``FleetschedError`` as it is (its
    one line and hint), anything else one line, and the log has it (redacted)."""
    if isinstance(exc, FleetschedError):
        return exc
    log.error("following a task: %s: %s", type(exc).__name__, redact_exception(exc))
    return FleetschedError("the task could not be read (see the server's log)")


def _counts(read: Tracked) -> dict[str, Any]:
    t = read.progress
    return {"task_id": int(t.task_id), **t.progress.counts(), "action": t.action,
            "wave": t.wave_line() or None, "sentence": t.progress.sentence()}


def _tenant_counts(read: Tracked, jobs: dict[str, int]) -> dict[str, Any]:
    """A customer's progress event: the task's state, its own jobs' counts."""
    t = read.progress
    p = from_job_states(t.progress.recorded_state, jobs)
    return {"task_id": int(t.task_id), **p.counts(), "action": t.action, "wave": None,
            "sentence": p.sentence()}


def _tenant_end(task_id: int, recorded_state: str, jobs: dict[str, int],
                behind: bool) -> dict[str, Any]:
    p = from_job_states(recorded_state, jobs)
    return {**p.counts(), "task_id": task_id, "exit_code": p.exit_code,
            "sentence": p.sentence(), "record_behind": behind}


def _tenant_jobs_now(stores: Stores, task_id: int, tenant: str) -> dict[str, int]:
    with stores.database() as engine:
        return tenant_jobs(engine, task_id, [tenant])[tenant]


def _failure(f: dict[str, Any]) -> dict[str, Any]:
    return {"job": f["job"], "host": f["host"], "kind": f["kind"], "ts": f["ts"],
            "exit_code": f["exit_code"], "error": f["error"], "last_lines": f["last_lines"]}


def _add(*, feeds: int = 0, followers: int = 0) -> None:
    global FEEDS, FOLLOWERS
    FEEDS += feeds
    FOLLOWERS += followers


class Hub:
    """The feeds of one server process, by (task, host)."""

    def __init__(self, stores: Stores) -> None:
        self.stores = stores
        self.feeds: dict[tuple[int, str | None], Feed] = {}
        # a comment line this often on a quiet stream
        self.heartbeat_s = stores.settings.server_stream_heartbeat_ms / 1000

    def join(self, task_id: int, host: str | None,
             tenant: str | None = None) -> tuple[Feed, asyncio.Event]:
        feed = self.feeds.get((task_id, host))
        if feed is None:
            feed = self.feeds[(task_id, host)] = Feed(task_id, host)
            feed.poller = asyncio.create_task(feed.run(self.stores))
            _add(feeds=1)
        wake = asyncio.Event()
        feed.followers[wake] = tenant
        _add(followers=1)
        return feed, wake

    def leave(self, feed: Feed, wake: asyncio.Event) -> None:
        if wake not in feed.followers:
            return
        del feed.followers[wake]
        _add(followers=-1)
        if not feed.followers and self.feeds.get((feed.task_id, feed.host)) is feed:
            del self.feeds[(feed.task_id, feed.host)]
            _add(feeds=-1)
            if feed.poller is not None:
                feed.poller.cancel()


def _hub(request: Request) -> Hub:
    hub: Hub | None = getattr(request.app.state, "feeds", None)
    if hub is None:
        hub = request.app.state.feeds = Hub(stores_of(request))
    return hub


def _frame(event: str, data: Any, event_id: int) -> str:
    text = json.dumps(jsonable_encoder(data), separators=(",", ":"))
    return f"id: {event_id}\nevent: {event}\ndata: {text}\n\n"


def _shown(feed: Feed, event: str, scope: TenantScope | None) -> Any:
    """What the feed holds for ``event``, for this follower (``scope``: a customer's)."""
    if scope is None or event == "problem":
        return getattr(feed, event)
    if event == "progress":
        return feed.tenant_progress.get(scope.tenant)
    return feed.host_jobs  # host_jobs: filtered as it is sent


def _as_sent(event: str, value: Any, scope: TenantScope | None) -> Any:
    if scope is not None and event == "host_jobs":
        return {"host": value["host"], "jobs": scope.host_jobs(value["jobs"])}
    return value


REVOKED = {"message": "the credentials this stream was opened with are no longer good "
                      "(revoked, expired, signed out, or no longer allowed to follow the task)",
           "hint": "follow again with a valid token"}


async def _stream(hub: Hub, feed: Feed, wake: asyncio.Event, resume: int,
                  scope: TenantScope | None = None,
                  allowed_still: Callable[[], bool] | None = None) -> AsyncIterator[str]:
    """One follower's events, from the feed it shares (see the module docstring); a customer's
    (``scope``) filtered to its own hosts, failures numbered among its own. ``allowed_still``:
    asked (in a thread) once per heartbeat interval; False ends the stream."""
    seen: dict[str, Any] = {}
    read = counted = 0  # the feed's failures looked at; this follower's among them
    loop = asyncio.get_running_loop()
    checked = loop.time()
    try:
        yield "retry: 2000\n\n"
        while True:
            wake.clear()
            if allowed_still is not None and loop.time() - checked >= hub.heartbeat_s:
                checked = loop.time()
                if not await asyncio.to_thread(allowed_still):
                    yield f"event: error\ndata: {json.dumps(REVOKED, separators=(',', ':'))}\n\n"
                    return
            while read < len(feed.failures):
                read += 1
                failure = feed.failures[read - 1]
                shown = failure if scope is None else scope.failure(failure)
                if shown is None:
                    continue
                counted += 1
                if counted > resume:
                    yield _frame("failure", shown, counted)
            sent = max(counted, resume)
            for event in ("progress", "host_jobs", "problem"):
                value = _shown(feed, event, scope)
                if value is not None and seen.get(event) is not value:
                    seen[event] = value
                    yield _frame("host" if event == "host_jobs" else event,
                                 _as_sent(event, value, scope), sent)
            if feed.end is not None:
                end = feed.end if scope is None else await feed.end_of(hub.stores, scope.tenant)
                yield _frame("end", end, sent)
                return
            try:
                await asyncio.wait_for(wake.wait(), hub.heartbeat_s)
            except TimeoutError:
                yield ": heartbeat\n\n"
    finally:
        hub.leave(feed, wake)


class _EventStream(StreamingResponse):
    """The stream of one follower, who leaves its feed when the response ends however it ends:
    a stream whose first byte never went out (the client hung up at once) never ran the
    stream's own ``finally``."""

    def __init__(self, events: AsyncIterator[str], *, leave: Callable[[], None]) -> None:
        super().__init__(events, media_type="text/event-stream",
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self.leave = leave

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.leave()


@router.get("/tasks/{task_id}/events", summary="Follow a task: its progress as Server-Sent "
            "Events (counts and state, failures, one host's output with ?host=, an end event)",
            response_class=StreamingResponse,
            responses={200: {"content": {"text/event-stream": {}}}})
async def task_events(request: Request, task_id: TaskId,
                      who: Annotated[Principal, Depends(allowed("tasks.watch"))],
                      host: Annotated[str | None, Query(min_length=1, description=(
                          "Also this host's job and its output, as it ends."))] = None,
                      last_event_id: Annotated[int | None, Header(ge=0, description=(
                          "Resume: the failures already received."))] = None
                      ) -> StreamingResponse:
    hub = _hub(request)
    scope = None
    if who.tenant is not None:  # a customer: its own task (else a 404), its own hosts
        scope = await asyncio.to_thread(tenant_scope, hub.stores, task_id, who.tenant, host)
    feed, wake = hub.join(task_id, host, who.tenant)
    await feed.ready.wait()
    if feed.error is not None:
        hub.leave(feed, wake)
        raise feed.error
    return _EventStream(_stream(hub, feed, wake, last_event_id or 0, scope,
                                lambda: still_allowed(request, "tasks.watch")),
                        leave=lambda: hub.leave(feed, wake))


@status.get("/status/followers", summary="What following tasks costs: the pollers' reads and "
            "queries since the server started, the feeds and followers now")
def followers(who: Annotated[Principal, Depends(allowed("status.followers"))]
              ) -> dict[str, int]:  # every customer's followers: the team's verb
    return stats()
