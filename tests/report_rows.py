"""Generated SQL records for report tests and ``benchmarks/report.py``: tasks and jobs written
straight into the tables (as the recorder would leave them), fast enough for 100,000 jobs."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.record.models import Job, Task

START = datetime(2026, 11, 2, 8, 0, tzinfo=timezone.utc)


def insert_jobs(engine: Engine, *, tasks: int, jobs_per_task: int, hosts: int = 3000,
                fail_rate: float = 0.02, seed: int = 7, operators: tuple[str, ...] = ("alice", "bob"),
                host_name=lambda i: f"host-{i:05d}", errors=("exit status 1",)) -> None:
    """``tasks`` finished tasks of ``jobs_per_task`` jobs each, spread over a day from START."""
    rng = random.Random(seed)
    task_rows, job_rows = [], []
    for t in range(1, tasks + 1):
        created = START + timedelta(minutes=15 * t)
        task_rows.append({"id": t, "name": f"task {t}", "action": "command" if t % 2 else "firmware",
                          "params": {}, "target": "all", "operator": operators[t % len(operators)],
                          "priority": "normal", "state": "succeeded", "created_at": created,
                          "total": jobs_per_task})
        for n in range(jobs_per_task):
            started = created + timedelta(seconds=rng.uniform(0, 600))
            duration = int(rng.lognormvariate(8, 0.6))
            failed = rng.random() < fail_rate
            job_rows.append({
                "id": f"{t}.{n}", "task_id": t, "seq": n, "host": host_name((t * 7 + n) % hosts),
                "state": "failed" if failed else "succeeded", "attempts": 1,
                "started_at": started, "finished_at": started + timedelta(milliseconds=duration),
                "worker": "w1", "exit_code": 1 if failed else 0, "duration_ms": duration,
                "error": rng.choice(errors) if failed else None})
    with engine.begin() as conn:
        conn.execute(sa.insert(Task.__table__), task_rows)
        for i in range(0, len(job_rows), 5000):
            conn.execute(sa.insert(Job.__table__), job_rows[i:i + 5000])
