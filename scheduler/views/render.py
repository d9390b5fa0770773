"""Drawing the live views with rich: per-task progress bars, the ``top`` frame.

Bars are drawn from characters as well as colours (succeeded ``█``, failed ``x``, lost with
the worker ``!``, cancelled ``-``, running ``▒``, waiting ``·``), so they still read with
``NO_COLOR`` or in a log file. The task table's columns are ``scheduler.progress``'s counts:
``failed`` (by the host) and ``lost`` (with the worker) side by side, each job in one of them.
Host-provided text is always passed as ``rich.text.Text`` (never parsed as markup), its control
characters shown (``scheduler.visible``).
"""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from scheduler.parse import format_duration
from scheduler.queue.presence import tally
from scheduler.views.snapshot import QueueSnapshot, RateMeter, TaskProgress
from scheduler.visible import visible

SEGMENTS = (("succeeded", "█", "green"), ("failed", "x", "red"), ("lost", "!", "magenta"),
            ("cancelled", "-", "bright_black"), ("running", "▒", "yellow"),
            ("pending", "·", "bright_black"))


def bar(task: TaskProgress, width: int = 30) -> Text:
    """A progress bar of ``width`` cells split by outcome (see the module docstring)."""
    total = max(task.total, 1)
    counts = task.progress.counts()
    text = Text()
    used = 0
    for i, (name, char, style) in enumerate(SEGMENTS):
        n = counts[name]
        cells = width - used if i == len(SEGMENTS) - 1 else round(n / total * width)
        if n and cells == 0 and name in ("failed", "lost"):
            cells = 1  # a failure or a loss is never invisible
        cells = max(0, min(cells, width - used))
        text.append(char * cells, style=style)
        used += cells
    return text


def _eta(meter: RateMeter | None, task: TaskProgress) -> str:
    """The ETA while the task runs; once it has ended, its state (succeeded, failed,
    cancelled, aborted: ``scheduler.progress``)."""
    if task.progress.ended:
        return task.progress.state
    eta = meter.eta_s(task) if meter else None
    return "-" if eta is None else format_duration(eta)


COLUMNS = ("task", "progress", "done", "ok", "failed", "lost", "running", "waiting", "rate/s",
           "eta")


def task_table(tasks: list[TaskProgress], meter: RateMeter | None = None, *,
               labels: dict[str, str] | None = None, width: int = 30,
               columns: tuple[str, ...] = COLUMNS) -> Table:
    """One row per task: name, bar, counts, throughput and ETA (``columns`` picks some)."""
    table = Table(show_edge=False, box=None, header_style="bold", pad_edge=False)
    for col in columns:
        table.add_column(col, justify="left" if col in ("task", "progress") else "right",
                         no_wrap=True)
    for t in tasks:
        label = (labels or {}).get(t.task_id) or f"{t.task_id} {t.operator} {t.action}".strip()
        rate = meter.rate(t.task_id) if meter else 0.0
        n = t.progress.counts()  # every number from scheduler.progress
        cells = {"task": Text(visible(label)), "progress": bar(t, width),
                 "done": f"{n['done']}/{n['total']}", "ok": str(n["succeeded"]),
                 "failed": Text(str(n["failed"]), style="red" if n["failed"] else ""),
                 "lost": Text(str(n["lost"]), style="magenta" if n["lost"] else ""),
                 "running": str(n["running"]), "waiting": str(n["pending"]),
                 "rate/s": f"{rate:.0f}",
                 "eta": _eta(meter, t)}
        table.add_row(*[cells[c] for c in columns])
    return table


def _workers(workers: list[dict[str, Any]]) -> Table:
    table = Table(show_edge=False, box=None, header_style="bold", pad_edge=False)
    for col in ("worker", "node", "pid", "busy/slots", "processes", "acked", "failed", "beat"):
        table.add_column(col, no_wrap=True)
    for w in workers:
        table.add_row(Text(visible(str(w.get("worker", "")))),
                      Text(visible(str(w.get("node", "")))),
                      str(w.get("pid", "")), f"{w.get('busy', 0)}/{w.get('slots', 0)}",
                      str(w.get("processes", "")), str(w.get("acked", "")),
                      str(w.get("failed", "")),
                      f"{w.get('age_s', 0)}s ago" + (", silent" if w.get("silent") else ""))
    return table


def reorder_line(stats: dict[str, str], now_ms: int) -> str:
    """The last fair-share reorder, from the ``reorder_*`` fields of ``Keys.stats``
    (written by ``scheduler/queue/lua/overload.lua``); unknown extra fields are listed as they are."""
    fields = {k: v for k, v in stats.items() if k.startswith("reorder_")}
    if not fields:
        return "last reorder: none (no overload seen)"
    at = fields.pop("reorder_at", None)
    when = f" {format_duration(max(0, now_ms - int(at)) / 1000)} ago" if str(at).isdigit() else ""
    parts = []
    if "reorder_jobs" in fields:
        parts.append(f"{fields.pop('reorder_jobs')} jobs of {fields.pop('reorder_tasks', '?')} "
                     "tasks interleaved")
    if "reorder_count" in fields:
        parts.append(f"{fields.pop('reorder_count')} so far")
    known = ("reorder_duration", "reorder_chunks", "reorder_longest_call", "reorder_worker")
    parts += [f"{k}={v}" for k, v in sorted(fields.items()) if k not in known]
    return f"last reorder{when}: {', '.join(parts)}".rstrip(": ")


def down_line(down: dict[str, Any]) -> Text:
    """One line for a shard that did not answer (``QueueSnapshot.shards_down``)."""
    return Text(visible(f"shard {down['shard']} {down['tag']} down, left out of these "
                        f"figures: {down['error']}"), style="bold red")


def top_frame(snap: QueueSnapshot, meter: RateMeter | None = None) -> RenderableType:
    """The whole ``fleetsched top`` frame."""
    late = f", oldest {format_duration(snap.oldest_late_ms / 1000)} late" if snap.oldest_late_ms else ""
    queue = Text(f"queue  due {snap.due_now} (overdue {snap.overdue}{late})  running "
                 f"{snap.running}  parked {snap.parked}  later/windows {snap.later}  held "
                 f"{snap.held}  dead {snap.dead}")
    # a node that missed its beats (killed -9, stuck) is not counted alive, nor its slots
    counted = tally(snap.workers)  # the snapshot holds no stale node
    alive, silent, busy, slots = counted.alive, counted.silent, counted.busy, counted.slots
    parts: list[RenderableType] = [
        queue,
        *[down_line(d) for d in snap.shards_down],
        Text(f"workers {len(alive)} alive"
             + (f", {silent} silent (killed or stuck? its jobs come back as their leases run "
                "out)" if silent else "")
             + f", {busy}/{slots} slots busy   recorder lag "
             f"{snap.recorder_lag} (pending {snap.recorder_pending}, stream "
             f"{snap.stream_length})   {reorder_line(snap.stats, snap.now_ms)}"),
        Text(""),
    ]
    if snap.tasks:
        parts.append(task_table(snap.tasks, meter))
        if snap.finished_tasks > 3:
            parts.append(Text(f"({snap.finished_tasks} finished tasks, latest shown)",
                              style="dim"))
    else:
        parts.append(Text("no tasks in the shards that answered" if snap.shards_down
                          else "no tasks in the queue"))
    if snap.workers:
        parts += [Text(""), _workers(snap.workers)]
    return Group(*parts)


__all__ = ["bar", "down_line", "reorder_line", "task_table", "top_frame"]
