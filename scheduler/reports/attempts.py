"""What each job ran and printed, attempt by attempt, read from the SQL record.

- :func:`job_attempts`: one job (``fleetsched jobs show``): its host, state and every attempt
  (claimed when, by which worker, with which fencing token; how it ended; exit code; the
  output of each command, stdout and stderr apart, head and tail as the worker kept them), the
  late results of workers that had lost the job (``stale`` events), and for a job lost with
  its worker what is known and what to check on the host;
- :func:`task_outputs`: the last attempt of every job of a task, for ``tasks output``
  (``--host``, ``--failed``, ``--grep``).

Both take a ``tenant``: only that customer's jobs are read (another's is not found, as one that
does not exist), and their output is shown by the one rule of
``scheduler.record.tenancy.output_shown`` (the task's ``customer_output``); where it is not,
:func:`without_output` is what the customer is shown of a job (states and exit codes, no command
output or error line) and the answer says ``output_withheld``.

Output comes from the events' ``output`` field: the JSON list of per-command records a worker
writes (``workers/results.py``), secrets already masked by the action; for an action that
reports its steps, ``tasks output`` shows the step that decided the outcome
(``scheduler.queue.output.job_records``) and ``jobs show`` every step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.errors import NotFoundError
from scheduler.queue.output import attempt_lines, commands_of, shown_exit
from scheduler.record.models import Event, Job, Task
from scheduler.record.tenancy import output_shown
from scheduler.record.types import from_ms

__all__ = ["Attempt", "JobView", "attempt_lines", "commands_of", "job_attempts", "shown_exit",
           "task_outputs", "without_output"]

ENDS = {"ack": "succeeded", "fail": "failed", "retry": "failed, retried", "lost": "lost",
        "release": "given back", "defer": "deferred (window)", "cancel": "cancelled"}


@dataclass
class Attempt:
    """One claim of a job and how it ended."""

    attempt: int | None
    token: int | None
    worker: str | None
    started: datetime | None
    ended: datetime | None = None
    end: str | None = None  # succeeded, failed, failed (retried), lost, given back ...
    exit_code: int | None = None
    duration_ms: int | None = None
    error: str | None = None
    commands: list[dict[str, Any]] = field(default_factory=list)
    lease_expired: datetime | None = None  # lost: when its lease, last renewed, ran out

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @property
    def shown_exit(self) -> str:
        """The exit code as views print it (:func:`shown_exit`): a number, SIGKILL or ""."""
        return shown_exit(self.exit_code, self.error)


@dataclass
class JobView:
    job: str
    task: int
    host: str
    state: str
    attempts: list[Attempt]
    late: list[dict[str, Any]]  # results refused because the job was claimed again (stale)
    lost_note: str | None = None
    output_withheld: bool | None = None  # a customer's read: whether the rule withheld output

    def as_dict(self) -> dict[str, Any]:
        shown = {"job": self.job, "task": self.task, "host": self.host, "state": self.state,
                 "attempts": [a.as_dict() for a in self.attempts], "late": self.late,
                 "lost_note": self.lost_note}
        if self.output_withheld is not None:
            shown["output_withheld"] = self.output_withheld
        return shown


def _attempts(events: list[Any]) -> tuple[list[Attempt], list[dict[str, Any]]]:
    attempts: list[Attempt] = []
    late: list[dict[str, Any]] = []
    for ev in events:
        data = ev.data or {}
        if ev.kind == "claim":
            attempts.append(Attempt(data.get("attempt"), data.get("token"), ev.worker, ev.ts))
        elif ev.kind == "stale":
            late.append({"ts": ev.ts, "worker": ev.worker, "verb": data.get("verb"),
                         "reason": data.get("reason"), "token": data.get("token"),
                         "exit_code": data.get("exit_code"), "commands": commands_of(data)})
        elif ev.kind in ENDS and attempts and attempts[-1].end is None and (
                ev.kind == "cancel" or data.get("token") in (None, attempts[-1].token)):
            a = attempts[-1]
            a.ended, a.end = ev.ts, ENDS[ev.kind]
            a.exit_code, a.duration_ms = data.get("exit_code"), data.get("duration_ms")
            a.error = data.get("error")
            a.commands = commands_of(data)
            if ev.kind == "lost" and isinstance(data.get("expired"), int):
                a.lease_expired = from_ms(data["expired"])
    return attempts, late


def _lost_note(view: JobView) -> str | None:
    """For a job failed as lost: its worker's last sign of life, whether a late result proves
    it ran, and what to check on the host."""
    if view.state != "lost" or not view.attempts:
        return None
    last = view.attempts[-1]
    when = last.ended.isoformat(timespec="seconds") if last.ended else "?"
    if last.lease_expired is not None:
        beat = (f"its last heartbeat renewed the lease until "
                f"{last.lease_expired.isoformat(timespec='seconds')}, and none came after")
    else:
        beat = "no heartbeat renewed its lease in time"
    proof = [x for x in view.late if x["token"] == last.token]
    ran = (f"a late result from {proof[0]['worker']} (exit code {proof[0]['exit_code']}) proves "
           "it ran" if proof else "no late result arrived: nobody knows whether it ran")
    return (f"worker {last.worker} (claimed at {last.started:%Y-%m-%d %H:%M:%S}) went silent: "
            f"{beat}; the job was failed as lost at {when}; {ran}. It is not run again "
            f"because its action is not idempotent (or it had no attempts left): check on "
            f"{view.host} whether the change was made (its logs, the state the action sets), "
            f"and whether {last.worker}'s node is still running it, then "
            f"`fleetsched tasks retry-failed {view.task}` to run it again if it was not.")


JOBS_PER_READ = 500  # tasks output reads the events of this many jobs per query


def _events_of(conn: sa.Connection, job_ids: list[str]) -> dict[str, list[Any]]:
    """The events of these jobs, each job's oldest first (one query on ix_events_job_id_ts)."""
    e = Event.__table__
    out: dict[str, list[Any]] = {job: [] for job in job_ids}
    for ev in conn.execute(sa.select(e.c.job_id, e.c.ts, e.c.kind, e.c.worker, e.c.data, e.c.id)
                           .where(e.c.job_id.in_(job_ids))
                           .order_by(e.c.job_id, e.c.ts, e.c.id)):
        out[ev.job_id].append(ev)
    return out


