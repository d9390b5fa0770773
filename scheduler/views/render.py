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


def _cells(t: TaskProgress, meter: RateMeter | None, labels: dict[str, str] | None,
           width: int) -> dict[str, Text | str]:
    label = (labels or {}).get(t.task_id) or f"{t.task_id} {t.operator} {t.action}".strip()
    rate = meter.rate(t.task_id) if meter else 0.0
    n = t.progress.counts()  # every number from scheduler.progress
    return {"task": Text(visible(label)), "progress": bar(t, width),
            "done": f"{n['done']}/{n['total']}", "ok": str(n["succeeded"]),
            "failed": Text(str(n["failed"]), style="red" if n["failed"] else ""),
            "lost": Text(str(n["lost"]), style="magenta" if n["lost"] else ""),
            "running": str(n["running"]), "waiting": str(n["pending"]),
            "rate/s": f"{rate:.0f}",
            "eta": _eta(meter, t)}


def _table(rows: list[dict[str, Text | str]], columns: tuple[str, ...], *,
           widths: dict[str, int] | None = None, header: bool = True) -> Table:
    table = Table(show_edge=False, box=None, header_style="bold", pad_edge=False,
                  show_header=header)
    for col in columns:
        table.add_column(col, justify="left" if col in ("task", "progress") else "right",
                         no_wrap=True, width=(widths or {}).get(col))
    for cells in rows:
        table.add_row(*[cells[c] for c in columns])
    return table


def task_table(tasks: list[TaskProgress], meter: RateMeter | None = None, *,
               labels: dict[str, str] | None = None, width: int = 30,
               columns: tuple[str, ...] = COLUMNS) -> Table:
    """One row per task: name, bar, counts, throughput and ETA (``columns`` picks some)."""
    return _table([_cells(t, meter, labels, width) for t in tasks], columns)


FAILURES_SHOWN = 3  # while watching: the last failures of a task under its bar
FAILURES_FINAL = 20  # in the last frame (a pipe or a log file gets that one only)
INDENT = "  "


def _line(text: str, style: str = "") -> Text:
    """One line of a task's details, cut (``...``) rather than wrapped at the console's width:
    a frame stays as tall at 80 columns as at 120. A newline in it (a multi-line error) is
    shown as ``^J``, as ``cat -v`` shows other controls: it can neither break the frame nor
    fake a line of its own."""
    return Text(visible(text).replace("\n", "^J"), style=style, no_wrap=True,
                overflow="ellipsis")


def failure_lines(f: dict[str, Any]) -> list[Text]:
    """A failed (or lost) host: its job, exit code or signal name (``SIGKILL``) and error, then
    the last lines it printed, indented (control characters shown: ``scheduler.visible``)."""
    from scheduler.queue.output import shown_exit

    code = shown_exit(f.get("exit_code"), f.get("error"))
    code = f" exit {code}" if code.isdigit() or code.startswith("-") else (
        f" {code}" if code else "")
    error = f": {f['error']}" if f.get("error") else ""
    out = [_line(f"{f['kind']:>4} {f['job']} on {f['host']}{code}{error}", style="red")]
    out += [_line(f"       {f['host']}: {line}") for line in f.get("last_lines") or ()]
    return out


def host_lines(task: TaskProgress, failures: list[dict[str, Any]], *,
               final: bool = False) -> list[Text]:
    """What goes under a task's bar in ``tasks watch``: the hosts running now (at most
    ``RUNNING_SHOWN``, longest first: host, worker, for how long; then how many more), and its
    failures, each with its last lines (the last ``FAILURES_SHOWN``, or ``FAILURES_FINAL`` in
    the last frame; how many earlier ones ``tasks output --failed`` lists)."""
    out: list[Text] = []
    for i, r in enumerate(task.running_hosts):
        on = f" on {r['worker']}" if r.get("worker") else ""
        took = f", {format_duration(r['for_s'])}" if r.get("for_s") is not None else ""
        head = "running " if i == 0 else " " * 8
        out.append(_line(f"{INDENT}{head}{r['host']}{on}{took}"))
    more = task.running - len(task.running_hosts)
    if more > 0 and task.running_hosts:
        out.append(_line(f"{INDENT}{' ' * 8}+{more} more"))
    elif more > 0:
        out.append(_line(f"{INDENT}running on {more} host{'s' if more > 1 else ''}"))
    mine = [f for f in failures if str(f.get("job", "")).rpartition(".")[0] == task.task_id]
    shown = mine[-(FAILURES_FINAL if final else FAILURES_SHOWN):]
    if len(mine) > len(shown):
        out.append(_line(f"{INDENT}+{len(mine) - len(shown)} earlier failures: fleetsched "
                         f"tasks output {task.task_id} --failed", style="red"))
    for f in shown:
        out += [Text(INDENT) + line for line in failure_lines(f)]
    return out


NARROW = 110  # below this many columns, tasks watch draws a shorter bar and fewer columns


def watch_frame(tasks: list[TaskProgress], meter: RateMeter | None,
                failures: list[dict[str, Any]], *, labels: dict[str, str] | None = None,
                final: bool = False, console_width: int = 120) -> Group:
    """``tasks watch``'s frame: each task's row (its bar, counts, rate, ETA), then under it
    ``host_lines``; the rows' columns line up across tasks. On a console narrower than
    ``NARROW`` (80 columns) the bar is 16 cells and the row leaves out waiting and rate/s (and
    lost while nothing was lost), so what is left reads whole."""
    columns, width = COLUMNS, 30
    if console_width < NARROW:
        width = 16
        lost = any(t.lost for t in tasks)
        columns = tuple(c for c in COLUMNS if c not in ("waiting", "rate/s")
                        and (c != "lost" or lost))
    rows = [_cells(t, meter, labels, width) for t in tasks]
    widths = {c: max([len(c), *(len(r[c]) for r in rows)]) for c in columns}
    parts: list[RenderableType] = []
    for i, (t, cells) in enumerate(zip(tasks, rows)):
        parts.append(_table([cells], columns, widths=widths, header=i == 0))
        parts += host_lines(t, failures, final=final)
    return Group(*parts)


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


__all__ = ["FAILURES_FINAL", "FAILURES_SHOWN", "bar", "down_line", "failure_lines", "host_lines",
           "reorder_line", "task_table", "top_frame", "watch_frame"]
