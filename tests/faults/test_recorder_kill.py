"""A recorder process killed with ``kill -9`` in the middle of the stream loses nothing: another
recorder takes over the entries it had read but not acknowledged (XAUTOCLAIM), and the ones it
had already written are not written twice: every job row and task counter in SQL ends as the
stream said."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import redis
import sqlalchemy as sa

from scheduler.queue.keys import Keys
from scheduler.record import migrate
from scheduler.record.engine import make_engine
from scheduler.record.recorder import GROUP
from tests.faults.history import check
from tests.recorder_events import create_task_rows, job_lifecycle, xadd_all

KEYS = Keys()


def _recorder(url: str, redis_url: str, name: str, *extra: str, env: dict) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", "from scheduler.cli.app import main; main()",
         "--database-url", url, "--redis-url", redis_url, "recorder", "--consumer", name,
         "--batch", "100", *extra],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_a_recorder_killed_mid_stream_loses_and_duplicates_nothing(
        database_url: str, redis_client: redis.Redis, redis_url: str, tmp_path: Path) -> None:
    migrate.upgrade(database_url)
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    # Given a recorder process busy with a stream long enough (24,000 events) that it is still
    # at work when the first batches are in SQL, however fast it records; every task's jobs
    # in SQL as submit writes them, one job in seven failing
    engine = make_engine(database_url)
    tasks = [create_task_rows(engine, 99) for _ in range(120)]
    failing = frozenset(job for _, jobs in tasks for n, (job, _) in enumerate(jobs) if n % 7 == 3)
    produced = xadd_all(redis_client, (ev for task_id, jobs in tasks
                                       for ev in job_lifecycle(str(task_id), jobs, fail=failing)))
    first = _recorder(database_url, redis_url, "first", env=env)

    def recorded() -> int:
        with engine.connect() as conn:
            return conn.execute(sa.text("SELECT count(*) FROM events")).scalar_one()

    deadline = time.monotonic() + 60
    while recorded() < 100 and time.monotonic() < deadline:
        time.sleep(0.002)
    # When it is killed with no chance to finish its batch
    first.send_signal(signal.SIGKILL)
    first.wait(10)
    first.stderr.close()
    assert 0 < recorded() < len(produced)
    # Then another recorder, taking over entries idle for a moment, records the rest
    time.sleep(0.3)
    second = _recorder(database_url, redis_url, "second", "--drain", "--claim-idle", "200ms",
                       env=env)
    _, err = second.communicate(timeout=120)
    assert second.returncode == 0, err
    with engine.connect() as conn:
        ids = set(conn.scalars(sa.text("SELECT id FROM events")))
        jobs = {row.id: (row.state, row.attempts) for row in conn.execute(
            sa.text("SELECT id, state, attempts FROM jobs"))}
        counters = {row.id: (row.state, row.succeeded, row.failed) for row in conn.execute(
            sa.text("SELECT id, state, succeeded, failed FROM tasks"))}
    engine.dispose()
    assert ids == set(produced)
    assert redis_client.xpending(KEYS.events, GROUP)["pending"] == 0
    # Each job ended as its stream said, once; each task's counters count its jobs
    assert jobs == {job: ("failed" if job in failing else "succeeded", 1)
                    for _, task_jobs in tasks for job, _ in task_jobs}
    for task_id, task_jobs in tasks:
        failed = sum(1 for job, _ in task_jobs if job in failing)
        assert counters[task_id][1:] == (len(task_jobs) - failed, failed), task_id
    check(database_url)
