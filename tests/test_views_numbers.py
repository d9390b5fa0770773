"""The live views count each job once: a job re-run after its worker was lost, then acked, is one
succeeded job, and ``losses`` (of a worker) is never added to the jobs that ended."""

from __future__ import annotations

import time

from scheduler.queue.client import JobResult, Queue
from scheduler.views.snapshot import read_tasks
from tests.queue_support import KEYS, make_task


def test_jobs_re_run_after_a_lost_worker_are_counted_once(queue: Queue) -> None:
    # Given 4 jobs whose worker was lost (lease 1 ms), re-claimed and acked by another
    make_task(queue, "t", 4, max_attempts=3)
    queue.claim("w-dead", 4, lease_ms=1)
    time.sleep(0.01)
    jobs = queue.claim("w-live", 4).jobs
    assert all(j.after_loss for j in jobs)
    assert queue.ack("w-live", [(j.job_id, j.token, JobResult(0)) for j in jobs]) == [0] * 4
    # When the views read the task
    [progress] = read_tasks(queue.client, KEYS, ["t"])
    # Then 4 of 4 are done, all succeeded, though the worker was lost 4 times
    assert progress is not None and progress.losses == 4
    assert (progress.done, progress.total, progress.pending) == (4, 4, 0)
    assert progress.finished and progress.progress.state == "succeeded"
