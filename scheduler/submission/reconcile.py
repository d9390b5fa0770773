"""Reconcile: give Redis back what SQL knows it should hold, and nothing SQL knows is finished.

Redis may lose recent writes (a crash with ``appendfsync everysec``) or everything (a server
started empty). SQL, the system of record, still lists every accepted task and its unfinished
jobs. ``reconcile``:

1. lists the unfinished tasks (accepted, active, paused) and their unfinished jobs in SQL;
2. recreates each missing task hash in Redis from its SQL row (``Queue.create_task``), in one
   step with what it carries (``Carried``): the jobs that had already ended, counted in its
   live counters so views and exit codes still count them, and its pause if SQL says paused
   (by ``rollout`` when a wave's failure limit paused it, so that ``tasks continue`` resumes
   it), so a crash between the two cannot leave it active; and makes Redis's group limits (``{P}:glimit``) those SQL
   records (``groups.max_busy``): claim enforces no limit Redis has lost;
3. finds the unfinished jobs whose job hash Redis does not have;
4. drains the event stream into SQL (a ``Recorder``) and reads those jobs' states again: a job
   that finished in Redis just before step 3 has its event in the stream already (the scripts
   delete a hash and append its event in one atomic step), so it is recorded now and skipped;
5. skips every job that still has an event anywhere in the stream (``in_stream``): a recorder
   may hold it, read but not yet committed (mid-batch, retrying its database, or just killed
   with its entries pending), so SQL cannot yet know the job finished; the report lists them
   and says to run reconcile again once the recorders have caught up;
6. asks the live worker nodes (``LiveNodes``): every node's heartbeat lists the jobs it runs,
   with their tokens, in its presence; reconcile waits for a report of every job still in
   question, for every node present at its start to beat again, or for ``nodes_wait_ms`` (a
   lease: a node silent that long has lost its leases anyway), whichever comes first. A job a
   live node runs comes back as running under that node's token (``Queue.restore`` "run"), so
   the node's heartbeat renews it and its ack ends it: it is never queued again, whatever SQL
   says of it (its claim may never have reached SQL);
7. re-enqueues the rest (``Queue.enqueue``; duplicates are skipped by the script; for a task
   rolled out in waves, only the jobs of the waves released so far: the later waves' jobs are
   staged again, ``_requeue``), each going
   on from its recorded attempts and fencing token (plus ``TOKEN_GAP``), so ``max_attempts``
   does not restart and a stale worker's old token stays refused; except jobs
   of non-idempotent tasks that had started running and no live node runs: they may have run,
   so they end failed as lost (``Queue.restore`` "lost"), never run again blindly, and their
   task can end;
8. records in SQL at once what steps 2, 6 and 7 wrote to the stream (``create``, ``enqueue``,
   ``pause`` of the tasks it touched; ``record.now.record_now``, the recorder's own
   idempotent apply), so the re-enqueued job rows are ``pending`` and a recreated ``accepted``
   task ``active`` when reconcile returns, not when a recorder next runs;
9. records a ``reconcile`` event in SQL with the counts (and the ids, capped);
10. writes the queue's epoch back into Redis from SQL (``scheduler.record.epoch.restore``):
   last, so Redis says it is the queue again only once it holds the queue's tasks again.

Steps 3 to 7 never re-run a job SQL knows to be finished, nor one whose fate is still on its
way from the stream to SQL, nor one a live node runs.

A queue of several shards (``shards``) is repaired shard by shard: each task is rebuilt in the
shard of its id, with that shard's event stream drained and read; the group limits go to
shard 0 (the queue passed in) and the hosts' ``limits`` field to every shard's copy.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import redis
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.errors import DatabaseUnavailableError, RedisUnavailableError, TaskNotActiveError
from scheduler.principal import Principal
from scheduler.queue.client import Carried, JobSpec, Queue, TaskSpec
from scheduler.queue.hosts import write_hosts
from scheduler.queue.presence import read_workers, redis_now_ms
from scheduler.queue.shards import Shards
from scheduler.record.audit import record_event
from scheduler.record.epoch import restore as restore_epoch
from scheduler.record.models import JOB_FINAL_STATES, Event, Job, Task
from scheduler.record.now import record_now, stream_tail
from scheduler.record.recorder import OnBatch, Recorder
from scheduler.record.types import due_ms
from scheduler.submission import group_limits
from scheduler.submission.fanout import host_conns, recorded_spec, recorded_waves

UNFINISHED_TASK_STATES = ("accepted", "active", "paused")
# Ended by an operator or a threshold: never recreated in Redis; their jobs that SQL still calls
# unfinished and Redis lost end cancelled, as a claim ends a job of such a task
ENDED_TASK_STATES = ("cancelled", "aborted")
ID_LIST_CAP = 1_000  # job ids kept in the reconcile event
DRAIN_LIMIT = 100_000  # batches; a stream that never drains means something else is wrong
# A rebuilt job's token goes on from SQL's last one plus this gap: claims that Redis lost in
# its last second (appendfsync everysec) may have handed out tokens SQL never heard of.
TOKEN_GAP = 1_000
STREAM_PAGE = 5_000  # stream entries read per XRANGE when looking for a job's events
NODES_POLL_S = 0.1  # how often the workers hash is read while waiting for the nodes' reports


@dataclass
class ReconcileReport:
    tasks_checked: int = 0
    tasks_recreated: int = 0
    jobs_checked: int = 0
    jobs_present: int = 0
    jobs_finished_meanwhile: int = 0
    jobs_requeued: int = 0
    jobs_not_rerun: int = 0  # started, non-idempotent, no live node runs it: ended as lost
    jobs_adopted: int = 0  # a live node runs it: back as running under that node's token
    jobs_cancelled: int = 0  # its task was cancelled or aborted: its lost end is a cancel
    jobs_decided: int = 0  # its node's late result (refused, recorded) ends it
    jobs_in_stream: int = 0  # events still in the stream, not all in SQL: skipped this time
    jobs_queued_before: int = 0  # queued once by the task still in Redis: finished, not re-run
    group_limits_restored: int = 0  # groups whose limit Redis had lost (or kept after removal)
    windows_restored: int = 0  # window definitions copied into Redis again (freezes pushed too)
    dry_run: bool = False
    requeued: list[str] = field(default_factory=list)
    not_rerun: list[str] = field(default_factory=list)
    in_stream: list[str] = field(default_factory=list)
    adopted: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)  # of a task cancelled or aborted
    decided: list[str] = field(default_factory=list)  # ended by a late result SQL holds
    tasks_ended_in_redis: list[int] = field(default_factory=list)  # cancelled/aborted there

    def counts(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items()
                if k not in ("requeued", "not_rerun", "in_stream", "adopted", "cancelled",
                             "decided", "tasks_ended_in_redis")}


class LiveNodes:
    """Step 6: the jobs the live worker nodes run, as their heartbeats report them in the
    workers hash (``workers.heartbeat``: ``running`` maps each job to [token, attempt]).

    Waited for once per reconcile, from the first question: until every job asked about is
    reported, or ``wait_ms`` (a lease) has passed. Which nodes are alive cannot be known: Redis
    lost their presence with the rest, and a node that has not beaten again yet may run any of
    the jobs. Only reports newer than the start count: a report from before a loss may list
    jobs that ended since. Two nodes reporting one job: the higher token is the current run."""

    def __init__(self, client: redis.Redis, prefix: str, wait_ms: int) -> None:
        self.client, self.prefix, self.wait_ms = client, prefix, wait_ms
        self.start_ms: int | None = None
        self.deadline = 0.0

    def running(self, job_ids: set[str]) -> dict[str, tuple[str, int, int]]:
        """job id -> (worker, token, attempt) of each of ``job_ids`` a live node runs."""
        if self.start_ms is None:
            self.start_ms = redis_now_ms(self.client)
            self.deadline = time.monotonic() + self.wait_ms / 1000
        while True:
            rows = [r for r in read_workers(self.client, self.prefix)
                    if int(r.get("ms") or 0) >= self.start_ms]
            found: dict[str, tuple[str, int, int]] = {}
            for row in rows:
                for job_id, (token, attempt) in (row.get("running") or {}).items():
                    if job_id in job_ids and int(token) > found.get(job_id, ("", -1, 0))[1]:
                        found[job_id] = (row["worker"], int(token), int(attempt))
            if len(found) == len(job_ids) or time.monotonic() >= self.deadline:
                return found
            time.sleep(NODES_POLL_S)


def task_spec(task: Any, recorded: dict[str, Any] | None = None) -> TaskSpec:
    """The queue's live task from its SQL row. ``recorded``: the queue part of the task's
    ``submit`` event (``scheduler.submission.fanout.recorded_spec``), whose spec is exact where the row
    lacks fields (executor options, expected duration) or rounds them (timeout in seconds)."""
    spec = {"action": task.action, "params": task.params or {}}
    if task.executor:
        spec["executor"] = task.executor
    timeout_ms = task.timeout_s * 1000
    if recorded and isinstance(recorded.get("spec"), dict):
        spec = recorded["spec"]
        timeout_ms = int(recorded.get("timeout_ms") or timeout_ms)
    return TaskSpec(task_id=str(task.id), priority=task.priority, max_running=task.max_running,
                    max_failures=task.max_failures, max_attempts=task.max_attempts,
                    backoff_ms=task.backoff_ms, timeout_ms=timeout_ms,
                    idempotent=task.idempotent, spec=spec, operator=task.operator,
                    share=task.share, count_failures=task.count_failures,
                    exclusive=task.exclusive)


def _unfinished(engine: Engine) -> tuple[list[Any], dict[int, list[Any]]]:
    """The tasks SQL calls unfinished, and the cancelled or aborted ones that still have
    unfinished jobs (their ends were lost with Redis), with those jobs."""
    with engine.connect() as conn:
        j = Job.__table__
        open_jobs = sa.exists().where(j.c.task_id == Task.id, j.c.state.not_in(JOB_FINAL_STATES))
        tasks = conn.execute(sa.select(Task).where(sa.or_(
            Task.state.in_(UNFINISHED_TASK_STATES),
            sa.and_(Task.state.in_(ENDED_TASK_STATES), open_jobs))).order_by(Task.id)).all()
        jobs: dict[int, list[Any]] = defaultdict(list)
        ids = [t.id for t in tasks]
        for start in range(0, len(ids), 500):
            q = (sa.select(Job.id, Job.task_id, Job.host, Job.state, Job.due_at, Job.window,
                           Job.attempts, Job.token)
                 .where(Job.task_id.in_(ids[start:start + 500]),
                        Job.state.not_in(JOB_FINAL_STATES))
                 .order_by(Job.task_id, Job.seq))
            for row in conn.execute(q):
                jobs[row.task_id].append(row)
    return tasks, jobs


def _missing(client: redis.Redis, queue: Queue, job_ids: list[str]) -> list[str]:
    missing: list[str] = []
    for start in range(0, len(job_ids), 1_000):
        chunk = job_ids[start:start + 1_000]
        pipe = client.pipeline(transaction=False)
        for job_id in chunk:
            pipe.exists(queue.keys.job(job_id))
        missing += [j for j, there in zip(chunk, pipe.execute()) if not there]
    return missing


def _finished_in_sql(engine: Engine, job_ids: list[str]) -> set[str]:
    done: set[str] = set()
    with engine.connect() as conn:
        for start in range(0, len(job_ids), 500):
            done.update(conn.scalars(sa.select(Job.id).where(
                Job.id.in_(job_ids[start:start + 500]), Job.state.in_(JOB_FINAL_STATES))))
    return done


def _drain(client: redis.Redis, engine: Engine, queue: Queue, on_batch: OnBatch | None) -> None:
    if not client.exists(queue.keys.events):
        return  # Redis lost the stream too: nothing is waiting to be recorded
    recorder = Recorder(client, engine, queue.keys, "reconcile", claim_idle_ms=60_000,
                        on_batch=on_batch)
    for _ in range(DRAIN_LIMIT):
        if recorder.run_once(block_ms=None) == 0:
            return
    raise DatabaseUnavailableError("the event stream did not drain into SQL",
                                   hint="check that the recorders are not failing")


def _late_results(engine: Engine, job_ids: set[str]) -> dict[str, Any]:
    """The last refused result of each of ``job_ids`` that SQL holds (a ``stale`` ack or fail
    refused as ``unknown_job``: its node finished the run after Redis lost the job)."""
    found: dict[str, Any] = {}
    ids = sorted(job_ids)
    with engine.connect() as conn:
        for start in range(0, len(ids), 500):
            rows = conn.execute(sa.select(Event.job_id, Event.worker, Event.data)
                                .where(Event.kind == "stale",
                                       Event.job_id.in_(ids[start:start + 500]))
                                .order_by(Event.id))
            for row in rows:
                data = row.data or {}
                if data.get("reason") == "unknown_job" and data.get("verb") in ("ack", "fail"):
                    found[row.job_id] = row
    return found


def _in_stream(client: redis.Redis, queue: Queue, job_ids: set[str]) -> set[str]:
    """The jobs of ``job_ids`` that any entry still in the stream names (a job event's ``job``,
    or the ``jobs`` list of a batch event), read in pages from the oldest entry."""
    found: set[str] = set()
    start = "-"
    while job_ids - found:
        page = client.xrange(queue.keys.events, min=start, max="+", count=STREAM_PAGE)
        if not page:
            break
        for _entry_id, fields in page:
            job = fields.get("job")
            if job in job_ids:
                found.add(job)
            for listed in (fields.get("jobs") or "").split():
                if listed in job_ids:
                    found.add(listed)
        if len(page) < STREAM_PAGE:
            break
        start = "(" + page[-1][0]
    return found


def _requeue(engine: Engine, queue: Queue, task: Any, specs: list[JobSpec],
             unfinished: list[Any]) -> int:
    """Queue a task's missing jobs again; a task in waves gets back only the jobs of the waves
    released so far, the others are staged again (``scheduler.queue.waves.stage``)."""
    task_id = str(task.id)
    waves = None
    if task.waves and task.wave_state not in (None, "done"):
        with engine.connect() as conn:
            waves = recorded_waves(conn, task.id)
    if not waves:
        return queue.enqueue(task_id, specs)
    from scheduler.queue.waves import stage

    live = queue.task_state(task_id)
    current = int(live.get("wave") or task.wave or 1)
    state = live.get("wave_state") or task.wave_state or "running"
    wave_of = {job_id: n for n, ids in enumerate(waves, 1) for job_id in ids}
    out = [s for s in specs if wave_of.get(s.job_id, 1) <= current]
    later = {s.job_id: s for s in specs if wave_of.get(s.job_id, 1) > current}
    added = queue.enqueue(task_id, out) if out else 0
    listed = [(later.get(j.id) or JobSpec(j.id, j.host), wave_of.get(j.id, 1)) for j in unfinished]
    policy = {k: v for k, v in dict(task.waves).items() if k != "count"}
    return added + stage(queue, task_id, len(waves), policy, listed, released=current,
                         state=state, wave_failures=_failed_of(engine, waves[min(current, len(waves)) - 1]))


def _failed_of(engine: Engine, job_ids: list[str]) -> int:
    """How many of the jobs SQL records failed for good (lost ones included): what a rebuilt
    rollout's current wave had counted against its failure limit, at least."""
    n = 0
    with engine.connect() as conn:
        for start in range(0, len(job_ids), 500):
            n += conn.scalar(sa.select(sa.func.count()).select_from(Job).where(
                Job.id.in_(job_ids[start:start + 500]), Job.state.in_(("failed", "lost")))) or 0
    return n


