"""The event fold: what a batch of stream events means for the rows, as plain values.

It writes nothing: ``scheduler.record.state`` (the record's one writer) applies what it folds,
in one transaction with the event rows. :func:`fold_batch` folds the batch in one pass, in
stream order (:class:`Folded`):

1. one events-table row per event, keyed by its stream id (inserted ``ON CONFLICT DO
   NOTHING``: a replayed batch inserts nothing twice);
2. one patch per job: all of the batch's events of a job merged, newest last, applied as one
   update guarded by the row's ``last_event_pos``, so a replay or a late batch from another
   consumer never moves a job backwards (the events table still gets every event);
3. task-level transitions (create, pause, resume, cancel, abort, the rollout's waves) the same
   way;
4. every task touched, whose counters (and finished state) are then recomputed from its job
   rows, and the time of each task's first claim.

Rows that do not exist (the queue used without SQL fan-out, or task ids that are not SQL ids)
are simply not updated; their events are recorded all the same.

:func:`operator_events` picks out what ``fold_batch`` leaves alone; both folds are idempotent
and independent of the order events arrive in:

1. ``retry-failed`` (the job ids in ``jobs``): those job rows become ``pending`` again
   (attempts 0, no error, not finished) unless a newer event already moved them
   (``last_event_pos``); the task becomes ``active`` again unless it is cancelled; its counters
   are recounted from its job rows.
2. ``reprioritize``: the task's ``priority`` becomes the ``to`` of the task's latest
   ``reprioritize`` event in the events table (stream order), so overlapping reprioritizes end,
   in SQL, in the class the last script left in Redis, whichever command commits last.
"""

from __future__ import annotations

import json
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from scheduler.queue.types import OUTPUT_MAX, stored_output
from scheduler.record import bulk
from scheduler.record.models import JOB_FINAL_STATES
from scheduler.record.types import from_ms

INT_FIELDS = ("attempt", "token", "due", "count", "exit_code", "duration_ms", "expired")
COLUMN_FIELDS = ("kind", "ts", "task", "job", "host", "worker", "operator")
# Task-level transitions; job-level ones are in _job_patch.
TASK_STATE_BY_KIND = {"create": "active", "pause": "paused", "resume": "active",
                      "abort": "aborted", "cancel": "cancelled"}
# Rollout waves (scheduler.submission.rollout): events that move tasks.wave / wave_state.
WAVE_KINDS = frozenset(("wave-release", "wave-wait", "wave-check", "wave-stop", "wave-done",
                        "continue"))
# A lost event's explicit ``outcome`` (claim.lua ``lose``) -> the job's state.
LOST_OUTCOME_STATE = {"retry": "pending", "held": "held", "cancelled": "cancelled",
                      "failed": "lost"}
_JOB_KINDS = frozenset(("enqueue", "release", "defer", "unpark", "claim", "adopt", "ack", "fail",
                        "retry", "lost", "park", "cancel"))
_NO_ATTEMPT_KINDS = frozenset(("enqueue", "cancel", "park", "unpark"))
# How a field goes into the event's ``data``: 0 a column (not in data), 1 an int if it is one,
# 2 a list of ids, 3 JSON if it parses as JSON; any other field is kept as text.
# ``principal``: an operator verb's acting principal (``Principal.audit``, JSON).
_FIELD_HOW = {**dict.fromkeys(COLUMN_FIELDS, 0), **dict.fromkeys(INT_FIELDS, 1), "jobs": 2,
              "detail": 3, "output": 3, "principal": 3}
_by_pos = operator.attrgetter("pos")
_quote = json.encoder.encode_basestring_ascii  # json.dumps of a str
Ts = Callable[[int], Any]


