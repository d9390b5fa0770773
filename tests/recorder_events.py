"""Events in the documented stream format (docs/architecture.md, "Events"), produced with
XADD, for the recorder's tests and benchmark: the recorder must not depend on the queue core
to be tested. Also helpers to create the SQL rows a submit would have written."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timezone

import redis
import sqlalchemy as sa

from scheduler.queue.keys import Keys
from scheduler.record.models import Job, Task


def job_lifecycle(task: str, jobs: Sequence[tuple[str, str]], *, ts: int = 1_700_000_000_000,
                  fail: frozenset[str] = frozenset(), worker: str = "w1") -> Iterator[dict]:
    """create, enqueue (one batch), then claim and ack (or fail) per job."""
    yield {"kind": "create", "ts": ts, "task": task, "operator": "alice"}
    yield {"kind": "enqueue", "ts": ts, "task": task, "jobs": " ".join(j for j, _ in jobs),
           "count": len(jobs), "due": ts}
    for i, (job, host) in enumerate(jobs):
        t = ts + 10 + i
        yield {"kind": "claim", "ts": t, "task": task, "job": job, "host": host, "attempt": 1,
               "token": 1, "worker": worker}
        if job in fail:
            yield {"kind": "fail", "ts": t + 5, "task": task, "job": job, "host": host,
                   "attempt": 1, "token": 1, "worker": worker, "exit_code": 2,
                   "duration_ms": 5, "output": '{"tail": "boom"}', "error": "exit status 2"}
        else:
            yield {"kind": "ack", "ts": t + 5, "task": task, "job": job, "host": host,
                   "attempt": 1, "token": 1, "worker": worker, "exit_code": 0,
                   "duration_ms": 5, "output": '{"tail": "ok"}'}


def xadd_all(client: redis.Redis, events, keys: Keys = Keys(), *, pipeline_size: int = 500) -> list[str]:
    """XADD every event (all values as strings); returns the stream ids in order."""
    ids: list[str] = []
    pipe = client.pipeline(transaction=False)
    n = 0
    for ev in events:
        pipe.xadd(keys.events, {k: str(v) for k, v in ev.items()})
        n += 1
        if n % pipeline_size == 0:
            ids += [i.decode() if isinstance(i, bytes) else i for i in pipe.execute()]
    ids += [i.decode() if isinstance(i, bytes) else i for i in pipe.execute()]
    return ids


def create_task_rows(engine: sa.Engine, n_jobs: int, *, hosts: str = "h{:04d}") -> tuple[int, list[tuple[str, str]]]:
    """A task row and its job rows in state accepted, as submit writes them; returns ids."""
    with engine.begin() as conn:
        task_id = conn.execute(sa.insert(Task).values(
            action="command", operator="alice", params={"cmd": "true"}, target="all",
            created_at=datetime.now(timezone.utc), total=n_jobs).returning(Task.id)).scalar_one()
        jobs = [(f"{task_id}.{i}", hosts.format(i)) for i in range(n_jobs)]
        if jobs:
            conn.execute(sa.insert(Job), [{"id": j, "task_id": task_id, "seq": i, "host": h}
                                          for i, (j, h) in enumerate(jobs)])
    return task_id, jobs
