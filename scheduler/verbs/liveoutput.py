"""Following a task's output as its hosts print it: ``tasks output --follow``, ``submit
--follow`` and ``GET /api/v1/tasks/{id}/output/stream``.

``follow_output`` yields events (dicts with a ``kind``) until the task ends:

1. ``line``: one line a job printed (``host``, ``job``, ``attempt``, ``stream`` out/err,
   ``line``), read from the task's output stream (``Keys.output``, written by the workers'
   ``workers.liveout``, every secret the job resolved already masked there), from its first
   entry still kept, so a follower who comes late sees the earlier lines first;
2. ``gap``: lines of a job a worker could not publish (``count``; its recorded output has them);
3. ``note``: one sentence for the reader (the stream was trimmed, the record is read instead);
4. ``end`` (last): the task's ``exit_code`` (``tasks wait``'s convention) and its ``sentence``;
5. ``idle``: only when asked (``idle_s``), after that long without any other event.

A task that ended before its stream was read (the stream is dropped a minute after the end),
or whose workers published nothing (an older node, the ``simulate`` executor), gives the
recorded output of its jobs' last attempts instead (``reports.attempts.task_outputs``), as
``line`` events. ``host`` follows one host's lines alone; ``grep`` keeps the lines matching.
A customer (``tenant``) follows only a task with jobs of its own, only its own hosts' lines,
and only where the task shows output to customers (``record.tenancy.output_shown``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from scheduler.errors import NotFoundError, ValidationError
from scheduler.verbs.stores import Stores

__all__ = ["END_GRACE_S", "POLL_S", "follow_output", "recorded_events"]

POLL_S = 0.5  # how often the task's progress is read while its stream is quiet
END_GRACE_S = 3.0  # after the end, how long lines still in flight from workers are awaited
QUIET_S = 0.3  # ... and how long the stream must stay quiet before the end is said
READ_COUNT = 1000

Event = dict[str, Any]


def _pattern(grep: str | None) -> re.Pattern[str] | None:
    if grep is None:
        return None
    try:
        return re.compile(grep)
    except re.error as exc:
        raise ValidationError(f"--grep {grep!r} is not a regular expression: {exc}") from None


def _check_host(stores: Stores, task_id: int, host: str) -> None:
    """``NotFoundError`` when the task has no job on ``host`` (nothing would ever come)."""
    import sqlalchemy as sa

    from scheduler.record.models import Job

    with stores.reading() as session:
        found = session.execute(sa.select(Job.id).where(
            Job.task_id == task_id, Job.host == host).limit(1)).first()
    if found is None:
        raise NotFoundError(f"no job of host {host!r} in task {task_id}",
                            hint=f"see `fleetsched tasks show {task_id}`")


def follow_output(stores: Stores, task_id: int, *, host: str | None = None,
                  grep: str | None = None, tenant: str | None = None,
                  poll_s: float = POLL_S, stop: Callable[[], bool] | None = None,
                  idle_s: float | None = None) -> Iterator[Event]:
    """The task's output events as they come, then its end (see the module docstring). What
    is refused (an unknown task or host, another customer's task, a bad ``grep``) is raised
    here, before the first event. ``stop``: asked between reads; True ends the events early
    (no ``end``). ``idle_s``: an ``idle`` event after that long without any (a server's
    heartbeat)."""
    from scheduler.verbs.follow import progress
    from scheduler.verbs.tracking import tenant_scope

    pattern = _pattern(grep)
    hosts: frozenset[str] | None = None
    shown = True
    if tenant is not None:
        scope = tenant_scope(stores, task_id, tenant, host)  # another's task: not found
        hosts, shown = scope.hosts, scope.output
    else:
        progress(stores, [str(task_id)])  # an unknown task: not found, before the host
        if host is not None:
            _check_host(stores, task_id, host)
    return _events(stores, task_id, host, pattern, grep, tenant, hosts, shown, poll_s,
                   stop, idle_s)


def _events(stores: Stores, task_id: int, host: str | None, pattern: re.Pattern[str] | None,
            grep: str | None, tenant: str | None, hosts: frozenset[str] | None, shown: bool,
            poll_s: float, stop: Callable[[], bool] | None, idle_s: float | None
            ) -> Iterator[Event]:
    from scheduler.verbs.follow import progress
    from scheduler.verbs.tracking import tenant_progress

    def ended() -> Any:
        """The task's Progress when it has ended, else None."""
        if tenant is not None:
            p = tenant_progress(stores, str(task_id), tenant).progress
        else:
            p = progress(stores, [str(task_id)])[0].progress
        return p if p.ended else None

    def end(p: Any) -> Event:
        return {"kind": "end", "task_id": task_id, "exit_code": p.exit_code,
                "sentence": p.sentence()}

    def wanted(fields: dict[str, str]) -> bool:
        h = fields.get("h", "")
        return (host is None or h == host) and (hosts is None or h in hosts)

    if not shown:
        yield {"kind": "note", "text": f"the output of task {task_id} is not shown to "
                                       "customers; waiting for its end"}
        quiet = time.monotonic()
        while (p := ended()) is None:
            if stop is not None and stop():
                return
            if idle_s is not None and time.monotonic() - quiet >= idle_s:
                quiet = time.monotonic()
                yield {"kind": "idle"}
            time.sleep(poll_s)
        yield end(p)
        return

    key = stores.shards.of_task(str(task_id)).output(str(task_id))
    client = stores.connect()
    try:
        done = ended()
        if done is not None and not client.exists(key):
            yield from recorded_events(stores, task_id, host=host, grep=grep, tenant=tenant)
            yield end(done)
            return
        last = "0-0"
        first = True
        open_jobs: set[str] = set()  # jobs with lines and no end entry yet
        streamed = False
        ended_at: float | None = None
        quiet_since = idled = time.monotonic()
        next_check = time.monotonic() + poll_s
        while True:
            if stop is not None and stop():
                return
            # blocks while the task runs (redis-py: block=None does not block, 0 for ever)
            wait_ms = max(1, int(poll_s * 1000)) if done is None else None
            reply = client.xread({key: last}, count=READ_COUNT, block=wait_ms)
            entries = reply[0][1] if reply else []
            if first and entries:
                first = False
                if _trimmed(client, key):
                    yield {"kind": "note", "text": "earlier lines are no longer kept in the "
                                                   "live stream; `fleetsched tasks output` "
                                                   "shows each job's recorded head and tail"}
            elif len(entries) >= READ_COUNT and _first_id_after(client, key, last):
                # a full read: this reader fell a whole stream's length behind, and the cap
                # may have dropped entries it had not read
                yield {"kind": "note", "text": "this reader fell behind and some lines were "
                                               "dropped from the live stream meanwhile; "
                                               "`fleetsched tasks output` shows each job's "
                                               "recorded head and tail"}
            for entry_id, fields in entries:
                last = entry_id
                job = fields.get("j", "")
                kind = fields.get("k")
                if kind == "end":
                    open_jobs.discard(job)
                    continue
                open_jobs.add(job)
                if not wanted(fields):
                    continue
                streamed = True
                if kind == "gap":
                    yield {"kind": "gap", "host": fields.get("h", ""), "job": job,
                           "count": int(fields.get("n") or 0)}
                    continue
                for stream, line in _lines(fields):
                    if pattern is not None and not pattern.search(line):
                        continue
                    yield {"kind": "line", "host": fields.get("h", ""), "job": job,
                           "attempt": int(fields.get("a") or 0), "stream": stream,
                           "line": line}
            now = time.monotonic()
            if entries:
                quiet_since = now
            elif idle_s is not None and now - max(quiet_since, idled) >= idle_s:
                idled = now
                yield {"kind": "idle"}
            if done is None:
                if now >= next_check or not entries:
                    done = ended()
                    next_check = now + poll_s
                    if done is not None:
                        ended_at = now
                continue
            if ended_at is None:
                ended_at = now
            # The task ended: the workers may still be sending its last lines (a job's lines
            # and its end entry go out within a flush of its end)
            if len(entries) >= READ_COUNT:
                continue
            settled = not open_jobs and now - quiet_since >= QUIET_S
            if settled or now - ended_at >= END_GRACE_S:
                break
            time.sleep(0.05)
        if not streamed:  # nothing was published: an older node, or the simulate executor
            yield from recorded_events(stores, task_id, host=host, grep=grep, tenant=tenant)
        yield end(done)
    finally:
        client.close()


def _lines(fields: dict[str, str]) -> list[tuple[str, str]]:
    """An entry's (stream, line) pairs (``workers.liveout.pack``); none from a malformed one."""
    try:
        return [(str(s), str(ln)) for s, ln in json.loads(fields.get("d") or "[]")]
    except (ValueError, TypeError):
        return []


def _first_id_after(client: Any, key: str, last: str) -> bool:
    """Whether the stream's oldest entry is newer than ``last``, the last one read: the
    entries in between were dropped by its cap before this reader got to them."""
    try:
        first = client.xrange(key, count=1)
    except Exception:  # noqa: BLE001 - only a note depends on it
        return False
    return bool(first) and _stream_id(first[0][0]) > _stream_id(last)


def _stream_id(entry_id: Any) -> tuple[int, int]:
    ms, _, seq = str(entry_id).partition("-")
    return int(ms), int(seq or 0)


def _trimmed(client: Any, key: str) -> bool:
    """Whether the stream dropped its first entries (its cap, ``MAXLEN ~``)."""
    try:
        info = client.xinfo_stream(key)
    except Exception:  # noqa: BLE001 - only a note depends on it
        return False
    added = int(info.get("entries-added") or 0)  # Redis 7; older servers do not say
    return bool(added) and added > int(info.get("length") or 0)


def recorded_events(stores: Stores, task_id: int, *, host: str | None = None,
                    grep: str | None = None, tenant: str | None = None) -> Iterator[Event]:
    """The recorded output of each job's last attempt, as ``line`` events after a ``note``."""
    from scheduler.reports.attempts import task_outputs

    with stores.database() as engine:
        rows = task_outputs(engine, task_id, host=host, grep=grep, tenant=tenant)
    yield {"kind": "note", "text": f"task {task_id} has no live output (it ended, or its "
                                   "workers publish none); its recorded output follows"}
    for row in rows:
        for line in row["lines"]:
            stream = "out"
            if line.startswith("[stderr] "):
                stream, line = "err", line[len("[stderr] "):]
            yield {"kind": "line", "host": row["host"], "job": row["job"],
                   "attempt": int(row["attempt"] or 0), "stream": stream, "line": line}
