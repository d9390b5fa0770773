"""The wave controller's steps and ``tasks continue``: a rollout in waves, moved on from Redis.

Every worker node runs the controller (``workers.waver``); the state lives in the task hash
(``wave``, ``waves``, ``wave_state``, ``wave_why``, ``wave_until``, ``wave_policy``) and in
``{P}:waves:<task>``, so any node carries on after another dies. :func:`step`, under the
task's short lock (``Keys.wave_lock``, SET NX PX), does at most one thing:

1. ``running``: once every job of the current wave has ended (one pipelined read of the
   wave's job hashes), end the rollout (``wave-done``) after the last wave, else go on. (A wave
   whose failures reach its limit was stopped by the failing job's own script, at once:
   ``fs_wave_failed`` in ``_lib.lua``, which also pauses the task so the wave's pending jobs
   are held; the state is then ``stopped``);
2. the pause (``pausing`` until ``wave_until``, event ``wave-wait``), then the gate (``gated``,
   ``wave-wait``; ``tasks continue`` makes it ``approved``), then the check (``checking``,
   ``wave-check``: the command on the finished wave's hosts; any failure stops the rollout,
   naming the hosts and what they printed), then ``release_wave`` of the next wave;
3. ``stopped`` waits for the operator: ``tasks continue`` (``continued``: the held jobs of the
   wave are resumed, and the next wave is released without a check once the wave has ended)
   or ``tasks cancel`` (cancels the staged waves too);
4. a paused task is left alone; a cancelled, aborted or vanished one leaves ``{P}:waving``.

Every transition is a compare-and-set script (``scheduler.queue.waves``), so two controllers
acting at once (a lock that expired during a slow check) change the state once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from scheduler.errors import ValidationError
from scheduler.principal import Principal
from scheduler.queue.client import Queue
from scheduler.queue.presence import redis_now_ms
from scheduler.queue.waves import move, release_wave, wave_outcome

if TYPE_CHECKING:  # the wave controller runs in every worker: no SQLAlchemy on its path
    from sqlalchemy.engine import Engine

__all__ = ["Check", "LOCK_MS", "continue_rollout", "describe", "step"]

LOCK_MS = 10_000  # the per-task lock for one step: a node killed mid-step holds it this long
CHECK_TIMEOUT_S = 60.0  # per host
CHECK_LOCK_MS = 120_000  # the lock while a health check runs: longer than the check may take
Check = Callable[[dict[str, str], list[str], str], list[str]]
"""(task hash, hosts, command) -> one line per host whose check failed; [] when all passed."""


def describe(task: dict[str, str]) -> dict[str, Any] | None:
    """The rollout as views show it (``tasks show``, ``tasks watch``), from the task hash."""
    if not task.get("waves"):
        return None
    policy = json.loads(task.get("wave_policy") or "{}")
    state, wave, waves = task.get("wave_state", ""), task.get("wave", "?"), task.get("waves")
    waits = {"running": f"wave {wave}'s jobs to end",
             "pausing": f"the pause until {_shown_ms(task.get('wave_until'))}",
             "gated": f"an operator: fleetsched tasks continue {task.get('id', 'TASK')}",
             "approved": "the controller (gate passed)",
             "checking": f"the check `{policy.get('check')}` on wave {wave}'s hosts",
             "stopped": "an operator: fleetsched tasks continue or tasks cancel",
             "continued": "the controller (continued by an operator)",
             "done": "nothing: every wave ended"}.get(state, "?")
    why = task.get("wave_why") or None
    if task.get("state") in ("cancelled", "aborted"):  # no wave moves again, nobody is awaited
        state, waits, why = task["state"], None, None
    return {"wave": int(wave) if str(wave).isdigit() else wave, "waves": int(waves),
            "state": state, "waits_for": waits, "why": why,
            "sizes": policy.get("sizes"), "order": policy.get("order"), "seed": policy.get("seed"),
            "pause_ms": policy.get("pause_ms"), "gate": policy.get("gate"),
            "check": policy.get("check"), "max_failures": policy.get("max_failures")}


def _shown_ms(ms: str | None) -> str:
    """A Redis clock time in ms as views print times: ``2026-11-28T05:50:45Z`` (``?``: none)."""
    if not ms or not str(ms).lstrip("-").isdigit():
        return "?"
    when = datetime.fromtimestamp(int(ms) / 1000, UTC)
    return when.isoformat(timespec="seconds").replace("+00:00", "Z")


def step(queue: Queue, task_id: str, now_ms: int, check: Check) -> str:
    """One step of the task's rollout (the caller holds its lock); what it did, in words."""
    t = queue.task_state(task_id)
    if not t or t.get("state") not in ("active", "paused") or t.get("wave_state") == "done":
        queue.client.srem(queue.keys.waving, task_id)
        return "left"
    if t["state"] == "paused":
        return "paused"
    state, wave, waves = t.get("wave_state", ""), int(t.get("wave") or 1), int(t.get("waves") or 1)
    policy = json.loads(t.get("wave_policy") or "{}")
    if state == "running":
        return _wave_ended(queue, task_id, t, wave, waves, policy, check)
    if state == "pausing":
        if now_ms < int(t.get("wave_until") or 0):
            return "pausing"
        return _gate(queue, task_id, t, wave, "pausing", policy, check)
    if state == "approved":
        return _check(queue, task_id, t, wave, "approved", policy, check)
    if state == "checking":  # a controller died during the check: run it again
        return _check(queue, task_id, t, wave, "checking", policy, check)
    if state == "continued":
        if wave_outcome(queue, task_id, wave).live:
            return "continued"  # a wave stopped early runs its held jobs first
        return _release(queue, task_id, wave, waves, "continued")
    return state  # gated, stopped: the operator acts


