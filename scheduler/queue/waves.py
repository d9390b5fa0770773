"""The queue verbs of a rollout in waves: stage, release_wave, wave (a state change).

1. :func:`stage`: the jobs of waves 2.. get job hashes in state ``waiting`` and entries in
   ``Keys.waves`` (``stage.lua``), never in a due set: ``claim`` never sees them;
2. :func:`release_wave`: wave k's waiting jobs become pending in the task's class due set (or
   held, the task being paused), compare-and-set on the wave and its state (``release_wave.lua``);
3. :func:`move`: a wave state change with its event (``wave.lua``), compare-and-set as well;
4. :func:`wave_jobs` and :func:`wave_outcome`: a wave's job ids and, read in one pipeline, how
   many are still live (its failures are counted as they happen: ``fs_wave_failed``).

The state machine that calls these is ``scheduler.submission.rollout``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from scheduler.principal import Principal
from scheduler.queue.client import JobSpec, Queue
from scheduler.queue.types import check_task_id, signed, text

__all__ = ["LIVE_STATES", "STAGE_CHUNK", "WAVE_STATES", "WaveOutcome", "move", "release_wave",
           "stage", "wave_jobs", "wave_outcome"]

STAGE_CHUNK = 1_000  # jobs per stage.lua call
WAVE_STATES = ("running", "pausing", "gated", "approved", "checking", "stopped", "continued",
               "done")
LIVE_STATES = ("waiting", "pending", "running", "parked", "held", "hostwait")  # not ended yet


def stage(queue: Queue, task_id: str, waves: int, policy: dict,
          jobs: Sequence[tuple[JobSpec, int]], *, released: int = 1,
          state: str = "running", wave_failures: int = 0) -> int:
    """List every job by wave, stage those of the waves after ``released``; returns how many
    were newly staged. ``state``: the wave state a new rollout starts in; ``wave_failures``:
    the failures the released wave had counted already (a rollout rebuilt by reconcile).

    Call it after ``Queue.enqueue`` of the released waves' jobs (enqueue skips ids below the
    span)."""
    check_task_id(task_id)
    k = queue.keys
    keys = [k.task(task_id), k.waves(task_id), k.waving, k.stats, k.events]
    encoded = json.dumps(policy, sort_keys=True, separators=(",", ":"))
    added = 0
    for start in range(0, len(jobs), STAGE_CHUNK):
        rows = [[j.job_id, j.host, str(j.due_ms), j.window or "",
                 "" if j.wclose_ms is None else str(j.wclose_ms), str(wave)]
                for j, wave in jobs[start:start + STAGE_CHUNK]]
        reply = queue.call("stage", keys, [k.tag, task_id, waves, encoded,
                                           json.dumps(rows, separators=(",", ":")), released,
                                           state, wave_failures])
        added += int(reply[0])
    return added


def release_wave(queue: Queue, task_id: str, wave: int, from_states: Sequence[str],
                 operator: str = "") -> int | None:
    """Release wave ``wave``; the jobs released, or None if the task moved on meanwhile."""
    check_task_id(task_id)
    k = queue.keys
    keys = [k.task(task_id), k.waves(task_id), k.held(task_id), *k.all_due(), k.events]
    [released] = queue.call("release_wave", keys, [k.tag, task_id, wave, " ".join(from_states),
                                                   operator, k.wake])
    return None if int(released) < 0 else int(released)


def move(queue: Queue, task_id: str, wave: int, from_states: Sequence[str], to: str, kind: str,
         *, why: str = "", until_ms: int | None = None,
         operator: Principal | str = "") -> bool:
    """Change the wave state from one of ``from_states`` to ``to`` (event ``kind``)."""
    check_task_id(task_id)
    if to not in WAVE_STATES:
        raise ValueError(f"unknown wave state {to!r}")
    k = queue.keys
    [moved] = queue.call("wave", [k.task(task_id), k.waving, k.events],
                         [task_id, wave, " ".join(from_states), to, why[:2000],
                          "" if until_ms is None else until_ms, kind, *signed(operator)])
    return bool(int(moved))


def wave_jobs(queue: Queue, task_id: str, wave: int) -> list[tuple[str, str]]:
    """(job id, host) of every job of wave ``wave``, in job order."""
    members = queue.client.zrangebyscore(queue.keys.waves(task_id), wave, wave)
    pairs = [tuple(text(m).split(" ", 1)) for m in members]
    return sorted(((i, h) for i, h in pairs), key=lambda p: int(p[0].rsplit(".", 1)[1]))


@dataclass(frozen=True)
class WaveOutcome:
    live: int  # jobs not ended yet
    hosts: list[str]  # every host of the wave


def wave_outcome(queue: Queue, task_id: str, wave: int) -> WaveOutcome:
    """How wave ``wave``'s jobs stand, from their hashes read in one pipeline (a missing hash:
    succeeded or cancelled)."""
    jobs = wave_jobs(queue, task_id, wave)
    pipe = queue.client.pipeline(transaction=False)
    for job_id, _host in jobs:
        pipe.hget(queue.keys.job(job_id), "state")
    live = sum(1 for state in pipe.execute() if state is not None and text(state) in LIVE_STATES)
    return WaveOutcome(live, [h for _, h in jobs])
