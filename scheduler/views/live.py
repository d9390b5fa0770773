"""The loops behind the live views: ``fleetsched top`` and ``fleetsched tasks watch``.

1. ``top(...)``: redraw the queue frame every ``interval_s`` until interrupted (or once).
2. ``watch(...)``: redraw the watched tasks' bars, under each the hosts running now (from
   Redis: ``snapshot.read_running``) and its failures as they are recorded, each with its exit
   code or signal and last lines (``fail`` and ``lost`` events from the SQL record, when a
   database is given), and return when every watched task has ended: all its jobs finished,
   or it was cancelled or aborted and nothing of it runs any more. The last frame lists up to
   ``render.FAILURES_FINAL`` failures per task.

Both loops take what they draw from a function (``take``, ``read``) and the failures from a
feed (``poll()``): Redis and the record here, the HTTP API in remote mode
(``scheduler.remote.follow``, ``scheduler.remote.status``), drawn the same.

Both draw on the console they are given (``rich.live.Live``, no alternate screen), so a
terminal keeps the last frame; on a non-terminal only the final frame is printed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any, Protocol

import redis
from rich.console import Console, Group
from rich.live import Live
from rich.text import Text
from sqlalchemy.engine import Engine

from scheduler.errors import NotFoundError
from scheduler.queue.keys import Keys
from scheduler.queue.shards import Shards
from scheduler.views.render import failure_lines, top_frame, watch_frame
from scheduler.views.snapshot import (
    QueueSnapshot,
    RateMeter,
    TaskProgress,
    read_running,
    read_tasks,
)
from scheduler.visible import visible


@contextlib.contextmanager
def live_view(console: Console) -> Iterator[Live]:
    """A ``rich.live.Live`` redrawn by hand; on a non-terminal (a pipe, a log file) only its
    last frame is written, and a newline after it, so the next message starts a line."""
    try:
        with Live(console=console, auto_refresh=False, transient=False) as live:
            yield live
    finally:  # an error (a watch's timeout) starts its own line too
        if not console.is_terminal:
            console.line()


def ended(task: TaskProgress) -> bool:
    """Nothing more will happen to this task without an operator (``Progress.ended``)."""
    return task.progress.ended


def top(take: Callable[[], QueueSnapshot], console: Console, *, interval_s: float = 1.0,
        iterations: int | None = None) -> QueueSnapshot:
    """Redraw ``fleetsched top`` from ``take()`` until Ctrl-C (or ``iterations`` frames); the
    last snapshot."""
    meter = RateMeter()
    snap = take()
    with live_view(console) as live:
        n = 0
        while True:
            for t in snap.tasks:
                meter.add(t.task_id, t.done)
            live.update(top_frame(snap, meter), refresh=True)
            n += 1
            if iterations is not None and n >= iterations:
                return snap
            time.sleep(interval_s)
            snap = take()


Settle = Callable[[list[TaskProgress]], None]  # what draw runs once every task has ended


class Feed(Protocol):
    """Where ``watch`` gets the failures to print: each new one once, oldest first."""

    def poll(self) -> list[dict[str, Any]]: ...


class FailureFeed:
    """New ``fail`` / ``lost`` events of some tasks, each returned once, oldest first."""

    def __init__(self, engine: Engine, task_ids: list[str]) -> None:
        self.engine = engine
        self.task_ids = task_ids
        self.since: datetime | None = None
        self.seen: set[str] = set()

    def poll(self) -> list[dict[str, Any]]:
        import sqlalchemy as sa

        from scheduler.record.models import Event

        stmt = (sa.select(Event.id, Event.ts, Event.kind, Event.job_id, Event.host, Event.data)
                .where(Event.task_id.in_(self.task_ids), Event.kind.in_(("fail", "lost")))
                .order_by(Event.ts, Event.id))
        if self.since is not None:
            stmt = stmt.where(Event.ts >= self.since)
        try:
            with self.engine.connect() as conn:
                rows = conn.execute(stmt).all()
        except sa.exc.SQLAlchemyError:
            return []  # the record may be briefly locked or away; the next poll catches up
        out = []
        for eid, ts, kind, job, host, data in rows:
            self.since = ts
            if eid in self.seen:
                continue
            self.seen.add(eid)
            data = data or {}
            out.append({"event": eid, "ts": ts, "kind": kind, "job": job, "host": host,
                        "error": str(data.get("error") or "")[:300],
                        "exit_code": data.get("exit_code"), "last_lines": _last_lines(data)})
        return out


LAST_LINES = 3  # lines of a failed job's output shown under its failure in tasks watch


def _last_lines(data: dict[str, Any]) -> list[str]:
    """The last lines the failed attempt printed (stderr marked), read as ``tasks output`` and
    ``tasks wait`` read them (``scheduler.queue.output.attempt_lines``)."""
    from scheduler.queue.output import attempt_lines, commands_of

    # no "[error] ..." line for an attempt that printed nothing: the failure's line has it
    lines = [ln for ln in attempt_lines(commands_of(data), None) if ln.strip()]
    return [ln[:200] for ln in lines[-LAST_LINES:]]


def failure_line(f: dict[str, Any]) -> Text:
    """A failure as ``tasks watch`` shows it under its task's bar (``render.failure_lines``),
    as one ``Text``."""
    return Text("\n").join(failure_lines(f))


def failure_row(f: dict[str, Any]) -> dict[str, Any]:
    """A failure as ``tasks watch --output json`` gives it: job, host, kind (``fail``,
    ``lost``), exit (a code, a signal's name, or ""), error and last lines."""
    from scheduler.queue.output import shown_exit

    return {"job": f["job"], "host": f["host"], "kind": f["kind"],
            "exit": shown_exit(f.get("exit_code"), f.get("error")), "error": f.get("error"),
            "last_lines": list(f.get("last_lines") or [])}


def watch(client: redis.Redis, keys: Keys | Shards, task_ids: list[str], console: Console, *,
          feed: Feed | None = None, interval_s: float = 0.5,
          labels: dict[str, str] | None = None, header: Callable[[], Text] | None = None,
          timeout_s: float | None = None, settle: Settle | None = None
          ) -> tuple[list[TaskProgress], list[dict[str, Any]]]:
    """Draw the tasks, read from Redis with the hosts running now (``read_running``), until
    each has ended (``draw``). ``NotFoundError`` for a task Redis does not know."""

    def read() -> list[TaskProgress]:
        found = read_tasks(client, keys, task_ids)
        missing = [tid for tid, t in zip(task_ids, found) if t is None]
        if missing:
            raise NotFoundError(f"no task {missing[0]} in the queue",
                                hint="fleetsched tasks list shows the tasks")
        tasks = [t for t in found if t is not None]
        read_running(client, keys, tasks)
        return tasks

    return draw(read, task_ids, console, feed=feed, interval_s=interval_s, labels=labels,
                header=header, timeout_s=timeout_s, settle=settle)


def draw(read: Callable[[], list[TaskProgress]], task_ids: list[str], console: Console, *,
         feed: Feed | None = None, interval_s: float = 0.5,
         labels: dict[str, str] | None = None, header: Callable[[], Text] | None = None,
         timeout_s: float | None = None, settle: Settle | None = None
         ) -> tuple[list[TaskProgress], list[dict[str, Any]]]:
    """Draw the tasks ``read()`` gives until each has ended (see the module docstring): each
    task's bar, and under it the hosts running now and its failures with their last lines
    (``render.watch_frame``). Once every task has ended, ``settle(tasks)`` (the record given
    time to bring in the last failures) runs before the last read of the feed, so the last
    frame has them all.

    Returns the final progress of each task and the failures shown; ``TimeoutError`` after
    ``timeout_s``.
    """
    meter = RateMeter()
    failures: list[dict[str, Any]] = []
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    tasks = read()
    waves: dict[str, str] = {}
    with live_view(console) as live:
        while True:
            for t in tasks:
                meter.add(t.task_id, t.done)
                line = t.wave_line()  # a line per wave transition of a rollout in waves
                if line and waves.get(t.task_id) != line:
                    waves[t.task_id] = line
                    live.console.print(Text(visible(line)))
            over = all(ended(t) for t in tasks)
            if over and settle is not None:
                settle(tasks)
            failures += feed.poll() if feed else ()
            parts = [header()] if header else []
            live.update(Group(*parts, watch_frame(tasks, meter, failures, labels=labels,
                                                  final=over, console_width=console.width)),
                        refresh=True)
            if over:
                break
            if deadline is not None and time.monotonic() > deadline:
                raise TimeoutError(f"tasks {', '.join(task_ids)} still running after "
                                   f"{timeout_s:g}s")
            time.sleep(interval_s)
            tasks = read()
    return tasks, failures


__all__ = ["FailureFeed", "Feed", "Settle", "draw", "ended", "failure_line", "failure_row",
           "live_view", "top", "watch"]
