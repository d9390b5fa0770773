"""The history checker: reads what a run left behind and judges it against the guarantees.

Every fault test ends with :func:`check` (or :func:`check_stream` for a run without a SQL
record). It reads every job's and schedule's event history (from the SQL ``events`` table, or
from the Redis stream) and what is left in Redis, and judges:

1. ``ended once``: each accepted job ended exactly once in a final state (``ack``; ``fail`` for
   good; ``lost`` failed or cancelled; ``cancel``) between two operator ``retry-failed``
   revivals, and, when the run is over (``require_end``), every job has ended;
2. ``early``: no job was claimed before it was due (its enqueue, or the ``due`` of its last
   ``retry``, ``defer``, ``release`` or ``unpark``);
3. ``window``: no job started outside its one-off service windows or inside a freeze (a claim
   followed by a ``defer`` of the same token did not start);
4. ``non-idempotent twice``: no job of a non-idempotent task started again without knowing how
   its previous attempt ended (a ``retry`` after a reported failure, a ``defer`` or a
   ``release`` before it ran, or an operator's ``retry-failed`` are known ends; a lost worker
   is not);
5. ``invisible duplicate``: a job started again is explained by an event between the two
   starts (``lost``, ``retry``, ``release``, ``defer``, ``unpark``); the re-runs after an
   unknown end (a lost worker) are counted as visible duplicates (job, attempt, token);
6. ``schedule``: every occurrence of an ``--every`` schedule between its first and last ran once
   (one task) or is recorded ``missed``, never both, never twice;
7. ``counters``: SQL task counters equal the counts of their job rows, and the Redis task
   hashes that are left agree with them as every view counts (``scheduler.progress``: Redis
   ``failed`` less ``lost_failed`` is ``failed``, ``lost_failed`` is ``lost``);
8. ``stale``: every refused result is recorded: as many ``stale`` events as the workers logged
   refusals (when their logs are given), each with a token older than the job's.

It prints a short verdict (counts) and, when a check fails, the offending histories.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import redis
import sqlalchemy as sa

from scheduler.progress import from_job_states, from_task_hash
from scheduler.queue.keys import Keys
from scheduler.queue.shards import Shards

TERMINAL = ("ack", "fail")
EXPLAINS_RERUN = ("lost", "retry", "release", "defer", "unpark", "retry-failed")
SETS_DUE = ("retry", "defer", "release", "unpark")
KNOWN_OUTCOME = ("retry", "defer", "retry-failed")  # the previous attempt reported its end
LOST_ENDS = ("failed", "cancelled")


@dataclass(frozen=True)
class Ev:
    """One event: its position in the stream (``ms``, ``seq``), kind and fields."""

    ms: int
    seq: int
    kind: str
    f: dict[str, Any]

    def jobs(self) -> list[str]:
        ids = str(self.f.get("jobs") or "").split()
        if self.f.get("job"):
            ids.append(str(self.f["job"]))
        return ids

    def __str__(self) -> str:
        keep = {k: v for k, v in self.f.items()
                if k in ("job", "worker", "token", "attempt", "outcome", "reason", "due",
                         "operator", "verb", "error")}
        return f"{self.ms}-{self.seq} {self.kind} {keep}"


@dataclass
class Verdict:
    """What the checker found: counts, and the problems with the histories behind them."""

    counts: Counter[str] = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def report(self) -> str:
        head = "history: " + ("OK" if self.ok else f"{len(self.problems)} PROBLEM(S)") + "; "
        head += ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))
        return "\n".join([head, *self.problems[:40]])


def _pos(event_id: str) -> tuple[int, int]:
    """(ms, seq) of a stream id as the events table keeps it (``<ms>-<seq>``, or
    ``<ms>-<seq>:<shard>`` for shards >= 1 of a sharded queue)."""
    ms, _, seq = event_id.partition(":")[0].partition("-")
    return int(ms), int(seq) if seq.isdigit() else 0


def _ms(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        at = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return int(at.timestamp() * 1000)
    text = str(value)
    if text.isdigit():
        return int(text)
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        return None
    return _ms(at)


# ---------------------------------------------------------------------------------- reading

@dataclass
class Run:
    """What a run left: events in stream order, job and task facts, windows, Redis hashes."""

    events: list[Ev]
    idempotent: dict[str, bool]  # task id -> idempotent
    job_rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # SQL jobs
    task_rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # SQL tasks
    windows: dict[str, tuple[int | None, int | None, bool]] = field(default_factory=dict)
    schedules: dict[str, int] = field(default_factory=dict)  # name -> period ms (--every)
    occurrences: dict[str, list[int]] = field(default_factory=dict)  # name -> task occurrences
    redis_tasks: dict[str, dict[str, str]] = field(default_factory=dict)


def read_sql(url_or_engine: Any, client: redis.Redis | None = None,
             keys: Keys | Shards = Keys()) -> Run:
    engine = sa.create_engine(url_or_engine) if isinstance(url_or_engine, str) else url_or_engine
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT id, kind, task_id, job_id, host, worker, operator, data FROM events"))
            events = []
            for r in rows:
                if "-L" in r.id:
                    continue  # written straight into SQL (submit, windows ...), not a queue event
                data = r.data if isinstance(r.data, dict) else json.loads(r.data or "{}")
                f = {**data, "task": r.task_id, "job": r.job_id, "host": r.host,
                     "worker": r.worker, "operator": r.operator}
                if isinstance(f.get("jobs"), list):
                    f["jobs"] = " ".join(f["jobs"])
                ms, seq = _pos(r.id)
                events.append(Ev(ms, seq, r.kind, {k: v for k, v in f.items() if v is not None}))
            tasks = {str(r.id): r._asdict() for r in conn.execute(sa.text(
                "SELECT id, idempotent, state, total, succeeded, failed, lost, cancelled, "
                "schedule_id, occurrence FROM tasks"))}
            jobs = {r.id: r._asdict() for r in conn.execute(sa.text(
                'SELECT id, task_id, state, "window" FROM jobs'))}
            # Windows as added (removed ones too: the window-add event keeps the definition)
            windows = {}
            for (data,) in conn.execute(sa.text(
                    "SELECT data FROM events WHERE kind = 'window-add' ORDER BY ts")):
                data = data if isinstance(data, dict) else json.loads(data or "{}")
                d = data.get("definition") or {}
                windows[data.get("window")] = (_ms(d.get("starts_at")), _ms(d.get("ends_at")),
                                               d.get("kind") == "freeze")
            schedules: dict[str, int] = {}
            names: dict[int, str] = {}
            for r in conn.execute(sa.text("SELECT id, name, cron FROM schedules")):
                names[r.id] = r.name
                m = re.fullmatch(r"@every (\d+)s", r.cron or "")
                if m:
                    schedules[r.name] = int(m.group(1)) * 1000
    finally:
        if isinstance(url_or_engine, str):
            engine.dispose()
    occurrences: dict[str, list[int]] = defaultdict(list)
    for t in tasks.values():
        if t["schedule_id"] in names and t["occurrence"] is not None:
            occurrences[names[t["schedule_id"]]].append(_ms(t["occurrence"]) or 0)
    run = Run(sorted(events, key=lambda e: (e.ms, e.seq)),
              {tid: bool(t["idempotent"]) for tid, t in tasks.items()}, jobs, tasks, windows,
              schedules, dict(occurrences))
    if client is not None:
        run.redis_tasks = _redis_tasks(client, keys, tasks)
    return run


def read_stream(client: redis.Redis, keys: Keys = Keys()) -> Run:
    """A run without a SQL record: the stream itself (nothing trimmed it) and the task hashes."""
    events = []
    for entry_id, fields in client.xrange(keys.events):
        eid = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
        f = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes)
                                                            else v) for k, v in fields.items()}
        ms, seq = _pos(eid)
        events.append(Ev(ms, seq, f.pop("kind", ""), f))
    task_ids = {e.f["task"] for e in events if e.kind == "create" and e.f.get("task")}
    idem = {}
    hashes = {}
    for tid in task_ids:
        h = client.hgetall(keys.task(tid))
        h = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes)
                                                            else v) for k, v in h.items()}
        hashes[tid] = h
        idem[tid] = h.get("idempotent", "1") == "1"
    return Run(events, idem, redis_tasks=hashes)


def _redis_tasks(client: redis.Redis, keys: Keys | Shards, tasks: Iterable[str]) -> dict[str, dict]:
    out = {}
    for tid in tasks:
        shard = keys.of_task(tid) if isinstance(keys, Shards) else keys
        h = client.hgetall(shard.task(tid))
        if h:
            out[tid] = {(k.decode() if isinstance(k, bytes) else k):
                        (v.decode() if isinstance(v, bytes) else v) for k, v in h.items()}
    return out


# --------------------------------------------------------------------------------- judging

def judge(run: Run, *, require_end: bool = True, refusals_logged: int | None = None) -> Verdict:
    v = Verdict()
    by_job: dict[str, list[Ev]] = defaultdict(list)
    for e in run.events:
        if e.kind in ("create", "abort", "pause", "resume", "reorder", "reprioritize", "fire",
                      "missed", "invalid"):
            continue
        for job in e.jobs():
            by_job[job].append(e)
    v.counts["events"] = len(run.events)
    v.counts["jobs"] = len(by_job)

    def problem(kind: str, job: str, why: str) -> None:
        v.counts[f"problem:{kind}"] += 1
        history = "\n    ".join(str(e) for e in by_job.get(job, []))
        v.problems.append(f"[{kind}] job {job}: {why}\n    {history}")

    for job, evs in by_job.items():
        _judge_job(run, job, evs, v, problem, require_end)
    for job, row in run.job_rows.items():
        if job not in by_job and require_end and row["state"] not in (
                "succeeded", "failed", "lost", "cancelled"):
            problem("never queued", job, f"SQL row {row['state']}, no event in the record")
    _judge_schedules(run, v)
    _judge_counters(run, v)
    stale = [e for e in run.events if e.kind == "stale"]
    v.counts["stale recorded"] = len(stale)
    for e in stale:
        cur, tok = e.f.get("current_token"), e.f.get("token")
        if e.f.get("reason") == "stale_token" and cur is not None and tok is not None \
                and int(tok) >= int(cur):
            v.problems.append(f"[stale] {e}: its token is not older than the job's")
    if refusals_logged is not None and refusals_logged > len(stale):
        v.problems.append(f"[stale] the workers logged {refusals_logged} refused results, "
                          f"the record holds {len(stale)}")
    return v


def _judge_job(run: Run, job: str, evs: list[Ev], v: Verdict, problem: Any,
               require_end: bool) -> None:
    task = job.rpartition(".")[0]
    idempotent = run.idempotent.get(task, True)
    due: int | None = None
    ended = 0
    starts: list[Ev] = []  # since the last revival
    explained = True
    known = True  # the previous start's outcome was reported (retry after a failed attempt)
    pending_claim: Ev | None = None

    def settle_claim(started: bool) -> None:
        nonlocal pending_claim, explained, known
        if pending_claim is None:
            return
        if started:
            if starts and not explained:
                problem("invisible duplicate", job, "started again with no event saying why")
            if starts and not known:
                # The previous attempt's outcome is unknown (its worker was lost): a re-run.
                v.counts["duplicate runs (visible)"] += 1
                if not idempotent:
                    problem("non-idempotent twice", job,
                            "started again without knowing how its previous attempt ended")
            starts.append(pending_claim)
            _judge_window(run, job, pending_claim, problem)
            explained = known = False
        pending_claim = None

    for e in evs:
        kind = e.kind
        if pending_claim is not None and kind != "claim":
            same = str(e.f.get("token")) == str(pending_claim.f.get("token"))
            not_run = kind == "defer" or (kind == "release" and not idempotent)
            settle_claim(not (same and not_run))
        if kind == "enqueue":
            # an enqueue naming the job queued it (again, for reconcile) at its batch's
            # earliest due or later: what the queue was told from then on
            due = _ms(e.f.get("due"))
        elif kind == "claim":
            settle_claim(True)
            at = _ms(e.f.get("ts")) or e.ms
            if due is not None and at + 1 < due:  # ms-rounded on both sides
                problem("early", job, f"claimed at {at}, due at {due}")
            pending_claim = e
            v.counts["claims"] += 1
        elif kind == "adopt":
            # reconcile put a job a live node runs back under its token: the same run as its
            # claim, which the record may lack (Redis lost it before the recorder read it)
            last = pending_claim or (starts[-1] if starts else None)
            if last is None or str(last.f.get("token")) != str(e.f.get("token")):
                settle_claim(True)
                pending_claim = e
            v.counts["adopted"] += 1
        elif kind == "retry-failed":
            starts.clear()
            ended = 0
            explained = known = True
            due = _ms(e.f.get("due"))
            v.counts["revived"] += 1
        if kind in SETS_DUE and e.f.get("due") not in (None, ""):
            due = _ms(e.f.get("due"))
        if kind in EXPLAINS_RERUN:
            explained = True
        if kind in KNOWN_OUTCOME or (kind == "release" and not idempotent):
            known = True
        final = (kind in TERMINAL or (kind == "lost" and e.f.get("outcome") in LOST_ENDS)
                 or kind == "cancel")
        if final:
            ended += 1
            v.counts[f"ended:{kind}"] += 1
            if ended > 1:
                problem("ended twice", job, f"a second final event ({kind})")
    settle_claim(True)
    if require_end and ended == 0:
        problem("never ended", job, "no final event")
    row = run.job_rows.get(job)
    if row is not None and require_end and row["state"] not in (
            "succeeded", "failed", "lost", "cancelled"):
        problem("never ended", job, f"SQL row still {row['state']}")


def _judge_window(run: Run, job: str, claim: Ev, problem: Any) -> None:
    row = run.job_rows.get(job)
    if not row or not row.get("window") or not run.windows:
        return
    at = _ms(claim.f.get("ts")) or claim.ms
    names = str(row["window"]).split()
    wanted = [run.windows.get(n) for n in names if not n.startswith("!")]
    frozen = [run.windows.get(n[1:]) for n in names if n.startswith("!")]
    one_off = [w for w in wanted if w and w[0] is not None and w[1] is not None]
    if one_off and not any(lo <= at < hi for lo, hi, _ in one_off):
        problem("window", job, f"started at {at} outside its windows {names}")
    for w in frozen:
        if w and w[0] is not None and w[1] is not None and w[0] <= at < w[1]:
            problem("window", job, f"started at {at} inside a freeze")


def _judge_schedules(run: Run, v: Verdict) -> None:
    missed: dict[str, Counter[int]] = defaultdict(Counter)
    fired: dict[str, Counter[int]] = defaultdict(Counter)
    for e in run.events:
        name, occ = e.f.get("schedule"), e.f.get("occurrence")
        if name and occ not in (None, ""):
            if e.kind == "missed":
                missed[name][int(occ)] += 1
            elif e.kind == "fire":
                fired[name][int(occ)] += 1
    for name, period in run.schedules.items():
        ran = Counter(run.occurrences.get(name, []))
        seen = set(ran) | set(missed[name])
        if not seen:
            continue
        first, last = min(seen), max(seen)
        for occ in range(first, last + 1, period):
            n, m = ran.get(occ, 0), missed[name].get(occ, 0)
            v.counts["schedule occurrences"] += 1
            v.counts["schedule missed"] += 1 if m else 0
            if n + m != 1 or fired[name].get(occ, 0) > 1:
                v.problems.append(f"[schedule] {name} occurrence {occ}: {n} task(s), {m} missed, "
                                  f"{fired[name].get(occ, 0)} fire event(s)")


def _judge_counters(run: Run, v: Verdict) -> None:
    by_task: dict[str, Counter[str]] = defaultdict(Counter)
    for job, row in run.job_rows.items():
        by_task[str(row["task_id"])][row["state"]] += 1
    for tid, t in run.task_rows.items():
        c = by_task.get(tid, Counter())
        sql = {k: int(t[k] or 0) for k in ("succeeded", "failed", "lost", "cancelled")}
        if c and sql != {k: c[k] for k in sql}:
            v.problems.append(f"[counters] task {tid}: SQL counters {sql}, job rows {dict(c)}")
        h = run.redis_tasks.get(tid)
        if h and c:
            # The views' one rule (scheduler.progress): each job once, failed by the host and
            # lost with the worker, from Redis (failed less lost_failed) and from the job rows.
            ended = ("succeeded", "failed", "lost", "cancelled")
            live, rows = from_task_hash(h).counts(), from_job_states("active", c).counts()
            redis_view = {k: live[k] for k in ended}
            rows_view = {k: rows[k] for k in ended}
            if redis_view != rows_view:
                v.problems.append(f"[counters] task {tid}: Redis {redis_view}, SQL rows "
                                  f"{rows_view}")
    v.counts["tasks"] = len(run.task_rows) or len(run.redis_tasks)


def refusals_in(logs: Sequence[Path]) -> int:
    """Results the workers logged as refused (their stale acks and fails)."""
    pattern = re.compile(r"(ack|fail) refused")
    n = 0
    for log in logs:
        if log.exists():
            n += sum(1 for line in log.read_text(errors="replace").splitlines()
                     if pattern.search(line) and ("STALE" in line.upper() or "UNKNOWN_JOB" in line
                                                  or "no job" in line))
    return n


def check(database_url: Any, client: redis.Redis | None = None, *, keys: Keys | Shards = Keys(),
          require_end: bool = True, logs: Sequence[Path] = ()) -> Verdict:
    """Judge a run recorded in SQL; print the verdict; fail the test when it is not OK."""
    verdict = judge(read_sql(database_url, client, keys), require_end=require_end,
                    refusals_logged=refusals_in(logs) if logs else None)
    print(verdict.report())
    assert verdict.ok, verdict.report()
    return verdict


def check_stream(client: redis.Redis, *, keys: Keys = Keys(), require_end: bool = True) -> Verdict:
    """Judge a run from the Redis stream alone (queue-level fault tests)."""
    verdict = judge(read_stream(client, keys), require_end=require_end)
    print(verdict.report())
    assert verdict.ok, verdict.report()
    return verdict


__all__ = ["Run", "Verdict", "check", "check_stream", "judge", "read_sql", "read_stream",
           "refusals_in"]
