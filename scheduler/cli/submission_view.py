"""What ``fleetsched submit`` and ``fleetsched templates run`` print of a submission, and the
fleet-wide confirmation both ask: the plan (a dry run), a repeat of an idempotency key's first
task, a task queued (its id on stdout, the rest on stderr), and a warning when no live worker
serves the queue. Shared by the two commands so both answer alike.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import typer

from scheduler.cli import output
from scheduler.cli.context import verbs_for
from scheduler.errors import DeclinedError

if TYPE_CHECKING:
    from scheduler.submission.plan_view import PlanView

__all__ = ["confirm", "show_plan", "show_repeat", "show_submitted", "view",
           "warn_without_workers"]


def view(plan: Any, draw: bool = False) -> PlanView:
    """The plan as ``submit`` shows it (a ``PlanView`` already when the server made it)."""
    from scheduler.submission.plan_view import PlanView, view_of

    return plan if isinstance(plan, PlanView) else view_of(plan, draw=draw)


def show_plan(view: PlanView, fmt: output.OutputFormat) -> None:
    """A dry run's plan: its head and one row per job (JSON: one object)."""
    if view.drawn is not None:
        output.info(f"note: these waves are one random draw, seed {view.drawn}: submit with "
                    f"--wave-seed {view.drawn} to roll out exactly these (without it, the task "
                    "id seeds the draw)")
    if fmt is output.OutputFormat.json:
        output.emit_object({"dry_run": True, "plan": view.head, "params": view.params,
                            "jobs": view.rows}, fmt)
        return
    if fmt is output.OutputFormat.table:
        output.emit_object(view.head, fmt)
    output.emit_rows(view.rows, (["wave"] if view.waves else []) + ["job", "host", "when"], fmt)


def confirm(plan: Any, yes: bool) -> None:
    """Ask before a fleet-wide task (``yes``: do not); ``DeclinedError`` without a terminal."""
    shown = view(plan)
    if yes or not shown.fleet_wide:
        return
    if not sys.stdin.isatty():
        raise DeclinedError(f"fleet-wide task not submitted: {shown.blast_radius}; "
                            "there is no terminal to confirm it", hint="add --yes")
    output.info(f"fleet-wide: {shown.blast_radius}")
    if not typer.confirm("Submit it?", default=False, err=True):
        raise DeclinedError("not submitted")


def warn_without_workers(stores: Any) -> None:
    """Say on stderr when no live worker serves the queue: the task is accepted and waits."""
    presence = verbs_for(stores, "submit").worker_presence(stores)
    if presence is None or presence.live:
        return  # the task is queued; whatever is wrong with Redis now, status will say
    seen = (f" (the last one was seen {presence.last_seen_s:.0f}s ago)"
            if presence.last_seen_s is not None else "")
    output.info(f"warning: no live worker serves this queue{seen}: the task waits until one "
                "starts (`fleetsched worker`; `fleetsched status` shows the workers)")


def show_repeat(first: Any, key: str, fmt: output.OutputFormat) -> None:
    """A repeat's answer: the first task's id, as a new submit prints one."""
    if fmt is output.OutputFormat.table:
        output.stdout.print(str(first.task_id))
    else:
        output.emit_object({"task_id": first.task_id, "jobs": first.jobs, "state": first.state,
                            "action": first.action, "repeat": True}, fmt)
    output.info(f"task {first.task_id} was already submitted with idempotency key {key}; "
                "nothing was queued again")
    if first.state == "accepted":
        output.info(f"task {first.task_id} is recorded but not queued yet: the first submit "
                    "may still be queueing it; `fleetsched reconcile` queues it if Redis failed")


def show_submitted(stores: Any, done: Any, fmt: output.OutputFormat) -> None:
    """A queued task: its id on stdout (or an object), what it is on stderr."""
    from scheduler.submission.plan_view import PlanView

    shown = view(done.plan)
    if fmt is output.OutputFormat.table:
        output.stdout.print(str(done.task_id))
    else:
        output.emit_object({"task_id": done.task_id, "jobs": done.jobs, "state": "queued",
                            "action": shown.head["action"], "hosts": shown.head["hosts"],
                            "groups": shown.head["groups"]}, fmt)
    output.info(f"task {done.task_id} queued: {shown.blast_radius}, as {done.operator}")
    waves = None if isinstance(done.plan, PlanView) else done.plan.waves(done.task_id)
    if waves:
        output.info(f"in {len(waves)} waves ({done.plan.request.waves.describe()}): wave 1 is "
                    f"{len(waves[0])} host(s); `fleetsched tasks show {done.task_id}` follows it")
    warn_without_workers(stores)