def _paused_by_rollout(engine: Engine, task_id: int) -> bool:
    """The task's last pause or resume was the pause of a wave that reached its failure limit."""
    e = Event.__table__
    with engine.connect() as conn:
        last = conn.execute(sa.select(e.c.kind, e.c.operator)
                            .where(e.c.task_id == str(task_id), e.c.kind.in_(("pause", "resume")))
                            .order_by(e.c.ts.desc(), e.c.id.desc()).limit(1)).first()
    return last is not None and last.kind == "pause" and last.operator == "rollout"


def _carried(engine: Engine, task: Any, operator: str) -> Carried:
    """What the recreated task carries from SQL: its ended jobs, counted as the live counters
    count them (lost ones among the failed, and as lost_failed, so the views say them lost
    and no threshold counts them; each host failed for good once towards --max-failures),
    and its pause (a rollout's own pause stays the rollout's: `tasks continue` resumes it)."""
    j = Job.__table__
    with engine.connect() as conn:
        counts = dict(conn.execute(sa.select(j.c.state, sa.func.count())
                                   .where(j.c.task_id == task.id,
                                          j.c.state.in_(JOB_FINAL_STATES))
                                   .group_by(j.c.state)).all())
    failed = counts.get("failed", 0) + counts.get("lost", 0)
    paused_by = ""
    if task.state == "paused":
        paused_by = "rollout" if _paused_by_rollout(engine, task.id) else operator
    return Carried(ended=sum(counts.values()), succeeded=counts.get("succeeded", 0),
                   failed=failed, cancelled=counts.get("cancelled", 0),
                   failed_hosts=counts.get("failed", 0), lost_failed=counts.get("lost", 0),
                   paused_by=paused_by)