def _wave_ended(queue: Queue, task_id: str, t: dict[str, str], wave: int, waves: int,
                policy: dict[str, Any], check: Check) -> str:
    if wave_outcome(queue, task_id, wave).live:
        return "running"
    if wave >= waves:
        move(queue, task_id, wave, ["running"], "done", "wave-done")
        queue.client.delete(queue.keys.waves(task_id))
        return "done"
    pause_ms = int(policy.get("pause_ms") or 0)
    if pause_ms:
        until = _redis_ms(queue) + pause_ms
        move(queue, task_id, wave, ["running"], "pausing", "wave-wait", until_ms=until,
             why=f"pause {pause_ms / 1000:g}s after wave {wave}")
        return "pausing"
    return _gate(queue, task_id, t, wave, "running", policy, check)


def _gate(queue: Queue, task_id: str, t: dict[str, str], wave: int, frm: str,
          policy: dict[str, Any], check: Check) -> str:
    if policy.get("gate") == "approve":
        move(queue, task_id, wave, [frm], "gated", "wave-wait",
             why=f"wave {wave} ended; waiting for `fleetsched tasks continue {task_id}`")
        return "gated"
    return _check(queue, task_id, t, wave, frm, policy, check)


def _check(queue: Queue, task_id: str, t: dict[str, str], wave: int, frm: str,
           policy: dict[str, Any], check: Check) -> str:
    waves = int(t.get("waves") or 1)
    command = policy.get("check")
    if not command:
        return _release(queue, task_id, wave, waves, frm)
    if frm != "checking" and not move(queue, task_id, wave, [frm], "checking", "wave-check",
                                      why=f"checking `{command}` on wave {wave}'s hosts"):
        return frm
    hosts = wave_outcome(queue, task_id, wave).hosts
    try:
        problems = check(t, hosts, command)
    except Exception as exc:  # noqa: BLE001 - a check that cannot run stops the rollout
        problems = [f"the check could not run: {type(exc).__name__}: {exc}"]
    if problems:
        why = (f"wave {wave} check `{command}` failed on {len(problems)} of {len(hosts)} "
               f"hosts: " + "; ".join(problems[:5]) + ("; ..." if len(problems) > 5 else ""))
        move(queue, task_id, wave, ["checking"], "stopped", "wave-stop", why=why)
        return "stopped"
    return _release(queue, task_id, wave, waves, "checking")


def _release(queue: Queue, task_id: str, wave: int, waves: int, frm: str) -> str:
    if wave >= waves:
        move(queue, task_id, wave, [frm], "done", "wave-done")
        queue.client.delete(queue.keys.waves(task_id))
        return "done"
    released = release_wave(queue, task_id, wave + 1, [frm])
    return "released" if released is not None else frm


def _redis_ms(queue: Queue) -> int:
    return redis_now_ms(queue.client, queue.keys)


def continue_rollout(engine: Engine, queue: Queue, task_id: int,
                     operator: Principal | str) -> Any:
    """``tasks continue``: pass the gate of a gated rollout, or go on with a stopped one (the
    next wave is released without a check). Refused (``ValidationError``, exit code 2) when the
    task waits for neither."""
    from scheduler.submission.control import _run

    tid = str(task_id)

    def call() -> int:
        t = queue.task_state(tid)
        state, wave = t.get("wave_state"), int(t.get("wave") or 0)
        if not t.get("waves"):
            raise ValidationError(f"task {task_id} is not rolled out in waves",
                                  hint="`tasks continue` passes a wave gate or a stopped rollout")
        if t.get("state") not in ("active", "paused"):
            raise ValidationError(f"task {task_id} is {t.get('state')}: its rollout is over",
                                  hint=f"`fleetsched tasks retry-failed {task_id}` runs its "
                                       "failed jobs again" if t.get("state") == "aborted" else
                                       None)
        to = {"gated": "approved", "stopped": "continued"}.get(state or "")
        if to is None or not move(queue, tid, wave, [state or ""], to, "continue",
                                  operator=operator, why=f"continued after wave {wave}"):
            raise ValidationError(f"task {task_id} has no gate or stop to pass: wave {wave} of "
                                  f"{t.get('waves')} is {state}",
                                  hint=f"see `fleetsched tasks show {task_id}`")
        if t.get("state") == "paused" and t.get("wave_held") == "1":
            queue.resume(tid, operator)  # the jobs the stop held back run now
        # (paused by an operator, the task stays paused: `tasks resume` lets the wave go on)
        return wave
    return _run(engine, queue, task_id, "continue", call)

