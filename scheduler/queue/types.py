"""The records the queue exchanges (``TaskSpec``, ``JobSpec``, ``JobResult``, ``Claim`` ...) and
the argument checks ``scheduler.queue.client.Queue`` runs before any script is called.

Checks raise ``BadArgumentError`` with one line naming what is wrong; nothing is written.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from scheduler.errors import BadArgumentError, Code
from scheduler.principal import Principal
from scheduler.queue.keys import PRIORITY_CLASSES

MAX_BATCH = 10_000  # jobs one claim may take
TASK_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
JOB_ID = re.compile(r"([A-Za-z0-9_-]{1,64})\.(0|[1-9][0-9]{0,8})")
MAX_NAME = 255  # characters in a worker id, host or window name


def bad(message: str) -> BadArgumentError:
    return BadArgumentError(Code.BAD_ARGUMENT, message)


def text(value: Any) -> str:
    """A reply element as text, whether the client decodes responses or not."""
    return value.decode() if isinstance(value, bytes) else str(value)


def signed(operator: Principal | str) -> tuple[str, str]:
    """An operator verb's two script arguments: the name its event records as ``operator``,
    and the acting principal as JSON recorded beside it (``Principal.audit``; '' for a bare
    name, a service acting under its own)."""
    if isinstance(operator, Principal):
        return operator.name, json.dumps(operator.audit(), separators=(",", ":"),
                                         sort_keys=True)
    return operator, ""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_ms(name: str, value: Any, *, minimum: int = 0) -> None:
    if not _is_int(value) or value < minimum:
        raise bad(f"{name} must be an integer >= {minimum} (ms), not {value!r}")


def check_task_id(task_id: Any) -> None:
    if not isinstance(task_id, str) or not TASK_ID.fullmatch(task_id):
        raise bad(f"task id must be 1-64 letters, digits, '_' or '-', not {task_id!r}")


def check_job_id(job_id: Any, task_id: str | None = None) -> None:
    match = JOB_ID.fullmatch(job_id) if isinstance(job_id, str) else None
    if match is None:
        raise bad(f"job id must be '<task id>.<n>', not {job_id!r}")
    if task_id is not None and match.group(1) != task_id:
        raise bad(f"job id {job_id!r} is not of task {task_id!r}")


def check_name(what: str, value: Any) -> None:
    if not isinstance(value, str) or not value or len(value) > MAX_NAME or value != value.strip():
        raise bad(f"{what} must be a non-empty string of at most {MAX_NAME} characters, not {value!r}")


def check_worker(worker: Any) -> None:
    check_name("worker id", worker)


def check_leases(leases: Sequence[tuple[str, int]]) -> None:
    for job_id, token in leases:
        check_job_id(job_id)
        if not _is_int(token) or token < 0:
            raise bad(f"fencing token of {job_id} must be a non-negative integer, not {token!r}")


def enqueue_entries(task_id: str, jobs: Sequence[JobSpec]) -> list[list[str]]:
    """The jobs of an enqueue call, checked, as text: [id, host, due, window, window close],
    plus [attempt, token] for a job that goes on from earlier attempts.

    Plain values pass one combined test per job; anything else takes ``check_jobs``' full
    checks (which raise BadArgumentError naming the job and the field).
    """
    if not jobs:
        check_jobs(task_id, jobs)
    out: list[list[str]] = []
    append, match, prefix = out.append, JOB_ID.fullmatch, task_id + "."
    for job in jobs:
        if type(job) is JobSpec:
            job_id, host, due, window, wclose = job.job_id, job.host, job.due_ms, job.window, job.wclose_ms
            if (type(job_id) is str and job_id.startswith(prefix) and type(host) is str
                    and 0 < len(host) <= MAX_NAME and type(due) is int and due >= 0
                    and window is None and wclose is None and host == host.strip() and match(job_id)
                    and not job.attempt and not job.token):
                append([job_id, host, str(due), "", ""])
                continue
        check_jobs(task_id, [job])
        entry = [job.job_id, job.host, str(int(job.due_ms)), job.window or "",
                 "" if job.wclose_ms is None else str(int(job.wclose_ms))]
        if job.attempt or job.token:
            entry += [str(int(job.attempt)), str(int(job.token))]
        append(entry)
    return out


def check_jobs(task_id: str, jobs: Sequence[JobSpec]) -> None:
    if not jobs:
        raise bad(f"enqueue of task {task_id} needs at least one job")
    for job in jobs:
        if not isinstance(job, JobSpec):
            raise bad(f"enqueue takes JobSpec records, not {type(job).__name__}")
        check_job_id(job.job_id, task_id)
        check_name(f"host of job {job.job_id}", job.host)
        check_ms(f"due_ms of job {job.job_id}", job.due_ms)
        if job.window is not None:
            check_name(f"window of job {job.job_id}", job.window)
        if job.wclose_ms is not None:
            check_ms(f"wclose_ms of job {job.job_id}", job.wclose_ms)
        check_ms(f"attempt of job {job.job_id}", job.attempt)
        check_ms(f"token of job {job.job_id}", job.token)


COUNT_FAILURES = ("attempts", "final")


@dataclass(frozen=True)
class TaskSpec:
    """The live part of a task, written to ``{P}:task:<id>`` by ``Queue.create_task``."""

    task_id: str
    priority: str = "normal"  # urgent | normal | bulk
    max_running: int = 0  # 0 = no concurrency limit
    max_failures: int = 0  # 0 = never abort
    max_attempts: int = 3
    backoff_ms: int = 1_000  # base of exponential backoff (with jitter)
    timeout_ms: int = 3_600_000  # per attempt
    idempotent: bool = True
    spec: dict = field(default_factory=dict)  # {"action", "params", "executor", "expected_ms"}
    operator: str = ""
    share: str | None = None  # fair-share key; None = the task id
    # What max_failures counts: "attempts" (hosts that failed any attempt: a failing change stops
    # after N hosts, retries or not) or "final" (jobs failed for good).
    count_failures: str = "attempts"
    # One job per host at a time, across tasks: a job whose host runs another exclusive task's
    # job waits for it (state hostwait) without counting an attempt. False: safe to overlap.
    exclusive: bool = True

    def script_args(self) -> list[Any]:
        """ARGV of create_task.lua, after checking every field."""
        check_task_id(self.task_id)
        if self.priority not in PRIORITY_CLASSES:
            raise bad(f"priority must be one of {', '.join(PRIORITY_CLASSES)}, not {self.priority!r}")
        for name in ("max_running", "max_failures", "backoff_ms"):
            if not _is_int(getattr(self, name)) or getattr(self, name) < 0:
                raise bad(f"{name} must be a non-negative integer, not {getattr(self, name)!r}")
        for name in ("max_attempts", "timeout_ms"):
            if not _is_int(getattr(self, name)) or getattr(self, name) < 1:
                raise bad(f"{name} must be an integer >= 1, not {getattr(self, name)!r}")
        if not isinstance(self.idempotent, bool):
            raise bad(f"idempotent must be True or False, not {self.idempotent!r}")
        if not isinstance(self.spec, dict):
            raise bad(f"spec must be a dict, not {type(self.spec).__name__}")
        try:
            spec = json.dumps(self.spec, sort_keys=True, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise bad(f"spec of task {self.task_id} is not JSON-serializable: {exc}") from None
        if not isinstance(self.operator, str) or (self.share is not None and not isinstance(self.share, str)):
            raise bad("operator and share must be strings")
        if not isinstance(self.exclusive, bool):
            raise bad(f"exclusive must be True or False, not {self.exclusive!r}")
        if self.count_failures not in COUNT_FAILURES:
            raise bad(f"count_failures must be one of {', '.join(COUNT_FAILURES)}, "
                      f"not {self.count_failures!r}")
        return [self.task_id, self.priority, self.max_running, self.max_failures, self.max_attempts,
                self.backoff_ms, self.timeout_ms, 1 if self.idempotent else 0, spec, self.operator,
                self.share or self.task_id, self.count_failures, 1 if self.exclusive else 0]


@dataclass(frozen=True)
class Carried:
    """What a task recreated from SQL (reconcile) carries into its new Redis hash, written in
    the same step that creates it (create_task.lua): the jobs that had already ended, so the
    live counters, views and exit codes count them, and the pause SQL records, so no requeued
    job can be claimed between the creation and a pause."""

    ended: int = 0  # jobs ended before Redis lost the task: part of ``total``
    succeeded: int = 0
    failed: int = 0  # lost jobs included, as the live counters count them
    cancelled: int = 0
    failed_hosts: int = 0  # what --max-failures counted so far (count_failures=attempts)
    lost_failed: int = 0  # of ``failed``, the jobs lost with their worker (no threshold counts)
    paused_by: str = ""  # "" = active; "rollout" = a wave's failure limit (sets wave_held)

    def script_arg(self) -> str:
        """ARGV[14] of create_task.lua."""
        counts = (self.ended, self.succeeded, self.failed, self.cancelled, self.failed_hosts,
                  self.lost_failed)
        if not all(_is_int(n) and n >= 0 for n in counts):
            raise bad(f"carried counters must be non-negative integers, not {counts!r}")
        if self.succeeded + self.failed + self.cancelled != self.ended \
                or self.lost_failed > self.failed:
            raise bad(f"carried counters do not add up: {counts!r}")
        if not isinstance(self.paused_by, str):
            raise bad("paused_by must be a string")
        return json.dumps({"ended": self.ended, "succeeded": self.succeeded,
                           "failed": self.failed, "cancelled": self.cancelled,
                           "failed_hosts": self.failed_hosts, "lost_failed": self.lost_failed,
                           "paused_by": self.paused_by})


@dataclass(frozen=True)
class JobSpec:
    """One job to enqueue: ``job_id`` is ``"<task id>.<n>"``."""

    job_id: str
    host: str
    due_ms: int = 0  # ms epoch; 0 = now by the Redis clock
    window: str | None = None
    wclose_ms: int | None = None
    # A job rebuilt from SQL (reconcile) goes on from its recorded attempts and fencing token,
    # so max_attempts does not restart and a stale worker's old token stays refused.
    attempt: int = 0
    token: int = 0


@dataclass(frozen=True)
class JobResult:
    """What a finished attempt produced."""

    exit_code: int | None = None
    duration_ms: int = 0
    output: str = ""  # capped head/tail text; never holds a secret

    def script_args(self, cap: int) -> list[Any]:
        """[exit code ('' for None), duration, output within ``cap`` characters], checked."""
        exit_code, duration, output = self.exit_code, self.duration_ms, self.output
        if exit_code is not None and type(exit_code) is not int and not _is_int(exit_code):
            raise bad(f"exit code must be an integer or None, not {exit_code!r}")
        if type(duration) is not int or duration < 0:  # the common case costs one test
            check_ms("duration_ms", duration)
        if type(output) is not str:
            raise bad("output must be text")
        return ["" if exit_code is None else exit_code, duration, capped_output(output, cap)]


OUTPUT_MAX = 256 * 1024
"""Characters of a job's output one event may carry (workers trim theirs to fit before)."""