def reconcile(engine: Engine, queue: Queue, *, operator: Principal | str = "reconcile",
              dry_run: bool = False, on_batch: OnBatch | None = None,
              shards: Shards | None = None, nodes_wait_ms: int | None = None) -> ReconcileReport:
    """Repair Redis from SQL (see the module docstring); ``dry_run`` changes nothing (and waits
    for no node). ``on_batch``: the recorder's hook for the batches it drains (the notice
    detector). ``queue``: shard 0's; ``shards``: the queue's shards (None: the queue's one
    shard). ``nodes_wait_ms``: longest wait for the live nodes' reports (step 6); None: the
    queue's lease; 0 where no worker node can be running (nothing to wait for). ``operator``:
    who runs it: its name restores what Redis lost, its ``reconcile`` event names it."""
    by, operator = operator, str(operator)
    report = ReconcileReport(dry_run=dry_run)
    nodes = LiveNodes(queue.client, queue.keys.prefix,
                      queue.lease_ms if nodes_wait_ms is None else nodes_wait_ms)
    tasks, jobs = _unfinished(engine)
    report.tasks_checked = len(tasks)
    if shards is None or not shards.sharded:
        parts = [(queue, tasks)]
    else:
        parts = [(queue if i == 0 else Queue(queue.client, keys, lease_ms=queue.lease_ms),
                  [t for t in tasks if shards.index_of_task(str(t.id)) == i])
                 for i, keys in enumerate(shards.all)]
    # Every shard's tasks first, then the limits, then the jobs: claims of re-enqueued jobs
    # find the group limits already there.
    started = [_recreate(engine, q, part, report, operator, dry_run) for q, part in parts]
    report.group_limits_restored = group_limits.push(engine, queue, operator, dry_run=dry_run,
                                                     shards=shards)
    if not dry_run:
        report.windows_restored = _restore_windows(engine, queue, shards)
    for (q, part), (since, touched) in zip(parts, started):
        _repair_jobs(engine, q, part, jobs, report, dry_run, on_batch, touched, nodes)
        if not dry_run:
            record_now(q.client, engine, q.keys.events, since, touched)
    report.jobs_requeued = len(report.requeued) - report.jobs_queued_before
    if not dry_run:
        with engine.begin() as conn:
            record_event(conn, "reconcile", operator=by, data={
                **report.counts(), "requeued": report.requeued[:ID_LIST_CAP],
                "not_rerun": report.not_rerun[:ID_LIST_CAP],
                "adopted": report.adopted[:ID_LIST_CAP],
                "in_stream": report.in_stream[:ID_LIST_CAP]})
        restore_epoch(engine, queue.client, queue.keys)
    return report


