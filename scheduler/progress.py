"""How a task's jobs are counted, its state and its exit code: one rule for every view, report,
notice and script.

``tasks show``, ``tasks list``, ``tasks watch``, ``tasks wait``, ``submit --wait``, ``top``,
``report`` (table, JSON, CSV, HTML), the notices, ``schedules show`` and the demo's bars all build
a :class:`Progress` from their source and print what its :meth:`Progress.counts` and
:meth:`Progress.sentence` say; none of them adds counters up on its own. The sources:
:func:`from_task_hash` (the live task hash in Redis), :func:`from_job_states` (the SQL job rows)
and :func:`from_task_row` (the SQL task row's counters, which the recorder keeps); for the same
task they give the same numbers.

The counts (docs/reliability.md, section 12): every job is counted once, by how it ended.

- ``succeeded``, ``cancelled``, ``running``: jobs in that state;
- ``failed``: jobs failed for good by their **host** (the action failed or timed out): what
  ``max_failures`` and a wave's failure limit count;
- ``lost``: jobs ended because their run was lost with its **worker** (a child killed, an
  expired lease) and not run again: a job state of its own, shown beside ``failed`` and never
  inside it (the task hash's ``lost_failed``; its ``failed`` counts them too and its ``lost``
  counts every loss of a worker, retried ones included, so neither is used as it is);
- ``done`` = succeeded + failed + lost + cancelled; ``pending`` = the rest (due, parked, held,
  waiting for a window, a start time or a retry). ``total`` is the sum of them all.

The state (:attr:`Progress.state`) is the recorded state where it says more than the counters
(``accepted``, ``cancelled``, ``aborted``; ``paused`` while jobs remain), else what the jobs
say once all have ended: ``succeeded`` when every job succeeded, ``failed`` when any failed or
was lost, ``cancelled`` when the rest were cancelled; ``active`` before that.

A rollout in waves that stopped (a wave's failures or its health check; ``rollout`` is the task
hash's ``wave_state``) waits for an operator (``tasks continue`` or ``tasks cancel``): it has
ended as far as waiting goes, state ``stopped``, once none of its jobs runs.

The exit code of waiting for tasks (README, "Exit codes"): 3 when any job failed or was lost or a
rollout stopped, 5 when a task was cancelled or aborted (or jobs were cancelled) and none failed,
0 when every job succeeded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ENDED_BY_OPERATOR = ("cancelled", "aborted")

EXIT_SUCCEEDED, EXIT_FAILED, EXIT_CANCELLED = 0, 3, 5


@dataclass(frozen=True)
class Progress:
    """One task's counts and recorded state (see the module docstring)."""

    total: int
    succeeded: int = 0
    failed: int = 0  # by the host (max_failures counts these); lost ones are in ``lost``
    cancelled: int = 0
    running: int = 0
    recorded_state: str = "active"
    lost: int = 0
    rollout: str = ""  # wave_state of a task in waves ("" otherwise)

    @property
    def stopped(self) -> bool:
        """A rollout in waves stopped and waiting for the operator, nothing running."""
        return (self.rollout == "stopped" and self.running == 0
                and self.recorded_state in ("active", "paused"))

    @property
    def done(self) -> int:
        return self.succeeded + self.failed + self.lost + self.cancelled

    @property
    def pending(self) -> int:
        return max(0, self.total - self.running - self.done)

    @property
    def finished(self) -> bool:
        """Every job has ended."""
        return self.total > 0 and self.done >= self.total

    @property
    def ended(self) -> bool:
        """Nothing more happens to the task without an operator: every job ended, or the task
        was cancelled or aborted and none of its jobs runs any more."""
        return self.finished or self.stopped or (
            self.recorded_state in ENDED_BY_OPERATOR and self.running == 0)

    @property
    def state(self) -> str:
        if self.recorded_state in ("accepted", *ENDED_BY_OPERATOR):
            return self.recorded_state
        if self.stopped:
            return "stopped"
        if not self.finished:
            return "paused" if self.recorded_state == "paused" else "active"
        if self.unsuccessful:
            return "failed"
        return "cancelled" if self.cancelled else "succeeded"

    @property
    def unsuccessful(self) -> int:
        """Jobs that ended without success and were not cancelled: failed plus lost (what makes
        a finished task ``failed`` and its wait exit 3)."""
        return self.failed + self.lost

    @property
    def exit_code(self) -> int:
        return exit_code([self])

    def counts(self) -> dict[str, Any]:
        """The numbers every view prints, by name (the module docstring's rule)."""
        return {"state": self.state, "total": self.total, "succeeded": self.succeeded,
                "failed": self.failed, "lost": self.lost, "cancelled": self.cancelled,
                "running": self.running, "pending": self.pending, "done": self.done}

    def outcome_text(self) -> str:
        """The jobs that ended without success, in words, as the sentence and the notices say
        them: ``1 failed, 2 lost with their worker, 0 cancelled`` (the lost ones named when
        there are any)."""
        lost = f"{self.lost} lost with their worker, " if self.lost else ""
        return f"{self.failed} failed, {lost}{self.cancelled} cancelled"

    def counts_text(self) -> str:
        """The counts in words: ``45 of 48 succeeded, 1 failed, 2 lost with their worker, 0
        cancelled`` (and ``, 3 running, 5 waiting`` while jobs remain): what ``tasks wait``,
        ``tasks show`` and the notices say."""
        text = f"{self.succeeded} of {self.total} succeeded, {self.outcome_text()}"
        if self.running:
            text += f", {self.running} running"
        if self.pending:
            text += f", {self.pending} waiting"
        return text

    def sentence(self) -> str:
        """One line an operator reads: ``failed: 45 of 48 succeeded, 1 failed, 2 lost with
        their worker, 0 cancelled``."""
        return f"{self.state}: {self.counts_text()}"


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def from_task_hash(data: Mapping[str, Any]) -> Progress:
    """From the live task hash in Redis (``{P}:task:<id>``): its ``failed`` counts the jobs
    lost with their worker too, and its ``lost_failed`` says how many of them that was."""
    lost = _int(data.get("lost_failed"))
    return Progress(total=_int(data.get("total")), succeeded=_int(data.get("succeeded")),
                    failed=max(0, _int(data.get("failed")) - lost), lost=lost,
                    cancelled=_int(data.get("cancelled")), running=_int(data.get("running")),
                    recorded_state=str(data.get("state") or "active"),
                    rollout=str(data.get("wave_state") or ""))


