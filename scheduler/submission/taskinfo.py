"""What ``fleetsched tasks list`` and ``tasks show`` read: the SQL record of tasks, with the
live counters of the task hash in Redis where it can be reached.

1. :func:`list_tasks`: newest first, filtered by state (as the views show it, in SQL:
   :func:`shown_state`), operator, action, a group its target names or creation time;
   :func:`task_jobs`: one page of a task's jobs (by state, exit code, text in its output);
   :func:`wave_counts`: a rollout's jobs of each wave by state;
2. :func:`show_task`: one task's request, rollout policy, counters (SQL, and live from Redis),
   jobs by state, the failed jobs with their errors, and the control trail (submit, create,
   pause, resume, cancel, abort, retry-failed, reprioritize events with their operators);
3. :func:`request`: what the task asked for (action, parameters, target, policy, operator,
   origin), shared with the audit report;
4. :func:`summary_line`: the honest one-line outcome (``scheduler.progress``), including
   failures that arrived after the abort threshold from jobs already running (``overshoot``).

The counts are the live ones where Redis answers; ``show_task``'s ``record_behind`` and ``note``
say when the SQL record (job rows, failures, outputs) has fewer ended jobs than the queue.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.orm import Session

from scheduler.errors import NotFoundError, ValidationError
from scheduler.progress import Progress, from_job_states, from_task_hash, from_task_row
from scheduler.record.models import JOB_STATES, TASK_STATES, Event, Job, Schedule, Task
from scheduler.record.tenancy import output_shown

__all__ = ["CONTROL_KINDS", "LIST_COLUMNS", "behind_note", "created_between", "list_tasks",
           "params_text", "policy_text", "progress_of", "request", "show_task", "shown_state",
           "summary_line", "target_names_group", "task_jobs", "wave_counts", "windows_text"]

LIST_COLUMNS = ["id", "name", "action", "target", "operator", "priority", "state", "wave",
                "total", "succeeded", "failed", "lost", "running", "created_at"]
CONTROL_KINDS = ("submit", "create", "pause", "resume", "cancel", "abort", "retry-failed",
                 "reprioritize", "reconcile", "wave-release", "wave-wait", "wave-check",
                 "wave-stop", "wave-done", "continue")
FAILED_SHOWN = 20
TRAIL_SHOWN = 200
LIST_STATES = (*TASK_STATES, "stopped")
JOB_ERROR_SHOWN = 300  # characters of a job's error in a page of jobs


def row_progress(t: Any) -> Progress:
    """The progress the task row's counters (kept by the recorder) say
    (``scheduler.progress.from_task_row``)."""
    return from_task_row(t)


def _wave(t: Any) -> str:
    """``2/4 gated``: the current wave of a rollout in waves and its state; '' otherwise."""
    spec = getattr(t, "waves", None)
    if not spec or not getattr(t, "wave", None):
        return ""
    count = spec.get("count") if isinstance(spec, dict) else None
    return f"{t.wave}/{count or '?'} {t.wave_state or ''}".strip()


def _row(t: Any) -> dict[str, Any]:
    return {"id": t.id, "name": t.name, "action": t.action, "target": t.target,
            "operator": t.operator, "priority": t.priority, **row_progress(t).counts(),
            "wave": _wave(t),
            "created_at": t.created_at, "started_at": t.started_at,
            "finished_at": t.finished_at}


def list_tasks(session: Session, *, state: str | None = None, operator: str | None = None,
               action: str | None = None, limit: int = 50, offset: int = 0,
               group: str | None = None, since: datetime | None = None,
               until: datetime | None = None) -> list[dict[str, Any]]:
    """The newest ``limit`` tasks after the newest ``offset`` (optionally in one state, as the
    views name it: ``stopped`` is a rollout in waves that waits for an operator; ``active``
    leaves those out; ``group``: whose target includes ``group:GROUP`` as one of its terms;
    ``since``/``until``: created in that time)."""
    q = sa.select(Task).order_by(Task.id.desc()).limit(limit).offset(offset)
    q = q.where(*created_between(since, until))
    if group:
        q = q.where(target_names_group(group))
    if state:
        if state not in LIST_STATES:
            raise ValidationError(f"--state {state!r} must be one of {', '.join(LIST_STATES)}")
        q = q.where(shown_state() == state)  # in SQL, so that a page is never short
    if operator:
        q = q.where(Task.operator == operator)
    if action:
        q = q.where(Task.action == action)
    return [_row(t) for t in session.scalars(q)]


def target_names_group(group: str) -> sa.ColumnElement[bool]:
    """Whether a task's target expression includes ``group:GROUP`` as one of its terms (not
    an exclusion, not another group whose name starts alike), in SQL."""
    term = "%," + re.sub(r"([\\%_])", r"\\\1", f"group:{group}") + ",%"
    terms = (sa.literal(",", sa.String) + sa.func.replace(Task.target, " ", "", type_=sa.String)
             + ",")
    return terms.like(term, escape="\\")


def created_between(since: datetime | None,
                    until: datetime | None) -> list[sa.ColumnElement[bool]]:
    """The conditions of a task created at ``since`` or later and before ``until``."""
    return [*([Task.created_at >= since] if since else []),
            *([Task.created_at < until] if until else [])]


def wave_counts(session: Session, task_id: int) -> list[dict[str, int]] | None:
    """The jobs of each wave of a rollout by state (None: not rolled out in waves): the waves
    as the ``submit`` event recorded them (``fanout.recorded_waves``), counted in one query
    whatever the task's size: a GROUP BY over each wave's range of host numbers when every
    wave is one range (inventory order), else the task's (number, state) pairs."""
    from scheduler.submission.fanout import recorded_waves

    waves = recorded_waves(session, task_id)
    if waves is None:
        return None
    cut = len(f"{task_id}.")  # job ids are <task>.<n>
    numbers = [[int(job_id[cut:]) for job_id in ids] for ids in waves]
    ranges = [(min(ns), max(ns)) if ns else (0, -1) for ns in numbers]
    mine = Job.task_id == task_id
    if all(hi - lo + 1 == len(ns) for (lo, hi), ns in zip(ranges, numbers, strict=True)):
        wave = sa.case(*((Job.seq.between(lo, hi), k) for k, (lo, hi) in enumerate(ranges)),
                       else_=-1)
        counts: list[Counter[str]] = [Counter() for _ in numbers]
        for k, state, count in session.execute(sa.select(wave, Job.state, sa.func.count())
                                               .where(mine).group_by(wave, Job.state)):
            if k >= 0:
                counts[k][state] += count
    else:
        states = dict(session.execute(sa.select(Job.seq, Job.state).where(mine)).all())
        counts = [Counter(states.get(n, "accepted") for n in ns) for ns in numbers]
    for k, ns in enumerate(numbers):  # jobs the recorders have not written yet
        if (missing := len(ns) - sum(counts[k].values())) > 0:
            counts[k]["accepted"] += missing
    return [dict(c) for c in counts]