@contextmanager
def _ended_in_redis(task_id: int, report: ReconcileReport) -> Iterator[None]:
    """A task SQL calls unfinished that Redis holds cancelled or aborted (its event is on its way
    to SQL): it takes no job again; the rest of the repair goes on."""
    try:
        yield
    except TaskNotActiveError:
        report.tasks_ended_in_redis.append(task_id)


class _Lent:
    """The reconcile's client, lent to a helper that closes the client it is given."""

    def __init__(self, client: Any) -> None:
        self._client = client

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def close(self) -> None:
        pass


def _restore_windows(engine: Engine, queue: Queue, shards: Shards | None) -> int:
    """The service windows and the hosts' freezes, copied into Redis again from SQL (what the
    claim path reads): a Redis that lost its data lost them too, and every job of a task in
    windows would be deferred ("window ... is not in Redis") until a `windows sync`."""
    from scheduler.windows.freezes import push as push_freezes
    from scheduler.windows.store import sync_windows

    where: Any = shards if shards is not None and shards.sharded else queue.keys
    count, warning = sync_windows(engine, lambda: _Lent(queue.client), where)
    if warning:
        raise RedisUnavailableError(warning)
    push_freezes(engine, queue.client, where)
    return count


def _recreate(engine: Engine, queue: Queue, tasks: list[Any], report: ReconcileReport,
              operator: str, dry_run: bool) -> tuple[str, set[str]]:
    """Step 2 in one shard: the task hashes Redis lacks. Returns the shard's stream tail
    before any write, and the tasks written."""
    since = stream_tail(queue.client, queue.keys.events)
    touched: set[str] = set()
    for task in tasks:
        if task.state in ENDED_TASK_STATES or queue.task_state(str(task.id)):
            continue
        report.tasks_recreated += 1
        if not dry_run:
            with engine.connect() as conn:
                recorded = recorded_spec(conn, task.id)
            queue.create_task(task_spec(task, recorded), _carried(engine, task, operator))
            touched.add(str(task.id))
    return since, touched