def from_job_states(recorded_state: str, counts: Mapping[str, int]) -> Progress:
    """From the SQL record: the number of the task's jobs in each job state."""
    return Progress(total=sum(_int(n) for n in counts.values()),
                    succeeded=_int(counts.get("succeeded")), failed=_int(counts.get("failed")),
                    lost=_int(counts.get("lost")), cancelled=_int(counts.get("cancelled")),
                    running=_int(counts.get("running")), recorded_state=recorded_state)


def from_task_row(t: Any) -> Progress:
    """From the SQL task row's counters (the recorder recounts them from the job rows: ``failed``
    and ``lost`` are the job states, as :func:`from_job_states` counts them)."""
    return Progress(total=_int(t.total), succeeded=_int(t.succeeded), failed=_int(t.failed),
                    lost=_int(t.lost), cancelled=_int(t.cancelled),
                    running=_int(getattr(t, "running", 0)), recorded_state=str(t.state),
                    rollout=getattr(t, "wave_state", None) or "")


def from_counts(counts: Mapping[str, Any], recorded_state: str = "active") -> Progress:
    """Back from the numbers :meth:`Progress.counts` gave (a notice's ``counts``, a JSON row)."""
    return Progress(total=_int(counts.get("total")), succeeded=_int(counts.get("succeeded")),
                    failed=_int(counts.get("failed")), lost=_int(counts.get("lost")),
                    cancelled=_int(counts.get("cancelled")), running=_int(counts.get("running")),
                    recorded_state=recorded_state)


def exit_code(progresses: Iterable[Progress]) -> int:
    """The exit code of waiting for these tasks (see the module docstring)."""
    progresses = list(progresses)
    if any(p.unsuccessful or p.stopped for p in progresses):
        return EXIT_FAILED
    if any(p.cancelled or p.recorded_state in ENDED_BY_OPERATOR for p in progresses):
        return EXIT_CANCELLED
    return EXIT_SUCCEEDED


def _seconds_text(seconds: float) -> str:
    """A timeout as an operator writes it: 5s, 30m, 1h30m, 2d, 0.5s (exact, unlike
    ``parse.format_duration``'s rounded 3m05s)."""
    if seconds != int(seconds) or seconds < 1:
        return f"{seconds:g}s"
    s, text = int(seconds), ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if s >= size:
            text, s = text + f"{s // size}{unit}", s % size
    return text


def not_finished(task_ids: Sequence[str], timeout_s: float,
                 progresses: Iterable[Progress]) -> str:
    """Why a wait gave up: ``task 7 not finished after 5s: 1 job waiting`` (``tasks 7, 8 ...:
    2 jobs running, 3 waiting``), with the timeout as asked and the jobs left as they are."""
    running = pending = 0
    for p in progresses:
        running, pending = running + p.running, pending + p.pending
    noun = "task" if len(task_ids) == 1 else "tasks"
    left = [f"{n} job{'s' if n != 1 else ''} {what}" for n, what in
            ((running, "running"), (pending, "waiting")) if n]
    if len(left) == 2:  # "2 jobs running, 3 waiting"
        left[1] = left[1].split(" ", 2)[0] + " waiting"
    return (f"{noun} {', '.join(task_ids)} not finished after {_seconds_text(timeout_s)}"
            + (f": {', '.join(left)}" if left else ""))


__all__ = ["EXIT_CANCELLED", "EXIT_FAILED", "EXIT_SUCCEEDED", "Progress", "exit_code",
           "from_counts", "from_job_states", "from_task_hash", "from_task_row", "not_finished"]