def shown_state(n: dict[str, Any] | None = None) -> sa.ColumnElement[str]:
    """The state the views show (``Progress.state``) as SQL, over the counts ``n`` (SQL
    expressions: ``total``, ``succeeded``, ``failed``, ``lost``, ``cancelled``, ``running``;
    None: the task row's counters)."""
    n = n or {c: sa.func.coalesce(getattr(Task, c), 0)
              for c in ("total", "succeeded", "failed", "lost", "cancelled", "running")}
    recorded = Task.state
    stopped = sa.and_(Task.wave_state == "stopped", n["running"] == 0,
                      recorded.in_(("active", "paused")))
    finished = sa.and_(n["total"] > 0,
                       n["succeeded"] + n["failed"] + n["lost"] + n["cancelled"] >= n["total"])
    return sa.case(
        (recorded.in_(("accepted", "cancelled", "aborted")), recorded),
        (stopped, "stopped"),
        (sa.not_(finished), sa.case((recorded == "paused", "paused"), else_="active")),
        (n["failed"] + n["lost"] > 0, "failed"),
        (n["cancelled"] > 0, "cancelled"),
        else_="succeeded")


def task_jobs(session: Session, task_id: int, *, state: str | None = None, limit: int = 100,
              offset: int = 0, tenant: str | None = None, exit_code: int | None = None,
              text: str | None = None) -> list[dict[str, Any]]:
    """One page of a task's jobs in host order (``limit`` from ``offset``, in SQL), optionally
    those in one job state, with one exit code, or whose error or output's tail holds ``text``
    (any case): where each is, not what it printed (``task_outputs`` has that).
    ``tenant``: that customer's jobs only (a task without one of them is not found), their
    error lines as ``record.tenancy.output_shown`` says, each row saying ``output_withheld``;
    ``text`` is refused where its output is withheld (a match would tell what it says)."""
    mine = Job.task_id == task_id
    if tenant is not None:
        mine = sa.and_(mine, Job.tenant == tenant)
    exists = (sa.select(Task.id).where(Task.id == task_id) if tenant is None
              else sa.select(Job.id).where(mine).limit(1))
    if session.execute(exists).first() is None:
        raise NotFoundError(f"no task {task_id}", hint="see `fleetsched tasks list`")
    if state is not None and state not in JOB_STATES:
        raise ValidationError(f"--state {state!r} must be one of {', '.join(JOB_STATES)}")
    q = (sa.select(Job.id, Job.seq, Job.host, Job.state, Job.attempts, Job.window, Job.due_at,
                   Job.started_at, Job.finished_at, Job.worker, Job.exit_code, Job.duration_ms,
                   Job.error)
         .where(mine).order_by(Job.seq).limit(limit).offset(offset))
    if state is not None:
        q = q.where(Job.state == state)
    if exit_code is not None:
        q = q.where(Job.exit_code == exit_code)
    shown = tenant is None or output_shown(session, task_id, tenant)
    if text:
        if not shown:
            raise ValidationError("this task's output is not shown to customers: its jobs "
                                  "cannot be searched by text")
        pattern = "%" + re.sub(r"([\\%_])", r"\\\1", text.lower()) + "%"
        q = q.where(sa.or_(sa.func.lower(Job.error).like(pattern, escape="\\"),
                           sa.func.lower(Job.output_tail).like(pattern, escape="\\")))
    if tenant is None:
        return [{**r._mapping, "error": (r.error or "")[:JOB_ERROR_SHOWN] or None}
                for r in session.execute(q)]
    return [{**r._mapping, "error": ((r.error or "")[:JOB_ERROR_SHOWN] or None) if shown else None,
             "output_withheld": not shown} for r in session.execute(q)]


