"""``submit`` over the API (``scheduler.verbs.submit``): the request is sent as a task file's
keys (``POST /tasks``, the one mapping ``task_request`` parses on the server), with the
idempotency key as the ``Idempotency-Key`` header.

1. ``confirm`` (the CLI asks before a fleet-wide task) needs the plan before anything is
   queued: with one, a dry run is asked first, and the task is submitted only if ``confirm``
   does not raise;
2. the answer is the local verb's ``Submission``, its ``plan`` a ``PlanView`` (what the server
   says of the plan: the whole view for a dry run, the summary for a submitted task), its
   ``repeat`` a ``Repeat`` when the key's first task came back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scheduler.remote.client import Client
from scheduler.submission.plan_view import PlanView
from scheduler.verbs.submit import Presence, Submission

if TYPE_CHECKING:
    from scheduler.submission.submit import TaskRequest

__all__ = ["post_submission", "request_keys", "submit", "worker_presence"]


def _seconds(value: float) -> str:
    return f"{value:.3f}".rstrip("0").rstrip(".") + "s"


def request_keys(request: TaskRequest) -> dict[str, Any]:
    """``request`` as a task file's keys (``scheduler.submission.request.KEYS``), which
    ``task_request`` parses back into the same request."""
    waves = request.waves
    keys: dict[str, Any] = {
        "action": request.action, "target": request.target, "params": dict(request.params),
        "name": request.name, "at": request.at.isoformat() if request.at else None,
        "in": _seconds(request.delay.total_seconds()) if request.delay else None,
        "in_window": request.in_window, "ignore_windows": request.ignore_windows,
        "break_glass": request.break_glass, "customer_output": request.customer_output,
        "max_concurrency": str(request.max_concurrency) if request.max_concurrency else None,
        "max_failures": str(request.max_failures) if request.max_failures else None,
        "count_failures": request.count_failures,
        "timeout": _seconds(request.timeout_s) if request.timeout_s is not None else None,
        "retries": request.retries,
        "backoff": (None if request.backoff_s is None else
                    "0" if request.backoff_s == 0 else _seconds(request.backoff_s)),
        "priority": request.priority, "executor": request.executor,
        "executor_options": dict(request.executor_options),
        "idempotent": request.idempotent, "allow_overlap": request.allow_overlap,
        "notify": list(request.notify)}
    if waves is not None:
        keys.update(waves=",".join(str(s) for s in waves.sizes), wave_order=waves.order,
                    wave_pause=_seconds(waves.pause_s) if waves.pause_s else None,
                    wave_gate=waves.gate, wave_check=waves.check,
                    wave_seed=None if waves.seed is None else str(waves.seed))
    return {k: v for k, v in keys.items() if v is not None}


def _view(done: dict[str, Any]) -> PlanView:
    if "plan" in done:
        return PlanView.from_dict(done["plan"])
    return PlanView(head={"action": done["action"], "hosts": done["host_count"],
                          "groups": done["groups"]},
                    params={}, rows=[], waves=False, blast_radius=done["blast_radius"],
                    fleet_wide=done["fleet_wide"])


def submit(stores: Client, _principal: None, request: TaskRequest, *, dry_run: bool = False,
           confirm: Callable[[PlanView], None] | None = None,
           request_key: str | None = None) -> Submission:
    """Plan ``request`` on the server; unless ``dry_run``, let ``confirm`` see the plan, then
    have the server record and queue it as the token owner's (see the module docstring)."""
    return post_submission(stores, "/tasks", request_keys(request), dry_run=dry_run,
                           confirm=confirm, request_key=request_key)


def post_submission(stores: Client, path: str, body: dict[str, Any], *, dry_run: bool,
                    confirm: Callable[[PlanView], None] | None,
                    request_key: str | None) -> Submission:
    """A submission through ``path`` (``/tasks``, or a template's ``/run``): the plan (the
    server's dry run), shown to ``confirm``; then the task recorded and queued, or the first
    one of ``request_key``'s (a repeat), rebuilt from the server's JSON."""
    from scheduler.submission.repeats import Repeat

    if dry_run or confirm is not None:
        planned = stores.post(path, {**body, "dry_run": True})
        view = _view(planned)
        if dry_run:
            return Submission(plan=view, operator=planned["operator"])  # type: ignore[arg-type]
        assert confirm is not None
        confirm(view)
    headers = {"Idempotency-Key": request_key} if request_key is not None else None
    done = stores.post(path, body, headers=headers)
    if done.get("repeat"):
        first = Repeat(task_id=done["task_id"], jobs=done["jobs"], state=done["state"],
                       action=done["action"])
        return Submission(plan=None, task_id=first.task_id, jobs=first.jobs,
                          operator=done["operator"], repeat=first)
    return Submission(plan=_view(done), task_id=done["task_id"],  # type: ignore[arg-type]
                      jobs=done["jobs"], operator=done["operator"])


def worker_presence(_stores: Client) -> Presence | None:
    """Not known through the API: ``status`` there shows the workers."""
    return None