def stream_shard(stream: str) -> int:
    """The queue shard an events stream belongs to, from its name: ``{fs}:events`` is shard 0,
    ``{fs:2}:events`` or ``{fs:2.7}:events`` shard 2 (``scheduler.queue.shards``; a prefix
    cannot hold ':')."""
    tag = stream[1:stream.find("}")] if stream.startswith("{") else ""
    number = tag.rpartition(":")[2].partition(".")[0] if ":" in tag else "0"
    return int(number) if number.isdigit() else 0


class StreamEvent:
    """One stream entry: its id and its fields (strings); ``pos`` orders stream ids.

    ``entry`` is the id in its stream; ``id`` the events-table key: the same for shard 0 (and
    an unsharded queue), ``<entry>:<shard>`` for the stream of shard >= 1, because every
    shard's stream numbers its entries alike (``<ms>-<seq>``) and two shards' entries of the
    same millisecond must not be taken for one replayed entry."""

    __slots__ = ("id", "entry", "fields", "pos")

    def __init__(self, id: str, fields: Mapping[str, str], shard: int = 0) -> None:  # noqa: A002
        self.entry = id
        self.id = f"{id}:{shard}" if shard else id
        self.fields = fields
        ms, _, seq = id.partition("-")
        # A sortable number for the stream id ``<ms>-<seq>``: ms * 10**6 + seq (an events-table
        # key of a shard >= 1 parses too: its ``:<shard>`` is left out).
        self.pos = int(ms) * 1_000_000 + int(seq.partition(":")[0] or 0)

    def __repr__(self) -> str:
        return f"StreamEvent({self.id!r}, {dict(self.fields)!r})"


@dataclass
class BatchResult:
    events: int = 0  # events in the batch
    inserted: int = 0  # rows new in the events table (a replay inserts 0)
    jobs_updated: int = 0
    tasks_updated: int = 0
    task_ids: set[int] = field(default_factory=set)


def _int(value: str | None) -> int | None:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")  # NaN/Infinity: PostgreSQL's json refuses them


_check_json = json.JSONDecoder(parse_constant=_no_constant).decode


def _data_json(f: Mapping[str, str]) -> str:
    """The event's ``data`` column as JSON text: every field that is not a column, ints as
    ints, ``jobs`` as a list, ``detail``/``output`` as JSON when they are JSON (spliced in as
    sent: parsed to check, never re-encoded), else as text. Written directly, as
    ``json.dumps`` of that object would write it (the same separators and escaping)."""
    parts: list[str] = []
    add = parts.append
    how_of = _FIELD_HOW.get
    for key, value in f.items():
        how = how_of(key)
        if how is None:
            add(f"{_quote(key)}: {_quote(value)}")
        elif how == 1:  # known keys below need no escaping
            try:
                add(f'"{key}": {int(value)}')
            except ValueError:
                add(f'"{key}": {_quote(value)}')
        elif how == 2:
            add(f'"{key}": [{", ".join(map(_quote, value.split()))}]')
        elif how == 3:
            if value[:1] in ("{", "["):
                try:
                    _check_json(value)
                    add(f'"{key}": {value}')
                    continue
                except ValueError:
                    pass
            add(f'"{key}": {_quote(value)}')
    return f"{{{', '.join(parts)}}}"