def request(t: Task, schedule_name: str | None = None) -> dict[str, Any]:
    """What the task asked for, as ``tasks show`` and the audit report print it: the action,
    its parameters (secret parameters are stored as their ``@env:``/``@file:`` references,
    never as values), the target expression, the rollout policy, who submitted it and where
    it came from (an operator's submit or a schedule occurrence, and the saved template and
    version it ran; its service windows)."""
    if t.schedule_id is not None:
        origin = (f"schedule {schedule_name or t.schedule_id}"
                  + (f", occurrence {t.occurrence:%Y-%m-%d %H:%M}" if t.occurrence else ""))
    else:
        origin = f"submitted by {t.operator}"
    if getattr(t, "template", None):  # run from a saved template (scheduler.templates)
        origin += f", from template {t.template} v{t.template_version}"
    return {
        "action": t.action, "params": t.params or {}, "target": t.target,
        "operator": t.operator, "origin": origin, "schedule": schedule_name,
        "windows": windows_text(t.in_window, t.ignore_windows, t.break_glass),
        "start_at": t.start_at,
        "policy": {"max_concurrency": t.max_running or "none",
                   "max_failures": (f"{t.max_failures} "
                                    + ("hosts failing any attempt"
                                       if t.count_failures == "attempts" else "final failures")
                                    if t.max_failures else "none"),
                   "attempts": t.max_attempts,
                   "hosts": "one job at a time" if t.exclusive else "may overlap",
                   "backoff_ms": t.backoff_ms, "timeout_s": t.timeout_s,
                   "idempotent": t.idempotent, "priority": t.priority,
                   **({"waves": _waves_text(dict(t.waves))} if t.waves else {})},
    }


