"""The live views count each job once: a job re-run after its worker was lost, then acked, is one
succeeded job, and ``losses`` (of a worker) is never added to the jobs that ended. A job lost for
good with its worker is counted ``lost``, beside ``failed`` and never in it, as the SQL record
counts it (``scheduler.progress``, docs/reliability.md section 12), also after retry-failed."""

from __future__ import annotations

import time

from scheduler.queue.client import JobResult, Queue
from scheduler.views.render import task_table
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
    assert (progress.failed, progress.lost) == (0, 0)


def _two_lost_one_failed(queue: Queue) -> list[str]:
    """Task t of 4 jobs, not idempotent: 1 acked, 1 failed by its host, 2 lost with their
    worker (leases run out). The ids, in that order."""
    ids = make_task(queue, "t", 4, max_attempts=1)
    jobs = {j.job_id: j for j in queue.claim("w1", 4).jobs}
    ok, bad, *gone = (jobs[i] for i in ids)
    queue.ack("w1", [(ok.job_id, ok.token, JobResult(0))])
    queue.fail_job("w1", bad.job_id, bad.token, JobResult(1), error="exit 1", retryable=False)
    queue.extend("w1", [(j.job_id, j.token) for j in gone], lease_ms=1)
    time.sleep(0.02)
    assert queue.claim("w2", 4).jobs == []
    return ids


def test_the_live_counters_count_two_lost_jobs_as_lost_and_one_failed_as_failed(
        queue: Queue) -> None:
    _two_lost_one_failed(queue)
    [t] = read_tasks(queue.client, KEYS, ["t"])
    assert t is not None
    counts = t.progress.counts()
    assert {k: counts[k] for k in ("state", "succeeded", "failed", "lost", "done", "pending")} \
        == {"state": "failed", "succeeded": 1, "failed": 1, "lost": 2, "done": 4, "pending": 0}
    assert t.progress.exit_code == 3
    assert t.progress.sentence() == ("failed: 1 of 4 succeeded, 1 failed, 2 lost with their "
                                     "worker, 0 cancelled")


def test_watch_and_top_draw_a_lost_column_and_lost_cells_in_the_bar(queue: Queue) -> None:
    from rich.console import Console

    _two_lost_one_failed(queue)
    [t] = read_tasks(queue.client, KEYS, ["t"])
    assert t is not None
    console = Console(width=200, record=True, no_color=True)
    console.print(task_table([t], width=8, columns=("task", "progress", "failed", "lost")))
    header, row = console.export_text().splitlines()[:2]
    assert header.split() == ["task", "progress", "failed", "lost"]
    assert row.split()[-2:] == ["1", "2"]
    assert row.split()[1] == "██xx!!!!"  # 1 succeeded, 1 failed, 2 lost of 4 in 8 cells


def test_a_lost_job_queued_again_by_retry_failed_is_lost_no_more_in_redis(queue: Queue) -> None:
    # Given the task with 1 failed and 2 lost jobs
    _two_lost_one_failed(queue)
    # When the operator queues its failed jobs again (the lost ones are among them)
    [(_event, moved)] = queue.retry_failed("t", "ops")
    assert len(moved) == 3
    # Then Redis counts none of them failed or lost any more, as SQL's job rows will not
    h = queue.task_state("t")
    assert (h["failed"], h.get("lost_failed")) == ("0", "0")
    [t] = read_tasks(queue.client, KEYS, ["t"])
    assert t is not None
    assert (t.failed, t.lost, t.pending, t.progress.state) == (0, 0, 3, "active")