def _json_list(text: str) -> bool:
    try:
        return isinstance(json.loads(text), list)
    except ValueError:
        return False


def capped_output(output: str, cap: int) -> str:
    """What the queue carries of a job's output: the text as it is when it fits in ``cap``
    characters (byte for byte: the queue is a transport); else one valid JSON record in the
    workers' format saying what was cut, with the first and last characters of the text."""
    if len(output) <= cap:
        return output
    return _record(output, cap)


def stored_output(output: str, cap: int) -> str:
    """What the record stores of a job's output (``jobs.output_tail``): always valid JSON or
    empty. A JSON list (what workers write) that fits is kept; any other text becomes one
    record in the workers' format (``workers/results.py``) holding it, cut to fit."""
    if not output or (len(output) <= cap and output[0] == "[" and _json_list(output)):
        return output
    return _record(output, cap)


def _record(output: str, cap: int) -> str:
    size = len(output.encode(errors="replace"))
    whole = json.dumps([{"command": "", "stdout_head": output, "stdout_bytes": size}],
                       ensure_ascii=False)
    if len(whole) <= cap:
        return whole
    keep = max(0, cap // 8)  # json.dumps may escape each kept character into several
    head, tail = output[:keep], output[-keep:] if keep else ""
    cut = size - len(head.encode(errors="replace")) - len(tail.encode(errors="replace"))
    record = {"command": "", "stdout_head": head, "stdout_tail": tail, "stdout_bytes": size,
              "stdout_cut": cut,
              "note": f"output of {len(output):,} characters was over the limit of {cap:,}"}
    return json.dumps([record], ensure_ascii=False)


def ack_entries(done: Sequence[tuple[str, int, JobResult]], cap: int) -> list[list[str]]:
    """The jobs of an ack call, checked, as text: [job id, token, exit code, duration, output].

    The hot path of every finished job: plain values pass one combined test; anything else
    (int subclasses, output over ``cap``, bad input) takes ``ack_entry``'s full checks.
    """
    out: list[list[str]] = []
    append, match = out.append, JOB_ID.fullmatch
    for job_id, token, result in done:
        if type(job_id) is str and type(token) is int and token >= 0 and type(result) is JobResult:
            exit_code, duration, output = result.exit_code, result.duration_ms, result.output
            if (type(duration) is int and duration >= 0 and type(output) is str and len(output) <= cap
                    and (exit_code is None or type(exit_code) is int) and match(job_id)):
                append([job_id, str(token), "" if exit_code is None else str(exit_code), str(duration),
                        output])
                continue
        append(ack_entry(job_id, token, result, cap))
    return out


def ack_entry(job_id: str, token: int, result: JobResult, cap: int) -> list[str]:
    """One job of an ack call, fully checked (raises BadArgumentError), as text."""
    check_leases([(job_id, token)])
    if not isinstance(result, JobResult):
        raise bad(f"ack takes JobResult records, not {type(result).__name__}")
    exit_code, duration, output = result.script_args(cap)
    return [job_id, str(int(token)), "" if exit_code == "" else str(int(exit_code)), str(int(duration)),
            output]


class ClaimedJob(NamedTuple):
    """A job handed to a worker by ``Queue.claim``; present ``token`` to ack, extend, fail.

    A named tuple (immutable, read by attribute): a claim of 100 jobs builds 100 of them, and a
    tuple is about three times cheaper to build than a frozen dataclass.
    """

    job_id: str
    task_id: str
    host: str
    token: int
    attempt: int
    due_ms: int
    window: str | None
    wclose_ms: int | None
    after_loss: bool  # re-claimed because its previous worker lost it

    @classmethod
    def from_replies(cls, rows: list[list[Any]]) -> list[ClaimedJob]:
        """From claim.lua's JSON reply, one row per job: id, task id, host, token, attempt, due
        ('' none), window (None), window close (None), after_loss; numbers as decimal text.
        One comprehension for the whole batch (the per-job cost is the claim's hot path)."""
        new = _new_tuple
        return [new(cls, (f[0], f[1], f[2], int(f[3]), int(f[4]), int(f[5]) if f[5] else 0, f[6],
                          None if f[7] is None else int(f[7]), f[8])) for f in rows]


_new_tuple = tuple.__new__  # builds a named tuple without the keyword handling of its __new__


@dataclass(frozen=True)
class ClaimedSchedule:
    """A schedule's due entry (``sched:<name>``) claimed to be fired: create the task of
    ``occurrence_ms``, then ``fire`` with ``token`` (scheduler/schedules/store.py)."""

    name: str
    token: int
    occurrence_ms: int

    @classmethod
    def from_reply(cls, f: list[str]) -> ClaimedSchedule:
        """From claim.lua's 3 strings: name, token, occurrence."""
        name, token, occurrence = f
        return cls(name=name, token=int(token), occurrence_ms=int(occurrence))


@dataclass(frozen=True)
class Claim:
    """The result of one claim call."""

    now_ms: int  # the Redis clock at the claim
    jobs: list[ClaimedJob]
    next_due_ms: int | None  # earliest score left in any due set
    lost: list[str]  # job ids failed as lost by this claim
    schedules: list[ClaimedSchedule] = field(default_factory=list)  # entries to fire
    # Sharded queues, shard >= 1 (claim.lua mode 'remote'): the claimed jobs that need places
    # in shard 0 before they may run, as (job, exclusive, limited groups).
    places: list[tuple[ClaimedJob, bool, str]] = field(default_factory=list)
    # With ``claim(with_hosts=True)``: each claimed job's host hash by job id ({} for an
    # unknown host), read in the claim's own call.
    hosts: dict[str, dict[str, str]] = field(default_factory=dict)
    # Sharded queues: the (shard's Queue, its Claim) parts this claim was made of.
    parts: list[Any] = field(default_factory=list)


@dataclass(frozen=True)
class FailOutcome:
    """What ``Queue.fail_job`` did: ``outcome`` "retry" (pending again at ``due_ms``) or
    "failed" (for good). ``aborted``: this failure crossed the task's max_failures; call
    ``Queue.sweep_aborted`` to cancel its pending, parked and held jobs now."""

    outcome: str
    due_ms: int | None = None
    aborted: bool = False