def windows_text(in_window: bool, ignore_windows: bool, break_glass: str | None, *,
                 required_by: str | None = None) -> str:
    """How service windows and freezes apply to a task, for the plan, ``tasks show`` and the
    audit report: ``each host's service window; freezes hold its jobs``, ``outside service
    windows (--ignore-windows); ...``, ``...; BREAK-GLASS through freezes: REASON``."""
    if in_window:
        windows = "each host's service window" + (
            f" (action {required_by} requires them)" if required_by else "")
    elif ignore_windows:
        windows = "outside service windows (--ignore-windows)"
    else:
        windows = "none (runs when due)"
    freezes = (f"BREAK-GLASS through freezes: {break_glass}" if break_glass
               else "freezes hold its jobs")
    return f"{windows}; {freezes}"


def _waves_text(spec: dict[str, Any]) -> str:
    """``1,10%,100% (3 waves, inventory order, gate approve, check `CMD`)``: how a task in
    waves was rolled out, for ``tasks show`` and the audit report."""
    count = spec.get("count", "?")
    parts = [f"{count} wave{'' if count == 1 else 's'}", f"{spec.get('order') or 'inventory'} order"]
    if spec.get("seed") is not None:
        parts.append(f"seed {spec['seed']}")
    if spec.get("pause_ms"):
        parts.append(f"pause {spec['pause_ms'] / 1000:g}s")
    if spec.get("gate") and spec["gate"] != "none":
        parts.append(f"gate {spec['gate']}")
    if spec.get("check"):
        parts.append(f"check `{spec['check']}`")
    return f"{spec.get('sizes', '?')} ({', '.join(parts)})"


def policy_text(policy: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in policy.items())


def params_text(params: dict[str, Any]) -> str:
    import json

    return " ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}"
                    for k, v in sorted(params.items())) or "-"


def options_text(options: dict[str, Any]) -> str:
    """A schedule's task options as ``schedules show`` prints them: the ones set, ``k=v``
    (a list joined with commas, a mapping as ``k:v``), in their order; ``-`` when none is."""
    shown = []
    for k, v in options.items():
        if v is None or v is False or v == [] or v == {}:
            continue
        if isinstance(v, list):
            v = ",".join(map(str, v))
        elif isinstance(v, dict):
            v = ",".join(f"{a}:{b}" for a, b in v.items())
        shown.append(f"{k}={'true' if v is True else v}")
    return " ".join(shown) or "-"


def progress_of(session: Session, t: Task, live: dict[str, str] | None) -> Progress:
    """The task's progress: live from the Redis task hash when given, else from its job rows."""
    if live:
        return from_task_hash(live)
    counts = dict(session.execute(sa.select(Job.state, sa.func.count()).where(
        Job.task_id == t.id).group_by(Job.state)).all())
    return from_job_states(t.state, counts)


def summary_line(progress: Progress, live: dict[str, str] | None, recorded_state: str) -> str:
    """One honest sentence about where the task stands (``Progress.sentence``), with the
    overshoot of an aborted task and a task recorded but never queued."""
    text = progress.sentence()
    if live and progress.state == "aborted":
        limit, over = int(live.get("max_failures") or 0), int(live.get("overshoot") or 0)
        text += (f"; aborted at {limit} failures, and {over} more failure(s) came in after the "
                 "threshold from jobs already running")
    if recorded_state == "accepted" and not live:
        text += "; recorded but not queued (run `fleetsched reconcile`)"
    return text


