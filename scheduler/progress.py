"""A task's progress, state and exit code, computed one way for every view, report and script.

``tasks show``, ``tasks watch``, ``tasks wait``, ``submit --wait``, ``top``, ``report`` and the
demo's bars all build a :class:`Progress` from their source (the live task hash in Redis, or the
SQL record) and print what it says; none of them adds counters up on its own.

The counts:

- ``succeeded``, ``cancelled``, ``running``: jobs in that state;
- ``failed``: jobs failed for good, **those lost with their worker included** (a lost job is a
  failed job whose cause is known: its worker vanished while it ran);
- ``lost``: of the failed, the ones lost with their worker, where the source knows it (the SQL
  record does; the live Redis counters do not, and say ``None``);
- ``done`` = succeeded + failed + cancelled; ``pending`` = the rest (due, parked, held, waiting
  for a window, a start time or a retry).

The state (:attr:`Progress.state`) is the recorded state where it says more than the counters
(``accepted``, ``cancelled``, ``aborted``; ``paused`` while jobs remain), else what the jobs
say once all have ended: ``succeeded`` when every job succeeded, ``failed`` when any failed, ``cancelled`` when
the rest were cancelled; ``active`` before that.

A rollout in waves that stopped (a wave's failures or its health check; ``rollout`` is the task
hash's ``wave_state``) waits for an operator (``tasks continue`` or ``tasks cancel``): it has
ended as far as waiting goes, state ``stopped``, once none of its jobs runs.

The exit code of waiting for tasks (README, "Exit codes"): 3 when any job failed or a rollout
stopped, 5 when a task was cancelled or aborted (or jobs were cancelled) and none failed, 0
when every job succeeded.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ENDED_BY_OPERATOR = ("cancelled", "aborted")

EXIT_SUCCEEDED, EXIT_FAILED, EXIT_CANCELLED = 0, 3, 5


@dataclass(frozen=True)
class Progress:
    """One task's counts and recorded state (see the module docstring)."""

    total: int
    succeeded: int = 0
    failed: int = 0
    cancelled: int = 0
    running: int = 0
    recorded_state: str = "active"
    lost: int | None = None
    rollout: str = ""  # wave_state of a task in waves ("" otherwise)

    @property
    def stopped(self) -> bool:
        """A rollout in waves stopped and waiting for the operator, nothing running."""
        return (self.rollout == "stopped" and self.running == 0
                and self.recorded_state in ("active", "paused"))

    @property
    def done(self) -> int:
        return self.succeeded + self.failed + self.cancelled

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
        if self.failed:
            return "failed"
        return "cancelled" if self.cancelled else "succeeded"

    @property
    def exit_code(self) -> int:
        return exit_code([self])

    def counts(self) -> dict[str, Any]:
        """The numbers every view prints, by name (``lost`` only where the source knows it)."""
        out = {"state": self.state, "total": self.total, "succeeded": self.succeeded,
               "failed": self.failed, "lost": self.lost, "cancelled": self.cancelled,
               "running": self.running, "pending": self.pending, "done": self.done}
        if self.lost is None:
            del out["lost"]
        return out

    def sentence(self) -> str:
        """One line an operator reads: ``failed: 45 of 48 succeeded, 3 failed (1 lost) ...``."""
        lost = f" ({self.lost} lost with their worker)" if self.lost else ""
        text = (f"{self.state}: {self.succeeded} of {self.total} succeeded, {self.failed} failed"
                f"{lost}, {self.cancelled} cancelled")
        if self.running:
            text += f", {self.running} running"
        if self.pending:
            text += f", {self.pending} waiting"
        return text


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def from_task_hash(data: Mapping[str, Any]) -> Progress:
    """From the live task hash in Redis (``{P}:task:<id>``), whose ``failed`` already counts
    the lost jobs (its ``lost`` field counts losses of a worker, retried ones included, so it is
    not a count of jobs and is not used here)."""
    return Progress(total=_int(data.get("total")), succeeded=_int(data.get("succeeded")),
                    failed=_int(data.get("failed")), cancelled=_int(data.get("cancelled")),
                    running=_int(data.get("running")),
                    recorded_state=str(data.get("state") or "active"),
                    rollout=str(data.get("wave_state") or ""))


def from_job_states(recorded_state: str, counts: Mapping[str, int]) -> Progress:
    """From the SQL record: the number of the task's jobs in each job state."""
    lost = _int(counts.get("lost"))
    return Progress(total=sum(_int(n) for n in counts.values()),
                    succeeded=_int(counts.get("succeeded")),
                    failed=_int(counts.get("failed")) + lost, lost=lost,
                    cancelled=_int(counts.get("cancelled")), running=_int(counts.get("running")),
                    recorded_state=recorded_state)


def exit_code(progresses: Iterable[Progress]) -> int:
    """The exit code of waiting for these tasks (see the module docstring)."""
    progresses = list(progresses)
    if any(p.failed or p.stopped for p in progresses):
        return EXIT_FAILED
    if any(p.cancelled or p.recorded_state in ENDED_BY_OPERATOR for p in progresses):
        return EXIT_CANCELLED
    return EXIT_SUCCEEDED


__all__ = ["EXIT_CANCELLED", "EXIT_FAILED", "EXIT_SUCCEEDED", "Progress", "exit_code",
           "from_job_states", "from_task_hash"]