def _repair_jobs(engine: Engine, queue: Queue, tasks: list[Any], jobs: dict[int, list[Any]],
                 report: ReconcileReport, dry_run: bool, on_batch: OnBatch | None,
                 touched: set[str], nodes: LiveNodes) -> None:
    """Steps 3 to 7 in one shard (its tasks, its stream); adds to ``report``."""
    client = queue.client
    candidates = [j for t in tasks for j in jobs.get(t.id, [])]
    report.jobs_checked += len(candidates)
    missing = _missing(client, queue, [j.id for j in candidates])
    report.jobs_present += len(candidates) - len(missing)
    if not missing:
        return
    _drain(client, engine, queue, on_batch)
    finished = _finished_in_sql(engine, missing)
    report.jobs_finished_meanwhile += len(finished)
    missing_set = set(missing) - finished
    in_stream = _in_stream(client, queue, missing_set)
    report.in_stream = sorted({*report.in_stream, *in_stream})
    report.jobs_in_stream = len(report.in_stream)
    missing_set -= in_stream
    by_task = {t.id: t for t in tasks}
    asked = {j.id for j in candidates if j.id in missing_set
             and by_task[j.task_id].state not in ENDED_TASK_STATES}
    live = nodes.running(asked) if asked and not dry_run else {}
    late = _late_results(engine, asked - set(live))
    requeue: dict[int, list[JobSpec]] = defaultdict(list)
    restore: dict[int, list[tuple[str, str, str, int, int, str, int]]] = defaultdict(list)
    for job in candidates:
        if job.id not in missing_set:
            continue
        task = by_task[job.task_id]
        due = due_ms(job.due_at) if job.due_at is not None else 0
        if task.state in ENDED_TASK_STATES:  # its end was lost with Redis: it ends now
            restore[job.task_id].append(("cancel", job.id, job.host, job.attempts or 0,
                                         (job.token or 0) + TOKEN_GAP, "", max(due, 0)))
            report.cancelled.append(job.id)
            continue
        if job.id in live:  # a live node runs it: back under its token, never queued again
            worker, token, attempt = live[job.id]
            restore[job.task_id].append(("run", job.id, job.host, attempt, token, worker,
                                         max(due, 0)))
            report.adopted.append(job.id)
            continue
        result = late.get(job.id)
        if result is not None and int(result.data.get("token") or 0) >= (job.token or 0):
            # its run ended after the loss; the refused result decides it
            data = result.data
            output = data.get("output")  # the fold keeps JSON output parsed
            restore[job.task_id].append((
                data["verb"], job.id, job.host, int(data.get("attempt") or job.attempts or 1),
                int(data.get("token") or 0), result.worker or "", max(due, 0),
                {"exit_code": "" if data.get("exit_code") is None else str(data["exit_code"]),
                 "duration_ms": str(data.get("duration_ms") or 0),
                 "output": output if isinstance(output, str) else
                 ("" if output is None else json.dumps(output)),
                 "error": str(data.get("error") or "")}))
            report.decided.append(job.id)
            continue
        if not task.idempotent and (job.state == "running" or job.attempts > 0):
            restore[job.task_id].append(("lost", job.id, job.host, job.attempts or 0,
                                         (job.token or 0) + TOKEN_GAP, "", max(due, 0)))
            report.not_rerun.append(job.id)
            continue
        requeue[job.task_id].append(JobSpec(
            job.id, job.host, due_ms=max(due, 0), window=job.window,
            attempt=job.attempts or 0, token=(job.token or 0) + TOKEN_GAP))
        report.requeued.append(job.id)
        if job.state == "running":  # its run was lost with Redis: say so, as a lease expiry does
            restore[job.task_id].append(("retry", job.id, job.host, job.attempts or 0,
                                         job.token or 0, "", max(due, 0)))
    report.jobs_not_rerun = len(report.not_rerun)
    report.jobs_adopted = len(report.adopted)
    report.jobs_cancelled = len(report.cancelled)
    report.jobs_decided = len(report.decided)
    if dry_run:
        return
    names = {j.host for specs in requeue.values() for j in specs}
    names |= {entry[2] for entries in restore.values() for entry in entries}
    if names:  # Redis may have lost the hosts' connection data too
        with engine.connect() as conn:
            write_hosts(client, queue.keys, host_conns(conn, names))
    added = 0
    asked_back = sum(len(v) for v in requeue.values())
    # The runs first: an adopted job holds its host again before a re-queued job of an
    # exclusive task can be claimed onto it. restore moves a task's span on and enqueue skips
    # ids below the span, so a task with both has its re-queued jobs queued just before its
    # restore: the tasks with restores only go first, then those with both.
    # A lost run's event first: it explains the second run of what is queued again just after
    for task_id, entries in restore.items():
        retries = [e for e in entries if e[0] == "retry"]
        if retries:
            with _ended_in_redis(task_id, report):
                queue.restore(str(task_id), retries)
            restore[task_id] = [e for e in entries if e[0] != "retry"]
    for task_id in sorted((t for t in restore if restore[t]), key=lambda t: t in requeue):
        with _ended_in_redis(task_id, report):
            if task_id in requeue:
                added += _requeue(engine, queue, by_task[task_id], requeue.pop(task_id),
                                  jobs.get(task_id, []))
            queue.restore(str(task_id), restore[task_id])
        touched.add(str(task_id))
    for task_id, specs in requeue.items():
        with _ended_in_redis(task_id, report):
            added += _requeue(engine, queue, by_task[task_id], specs, jobs.get(task_id, []))
        touched.add(str(task_id))
    # enqueue skips a job its task queued once (finished since, its event gone): say so
    report.jobs_queued_before += asked_back - added


__all__ = ["ReconcileReport", "reconcile", "task_spec"]