def _waves(t: Task, live: dict[str, str] | None) -> dict[str, Any] | None:
    """The rollout in waves: live from Redis when it has it, else from the SQL row."""
    from scheduler.submission.rollout import describe

    if live and live.get("waves"):
        return describe({**live, "id": str(t.id)})
    if not t.waves:
        return None
    spec = dict(t.waves)
    return {"wave": t.wave, "waves": spec.get("count"), "state": t.wave_state,
            "waits_for": None, "why": t.wave_why, "sizes": spec.get("sizes"),
            "order": spec.get("order"), "pause_ms": spec.get("pause_ms"),
            "gate": spec.get("gate"), "check": spec.get("check"),
            "max_failures": spec.get("max_failures"), "counts": spec.get("counts")}


def show_task(session: Session, task_id: int, live: dict[str, str] | None) -> dict[str, Any]:
    """Everything ``tasks show`` prints; ``live`` is the Redis task hash (None: unreachable)."""
    t = session.get(Task, task_id)
    if t is None:
        raise NotFoundError(f"no task {task_id}", hint="see `fleetsched tasks list`")
    out = _row(t)
    schedule = session.get(Schedule, t.schedule_id) if t.schedule_id is not None else None
    req = request(t, schedule.name if schedule else None)
    out.update({"params": req["params"], "executor": t.executor, "in_window": t.in_window,
                "ignore_windows": t.ignore_windows, "break_glass": t.break_glass,
                "customer_output": t.customer_output,
                "start_at": t.start_at, "policy": req["policy"], "origin": req["origin"],
                "windows": req["windows"]})
    jobs = dict(session.execute(sa.select(Job.state, sa.func.count()).where(
        Job.task_id == task_id).group_by(Job.state)).all())
    out["jobs"] = {k: jobs[k] for k in sorted(jobs)}
    failed = session.execute(sa.select(Job.id, Job.host, Job.state, Job.attempts, Job.exit_code,
                                       Job.error).where(Job.task_id == task_id,
                                                        Job.state.in_(("failed", "lost")))
                             .order_by(Job.seq).limit(FAILED_SHOWN)).all()
    out["failures"] = [dict(r._mapping) for r in failed]
    if live:
        out["live"] = {k: live[k] for k in (
            "state", "prio", "total", "running", "succeeded", "failed", "lost_failed",
            "cancelled", "lost", "overshoot", "max_running", "max_failures") if k in live}
    else:
        out["live"] = None
    trail = session.execute(sa.select(Event.ts, Event.kind, Event.operator, Event.data)
                            .where(Event.task_id == str(task_id),
                                   Event.kind.in_(CONTROL_KINDS))
                            .order_by(Event.ts, Event.id).limit(TRAIL_SHOWN)).all()
    out["trail"] = [{"ts": r.ts, "kind": r.kind, "operator": r.operator,
                     "count": (r.data or {}).get("count"), "error": (r.data or {}).get("error")}
                    for r in trail]
    out["waves"] = _waves(t, live)
    # progress_of without its query: the job rows were counted above
    progress = from_task_hash(live) if live else from_job_states(t.state, jobs)
    out.update(progress.counts())
    out["recorded_state"] = t.state
    out["summary"] = summary_line(progress, live, t.state)
    # The live counters are the truth for the counts; the job rows, the failures and the outputs
    # come from the SQL record, which the recorders fill in behind the queue.
    out["record_behind"] = max(0, progress.done - from_job_states(t.state, jobs).done)
    out["note"] = behind_note(out["record_behind"]) if out["record_behind"] else None
    return out


def behind_note(behind: int) -> str:
    """What ``tasks show`` says while the recorders have not caught up with the queue."""
    return (f"the SQL record is {behind} job(s) behind the queue: failures and outputs appear "
            "once the recorders catch up (is a recorder running?)")