def _event_tuple(ev: StreamEvent, ts: Ts) -> tuple[Any, ...]:
    """The events-table row of one stream entry, in ``bulk.EVENT_COLUMNS`` order."""
    get = ev.fields.get
    kind, task, job = get("kind"), get("task"), get("job")
    host, worker, op = get("host"), get("worker"), get("operator")
    when = _int(get("ts"))
    when = (ts(when) if when else None) or ts(ev.pos // 1_000_000)
    return (ev.id, when, kind[:24] if kind else "unknown", task[:64] if task else None,
            job[:80] if job else None, host[:255] if host else None,
            worker[:255] if worker else None, op[:255] if op else None, _data_json(ev.fields))


def event_row(ev: StreamEvent) -> dict[str, Any]:
    """The events-table row of one stream entry as a dict (``ts`` aware, ``data`` parsed)."""
    row = dict(zip(bulk.EVENT_COLUMNS, _event_tuple(ev, from_ms)))
    row["data"] = json.loads(row["data"])
    return row


def _lost_state(f: Mapping[str, str]) -> str:
    """Where a lost job went: its ``outcome`` field (claim.lua ``lose`` always writes one).

    The ``error`` text is for people and never read. An event without a known outcome is not
    one the scripts write: the job is recorded ``lost``, so an operator looks at it, rather
    than silently pending."""
    return LOST_OUTCOME_STATE.get(f.get("outcome", ""), "lost")


def _job_patch(kind: str, f: Mapping[str, str], ts: Any, to_ts: Ts) -> dict[str, Any]:
    """The job-row columns one event sets (``kind`` is in ``_JOB_KINDS``)."""
    get = f.get
    if kind in ("enqueue", "release", "defer", "unpark"):
        patch: dict[str, Any] = {"state": "pending"}
        due = _int(get("due"))
        if due is not None:
            patch["due_at"] = to_ts(due)
    elif kind in ("claim", "adopt"):
        # adopt (reconcile): a live node runs the job under this token, as its claim said;
        # the claim itself may never have reached the record (Redis lost it first)
        patch = {"state": "running", "finished_at": None}
        if kind == "claim":
            patch["started_at"] = ts
        if get("worker"):
            patch["worker"] = get("worker")[:255]  # type: ignore[index]
    elif kind in ("ack", "fail", "retry"):
        output = get("output")
        # A run lost with its worker (fail.lua blame worker) ends `lost`, as one whose lease
        # ran out does (claim.lua): one state for one cause, whichever path found it.
        final = "lost" if get("blame") == "worker" else "failed"
        patch = {"state": {"ack": "succeeded", "fail": final, "retry": "pending"}[kind],
                 "exit_code": _int(get("exit_code")), "duration_ms": _int(get("duration_ms")),
                 "output_tail": None if output is None else stored_output(output, OUTPUT_MAX)}
        if kind == "ack":
            patch["finished_at"] = ts
            patch["error"] = None
        elif kind == "fail":
            patch["finished_at"] = ts
            patch["error"] = get("error")
        else:
            patch["error"] = get("error")
            due = _int(get("due"))
            if due is not None:
                patch["due_at"] = to_ts(due)
    elif kind == "lost":
        state = _lost_state(f)
        patch = {"state": state, "error": get("error")}
        if state in JOB_FINAL_STATES:
            patch["finished_at"] = ts
    elif kind == "park":
        patch = {"state": "parked"}
    else:  # cancel
        patch = {"state": "cancelled", "finished_at": ts}
    if kind not in _NO_ATTEMPT_KINDS:
        for col, key in (("attempts", "attempt"), ("token", "token")):
            value = _int(get(key))
            if value is not None:
                patch[col] = value
    return patch


def sql_task_id(value: str | None) -> int | None:
    if value and len(value) < 19 and value.isascii() and value.isdigit():
        return int(value)
    return None


class Folded:
    """A batch folded into rows and patches (see the module docstring): ``rows`` the
    events-table rows, ``jobs`` and ``tasks`` one patch per row ``{id: (pos, {column: value})}``,
    ``started`` the first claim's time per task, ``task_ids`` every task touched."""

    def __init__(self, ts: Ts) -> None:
        self.ts = ts
        self.rows: list[tuple[Any, ...]] = []
        self.jobs: dict[str, tuple[int, dict[str, Any]]] = {}
        self.tasks: dict[int, tuple[int, dict[str, Any]]] = {}
        self.started: dict[int, Any] = {}
        self.task_ids: set[int] = set()
        self._tids: dict[str, int | None] = {}  # job id prefix -> SQL task id

    def add(self, ev: StreamEvent) -> None:
        row = _event_tuple(ev, self.ts)
        self.rows.append(row)
        kind = row[2]
        if kind in _JOB_KINDS:
            self._add_job_event(ev, kind, row[1])
        if kind == "claim" or kind in TASK_STATE_BY_KIND:
            self._add_task_event(ev, kind, row[1])
        elif kind in WAVE_KINDS:
            self._add_wave_event(ev)

    def _add_wave_event(self, ev: StreamEvent) -> None:
        f = ev.fields
        task_id = sql_task_id(f.get("task"))
        if task_id is None or not f.get("state"):
            return
        old = self.tasks.get(task_id)
        patch = {"wave": _int(f.get("wave")), "wave_state": f.get("state", "")[:16],
                 "wave_why": f.get("error") or None}
        self.tasks[task_id] = (ev.pos, {**old[1], **patch} if old else patch)
        self.task_ids.add(task_id)

    def _add_task_event(self, ev: StreamEvent, kind: str, ts: Any) -> None:
        f = ev.fields
        task_id = sql_task_id(f.get("task"))
        if task_id is None:
            return
        if kind == "claim":
            self.started.setdefault(task_id, ts)
        elif kind != "cancel" or f.get("operator"):  # an abort's cancel keeps "aborted"
            old = self.tasks.get(task_id)
            state = {"state": TASK_STATE_BY_KIND[kind]}
            self.tasks[task_id] = (ev.pos, {**old[1], **state} if old else state)
            self.task_ids.add(task_id)

    def _add_job_event(self, ev: StreamEvent, kind: str, ts: Any) -> None:
        f = ev.fields
        ids = f.get("jobs", "").split()
        if f.get("job"):
            ids.append(f["job"])
        if not ids:
            return
        patch = _job_patch(kind, f, ts, self.ts)
        shared = len(ids) > 1
        jobs, tids, pos = self.jobs, self._tids, ev.pos
        for job_id in ids:
            prefix = job_id.partition(".")[0]
            tid = tids[prefix] if prefix in tids else tids.setdefault(prefix, sql_task_id(prefix))
            if tid is None:
                continue  # not a SQL task's job: no row to update
            old = jobs.get(job_id)
            if old is None:
                jobs[job_id] = (pos, dict(patch) if shared else patch)
            else:
                old[1].update(patch)
                jobs[job_id] = (pos, old[1])
            self.task_ids.add(tid)


def fold_batch(events: Iterable[StreamEvent], ts: Ts) -> Folded:
    """Fold ``events`` in stream order (``ts``: the stored value of a ms epoch)."""
    folded = Folded(ts)
    for ev in sorted(events, key=_by_pos):
        folded.add(ev)
    return folded


OPERATOR_KINDS = frozenset({"retry-failed", "reprioritize"})
"""The event kinds :func:`operator_events` picks out (``fold_batch`` leaves them alone)."""


def operator_events(events: Iterable[StreamEvent]) -> tuple[dict[int, list[StreamEvent]],
                                                            set[int]]:
    """The batch's ``retry-failed`` events with job ids, by SQL task id in stream order, and
    the SQL task ids it ``reprioritize``s (see the module docstring)."""
    retried: dict[int, list[StreamEvent]] = {}
    reprioritized: set[int] = set()
    ops = [ev for ev in events if ev.fields.get("kind") in OPERATOR_KINDS]  # few, if any
    for ev in sorted(ops, key=_by_pos):
        kind = ev.fields.get("kind")
        task_id = sql_task_id(ev.fields.get("task"))
        if task_id is None:
            continue
        if kind == "retry-failed" and ev.fields.get("jobs"):
            retried.setdefault(task_id, []).append(ev)
        elif kind == "reprioritize":
            reprioritized.add(task_id)
    return retried, reprioritized


__all__ = ["BatchResult", "Folded", "LOST_OUTCOME_STATE", "OPERATOR_KINDS", "StreamEvent",
           "event_row", "fold_batch", "operator_events", "sql_task_id", "stream_shard"]
