"""A worker's loss is not a host's failure (docs/reliability.md, "Host failure or worker loss").

A child process killed -9 while it runs jobs counts against their ``max_attempts`` only: the
task's ``max_failures`` (which counts what hosts did) does not see it, so a loss never aborts a
task. Real worker nodes and child processes; the history checker judges the stream.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from tests.faults.history import check_stream
from tests.faults.test_worker_kills import starts
from tests.worker_support import (
    KEYS,
    dump,
    events,
    final_outcomes,
    plugin_site,
    started_workers,
    submit,
    wait_until,
)


@pytest.fixture
def start_worker(redis_url: str, tmp_path: Path):
    with started_workers(redis_url, tmp_path) as start:
        yield start


@pytest.mark.parametrize("idempotent", [True, False])
def test_a_killed_child_does_not_count_against_max_failures(
        redis_client, start_worker, tmp_path: Path, idempotent: bool) -> None:
    # Given a task of 6 jobs of 1 s that aborts at its first failed host (--max-failures 1),
    # two of them running on a node's only child
    marks = tmp_path / "marks"
    marks.mkdir()
    action = {"action": "mark-then-sleep", "params": {"dir": str(marks), "seconds": "1"}}
    jobs = submit(redis_client, "21", 6, **action, idempotent=idempotent, max_failures=1)
    site = plugin_site(tmp_path / "plugin")
    w = start_worker("node-b", slots=2, processes=1, lease="2s", env={"PYTHONPATH": str(site)})
    wait_until(lambda: starts(marks, jobs[:2]) == [1, 1], 15, "two jobs running", w.tail, [w])
    (child,) = wait_until(w.children, 5, "the child process", w.tail)
    # When the child is killed -9 (an OOM kill, a crash) in the middle of them
    os.kill(child, signal.SIGKILL)
    wait_until(lambda: "open" not in final_outcomes(redis_client, jobs).values(), 30,
               "every job to end", lambda: w.tail() + dump(redis_client), [w])
    # Then the task was not aborted: the loss was the worker's; every other job ran
    task = redis_client.hgetall(KEYS.task("21"))
    assert task["state"] == "active" and "abort" not in {e["kind"] for e in events(redis_client)}
    assert task.get("failed_hosts", "0") == "0"
    outcome = final_outcomes(redis_client, jobs)
    assert [outcome[j] for j in jobs[2:]] == ["acked"] * 4
    if idempotent:  # run again and acked
        assert [outcome[j] for j in jobs[:2]] == ["acked", "acked"]
        assert starts(marks, jobs[:2]) == [2, 2]
    else:  # never run again: ended as lost (the worker's blame), counted once in failed
        assert [outcome[j] for j in jobs[:2]] == ["failed", "failed"]
        assert starts(marks, jobs[:2]) == [1, 1]
        assert (task["failed"], task["lost_failed"]) == ("2", "2")
    fails = [e for e in events(redis_client, ("fail", "retry")) if e["job"] in jobs[:2]]
    assert len(fails) == 2 and all(e.get("blame") == "worker" for e in fails)
    check_stream(redis_client)