def _view(row: Any, events: list[Any]) -> JobView:
    attempts, late = _attempts(events)
    view = JobView(row.id, row.task_id, row.host, row.state, attempts, late)
    view.lost_note = _lost_note(view)
    return view


def job_attempts(engine: Engine, job_id: str, *, tenant: str | None = None) -> JobView:
    """Everything the record holds about one job's runs; ``NotFoundError`` if it has none (or,
    with ``tenant``, if it is not that customer's, whose output the tenancy rule decides)."""
    q = sa.select(Job.id, Job.task_id, Job.host, Job.state).where(Job.id == job_id)
    if tenant is not None:
        q = q.where(Job.tenant == tenant)
    with engine.connect() as conn:
        row = conn.execute(q).first()
        if row is None:
            raise NotFoundError(f"no job {job_id!r}",
                                hint="job ids are <task>.<n>: see `fleetsched tasks show TASK`")
        view = _view(row, _events_of(conn, [job_id])[job_id])
        return view if tenant is None else _for_tenant(
            view, output_shown(conn, row.task_id, tenant))


def task_outputs(engine: Engine, task_id: int, *, host: str | None = None,
                 failed: bool = False, grep: str | None = None,
                 tenant: str | None = None) -> list[dict[str, Any]]:
    """Per job of the task, its last attempt: host, state, exit code, output lines (matching
    ``grep`` when given; hosts with no matching line are left out). ``tenant``: that customer's
    jobs only (a task with none of its jobs is not found), their lines as the tenancy rule
    says; each row then says ``output_withheld``."""
    pattern = re.compile(grep) if grep else None
    out = []
    mine = Job.task_id == task_id
    if tenant is not None:
        mine = sa.and_(mine, Job.tenant == tenant)
    exists = (sa.select(Task.id).where(Task.id == task_id) if tenant is None
              else sa.select(Job.id).where(mine).limit(1))
    with engine.connect() as conn:
        if conn.execute(exists).first() is None:
            raise NotFoundError(f"no task {task_id}", hint="see `fleetsched tasks list`")
        shown = tenant is None or output_shown(conn, task_id, tenant)
        q = sa.select(Job.id, Job.task_id, Job.host, Job.state).where(mine)
        if host:
            q = q.where(Job.host == host)
        if failed:
            q = q.where(Job.state.in_(("failed", "lost")))
        jobs = conn.execute(q.order_by(Job.seq)).all()
        for start in range(0, len(jobs), JOBS_PER_READ):
            chunk = jobs[start:start + JOBS_PER_READ]
            events = _events_of(conn, [j.id for j in chunk])
            for job in chunk:
                view = _view(job, events[job.id])
                if tenant is not None:
                    view = _for_tenant(view, shown)
                row = _output_row(view, pattern)
                if row is not None:
                    out.append(row if tenant is None
                               else {**row, "output_withheld": view.output_withheld})
    return out


def without_output(view: JobView) -> JobView:
    """``view`` with no command's output (stdout, stderr) in any attempt or late result, and
    no error line (it may quote the last line of stderr): states and exit codes only."""
    for attempt in view.attempts:
        attempt.commands = []
        attempt.error = None
    view.late = [{**late, "commands": []} for late in view.late]
    return view


def _for_tenant(view: JobView, shown: bool) -> JobView:
    view.output_withheld = not shown
    return view if shown else without_output(view)


def _output_row(view: JobView, pattern: re.Pattern[str] | None) -> dict[str, Any] | None:
    """The ``tasks output`` row of a job: its last attempt's lines (None: none match grep)."""
    last = view.attempts[-1] if view.attempts else None
    lines = attempt_lines(last.commands, last.error) if last else []
    if pattern is not None:
        lines = [ln for ln in lines if pattern.search(ln)]
        if not lines:
            return None
    return {"host": view.host, "job": view.job, "state": view.state,
            "attempt": last.attempt if last else None,
            "exit_code": last.exit_code if last else None, "lines": lines,
            "error": last.error if last else None}
