"""Following tasks until they end: ``tasks watch``, ``tasks wait`` and ``submit --wait``.

1. ``progress``: the tasks' numbers now, live from Redis, or from the SQL record for a task
   Redis no longer has (flushed or restored, or a finished task's hash expired);
2. ``follow``: wait until every task has ended, drawing progress bars and failures on a
   console when one is given (``scheduler.views.live``); a task Redis has forgotten must have
   ended in the record, since nothing would ever move it;
3. ``wait``: ``follow`` silently, give the recorders time to bring the last results into SQL,
   and read the failed jobs' last lines;
4. ``record_behind``: the tasks whose record counts fewer ended jobs than the queue (the views
   that read the record only say so);
5. ``from_record``: the progress of tasks Redis no longer has, from the SQL record.

The HTTP API's one poller per followed task, and what a customer following one is shown, are
``scheduler.verbs.tracking``'s.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scheduler.errors import FleetschedError, NotFoundError
from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    from rich.console import Console
    from sqlalchemy.engine import Engine

    from scheduler.views.snapshot import TaskProgress

__all__ = ["RECORD_WAIT_S", "Followed", "Waited", "follow", "from_record", "progress",
           "record_behind", "record_caught_up", "wait"]

Note = Callable[[str], None]
RECORD_WAIT_S = 15.0  # how long wait gives the recorders to put the last results in SQL


@dataclass(frozen=True)
class Followed:
    """The tasks' numbers once they ended (in the order asked), and the exit code they make
    (``scheduler.progress.exit_code``); with a console, the failures drawn (``FailureFeed``
    rows, ``scheduler.views.live.failure_row`` for JSON)."""

    tasks: list[TaskProgress]
    exit_code: int
    shown_failures: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Waited(Followed):
    """``Followed``, with the failed jobs' last attempts (``task_outputs`` rows) and whether
    the record was still behind the queue when they were read (some may be missing)."""

    failures: list[dict[str, Any]] = field(default_factory=list)
    record_behind: bool = False


def _ignore(_line: str) -> None:
    pass


def progress(stores: Stores, ids: list[str], *,
             hosts: Collection[str] | None = None) -> list[TaskProgress]:
    """The tasks' progress, read once: live from Redis, or from the SQL record for a task Redis
    no longer has (``NotFoundError`` for a task neither knows). ``hosts``: the running hosts
    shown are among these (a customer's), chosen before the list is cut."""
    from scheduler.views.snapshot import read_running, read_tasks

    client = stores.connect()
    try:
        found = read_tasks(client, stores.shards, ids)
        read_running(client, stores.shards, [t for t in found if t is not None], hosts=hosts)
    finally:
        client.close()
    missing = [tid for tid, t in zip(ids, found) if t is None]
    recorded = from_record(stores, missing) if missing else {}
    return [t if t is not None else recorded[tid] for tid, t in zip(ids, found)]


def from_record(stores: Stores, ids: list[str]) -> dict[str, TaskProgress]:
    """The SQL record's progress (``taskinfo.progress_of`` over the job rows) of tasks Redis has
    no hash for, as the live views' ``TaskProgress``; ``NotFoundError`` for a task the record
    does not know either."""
    from scheduler.record.models import Task
    from scheduler.record.session import open_database, transaction
    from scheduler.submission.taskinfo import progress_of
    from scheduler.views.snapshot import TaskProgress

    out: dict[str, TaskProgress] = {}
    try:
        engine = open_database(stores.settings)
    except FleetschedError as exc:
        raise NotFoundError(f"no task {ids[0]} in the queue, and the SQL record cannot be read "
                            f"({exc})", hint="fleetsched tasks list shows the tasks") from None
    try:
        with transaction(engine, commit=False) as session:
            for tid in ids:
                row = session.get(Task, int(tid)) if tid.isdigit() else None
                if row is None:
                    raise NotFoundError(f"no task {tid} in the queue or in the record",
                                        hint="fleetsched tasks list shows the tasks")
                p = progress_of(session, row, None)
                out[tid] = TaskProgress(
                    task_id=tid, state=p.recorded_state, operator=row.operator or "",
                    action=row.action or "", total=p.total, running=p.running,
                    succeeded=p.succeeded, failed=p.failed, lost=p.lost,
                    cancelled=p.cancelled)
    finally:
        engine.dispose()
    return out


def exit_code(tasks: list[TaskProgress]) -> int:
    """The exit code of ``watch`` and ``wait``: ``scheduler.progress.exit_code``."""
    from scheduler.progress import exit_code as code

    return code(t.progress for t in tasks)


def follow(stores: Stores, ids: list[str], *, interval_s: float, timeout_s: float | None,
           console: Console | None = None, note: Note = _ignore) -> Followed:
    """Wait until every task has ended; with a ``console``, progress bars and failures drawn on
    it as they happen, else silent. ``note`` gets the warning lines."""
    from rich.console import Console

    from scheduler.progress import not_finished
    from scheduler.views.live import FailureFeed, failure_line
    from scheduler.views.live import watch as run_watch
    from scheduler.views.snapshot import read_tasks

    draw = console is not None
    console = console if console is not None else Console(file=io.StringIO(), markup=False)
    client = stores.connect()
    engine = feed = None
    try:
        if draw:
            try:
                from scheduler.record.session import open_database

                engine = open_database(stores.settings)
                feed = FailureFeed(engine, ids)
            except FleetschedError as exc:
                note(f"warning: failures will not be listed ({exc})")
        keys = stores.shards
        recorded: dict[str, TaskProgress] = {}
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        settle = None
        if feed is not None:
            def settle(ended: list[TaskProgress]) -> None:
                # The failures come from SQL: once the queue says the tasks ended, give the
                # recorders time to bring the last ones in (a node records from a process of
                # its own, a moment behind), so the last frame lists them.
                if not record_caught_up(engine, ended, RECORD_WAIT_S):
                    note("warning: the SQL record is behind (is a recorder running?): "
                         "failures may be missing below")
        shown: list[dict[str, Any]] = []
        while True:
            live = [t for t in ids if t not in recorded]
            missing = [t for t, p in zip(live, read_tasks(client, keys, live)) if p is None]
            if missing:
                recorded.update(_ended_in_record(stores, missing, console))
                continue
            try:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                tasks, drawn = (run_watch(client, keys, live, console, feed=feed,
                                          interval_s=interval_s, timeout_s=left,
                                          settle=settle)
                                if live else ([], []))
                shown += drawn
            except NotFoundError:  # a finished task's hash expired while watching
                continue
            except TimeoutError:  # its message gives what was left, not the timeout asked
                now = [t.progress for t in read_tasks(client, keys, live) if t is not None]
                raise FleetschedError(not_finished(ids, timeout_s or 0, now),
                                      hint="wait again, or see fleetsched top") from None
            break
        if feed is not None and recorded:  # the tasks only the record knows: no frame
            for f in feed.poll():
                shown.append(f)
                console.print(failure_line(f))
    finally:
        client.close()
        if engine is not None:
            engine.dispose()
    by_id = {t.task_id: t for t in tasks} | recorded
    ended = [by_id[t] for t in ids]
    return Followed(tasks=ended, exit_code=exit_code(ended), shown_failures=shown)


def _ended_in_record(stores: Stores, ids: list[str], console: Console) -> dict[str, Any]:
    """The SQL record's progress of tasks Redis has no hash for, which must have ended there:
    nothing would ever move a task Redis has forgotten."""
    recorded = from_record(stores, ids)
    for tid, t in recorded.items():
        if not t.progress.ended:
            raise FleetschedError(
                f"task {tid} is not in the queue, and its record says it has not ended "
                f"({t.progress.sentence()})",
                hint="fleetsched reconcile puts the record's unfinished jobs back in the queue")
        console.print(f"task {tid}: not in the queue any more; its numbers are the SQL "
                      "record's", markup=False, highlight=False)
    return recorded


def record_caught_up(engine: Engine, tasks: list[TaskProgress], timeout_s: float) -> bool:
    """Wait until the SQL record has as many ended jobs as Redis says each task has (the failed
    hosts' lines come from SQL); False when the recorders are still behind after the timeout."""
    from scheduler.record.models import Task
    from scheduler.record.session import transaction
    from scheduler.submission.taskinfo import progress_of

    deadline = time.monotonic() + timeout_s
    while True:
        with transaction(engine, commit=False) as session:
            behind = [t for t in tasks if (row := session.get(Task, int(t.task_id))) is None
                      or progress_of(session, row, None).done < t.done]
        if not behind or time.monotonic() > deadline:
            return not behind
        time.sleep(0.2)


def wait(stores: Stores, ids: list[str], *, timeout_s: float | None) -> Waited:
    """Block until the tasks end; then the failed jobs' last attempts, from the record."""
    from scheduler.reports.attempts import task_outputs

    ended = follow(stores, ids, interval_s=0.2, timeout_s=timeout_s).tasks
    failures: list[dict[str, Any]] = []
    with stores.database() as engine:
        behind = (any(t.progress.unsuccessful for t in ended)
                  and not record_caught_up(engine, ended, RECORD_WAIT_S))
        for t in ended:
            failures += task_outputs(engine, int(t.task_id), failed=True)
    return Waited(tasks=ended, exit_code=exit_code(ended), failures=failures,
                  record_behind=behind)


def record_behind(stores: Stores, recorded_done: dict[int, int]) -> list[int]:
    """The tasks (of these, with their recorded done count) for which the queue counts more
    ended jobs than the SQL record. One pipelined read; nothing when Redis does not answer at
    once, and the embedded server is never started for it."""
    import redis

    from scheduler.progress import from_task_hash
    from scheduler.redisdb.connect import connect
    from scheduler.redisdb.embedded import Embedded

    if not recorded_done:
        return []
    settings = stores.settings
    ids = sorted(recorded_done)
    shards = stores.shards
    fields = ("total", "succeeded", "failed", "lost_failed", "cancelled")
    try:
        if settings.redis_url is None:
            endpoint = Embedded.of(settings).read_endpoint()
            if endpoint is None:
                return []
            client = endpoint.client(socket_connect_timeout=1.0, socket_timeout=2.0)
        else:
            client = connect(settings, socket_timeout=2.0, check=False)
        try:
            pipe = client.pipeline(transaction=False)
            for tid in ids:
                pipe.hmget(shards.of_task(str(tid)).task(str(tid)), fields)
            replies = pipe.execute()
        finally:
            client.close()
    except (redis.RedisError, FleetschedError, OSError):
        return []
    return [tid for tid, reply in zip(ids, replies)
            if from_task_hash(dict(zip(fields, reply))).done > recorded_done[tid]]
