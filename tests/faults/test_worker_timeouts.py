"""An action that ignores its own timeout: the master stops it by killing its child process.

The hanging action is a real plugin (``tests/plugin_actions.py``, installed for the worker by
``plugin_site``), so the child process finds it the way it finds any plugin.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.faults.history import check_stream
from tests.worker_support import (
    WorkerProcess,
    alive,
    claims_per_job,
    dump,
    events,
    final_outcomes,
    plugin_site,
    started_workers,
    submit,
    wait_until,
)


@pytest.fixture
def hang_worker(redis_url: str, tmp_path: Path):
    with started_workers(redis_url, tmp_path) as start:
        def start_hang(worker_id: str, **kwargs) -> WorkerProcess:
            env = {"PYTHONPATH": str(plugin_site(tmp_path / worker_id))}
            return start(worker_id, env=env, **kwargs)

        yield start_hang


def test_a_job_that_ignores_its_timeout_is_failed_and_its_child_killed_when_its_neighbours_end(
        redis_client, hang_worker) -> None:
    # Given one child running a job that hangs for 60 s (timeout 1 s) next to two 2 s jobs
    hung = submit(redis_client, "21", 1, action="hang", params={"seconds": "60"}, timeout_ms=1000,
                  idempotent=False)
    w = hang_worker("node-t", slots=4, processes=1, grace="10s", lease="2s")
    wait_until(lambda: claims_per_job(redis_client).get("21.0"), 15, "the hung job claimed",
               w.tail, [w])
    (child,) = wait_until(w.children, 5, "the child", w.tail)
    neighbours = submit(redis_client, "22", 2, options={"duration_ms": 2000})
    # When the timeout and the kill margin have passed
    wait_until(lambda: final_outcomes(redis_client, hung)["21.0"] == "failed", 8,
               "the hung job to fail", lambda: w.tail() + dump(redis_client), [w])
    (fail,) = [e for e in events(redis_client, ("fail",)) if e["job"] == "21.0"]
    assert fail["error"].startswith("timed out") and "the worker stopped it" in fail["error"]
    # Then the neighbours still finish normally, and the child with the stuck thread is killed
    wait_until(lambda: set(final_outcomes(redis_client, neighbours).values()) == {"acked"}, 10,
               "the neighbours acked", w.tail, [w])
    wait_until(lambda: not alive(child), 5, "the child with the hung job to be killed", w.tail)
    # And the node goes on in a new child
    later = submit(redis_client, "23", 3)
    wait_until(lambda: set(final_outcomes(redis_client, later).values()) == {"acked"}, 10,
               "later jobs acked", w.tail, [w])
    assert child not in w.children()
    check_stream(redis_client, require_end=False)


def test_neighbours_still_running_when_the_grace_ends_are_released_or_failed_never_left(
        redis_client, hang_worker) -> None:
    # Given a hung job and two long neighbours (one idempotent, one not) on one child, 1 s grace
    hung = submit(redis_client, "24", 1, action="hang", params={"seconds": "60"}, timeout_ms=1000,
                  idempotent=False)
    w = hang_worker("node-u", slots=4, processes=1, grace="1s", lease="2s")
    wait_until(lambda: claims_per_job(redis_client).get("24.0"), 15, "the hung job claimed",
               w.tail, [w])
    idem = submit(redis_client, "25", 1, options={"duration_ms": 30_000}, idempotent=True)
    once = submit(redis_client, "26", 1, options={"duration_ms": 30_000}, idempotent=False)
    wait_until(lambda: len(claims_per_job(redis_client)) == 3, 10, "neighbours claimed", w.tail)
    # When the hung job is failed and the grace for its neighbours runs out
    wait_until(lambda: events(redis_client, ("release",)), 10, "a release",
               lambda: w.tail() + dump(redis_client), [w])
    # Then the idempotent neighbour was given back (no attempt counted) and runs again,
    # the other failed for good with the reason
    assert final_outcomes(redis_client, hung)["24.0"] == "failed"
    (release,) = events(redis_client, ("release",))
    assert release["job"] == idem[0]
    wait_until(lambda: final_outcomes(redis_client, once)[once[0]] == "failed", 5,
               "the non-idempotent neighbour failed", w.tail)
    (fail,) = [e for e in events(redis_client, ("fail",)) if e["job"] == once[0]]
    assert fail["error"].startswith("interrupted:") and "passed its timeout" in fail["error"]
    wait_until(lambda: claims_per_job(redis_client)[idem[0]] == 2, 5, "the release re-claimed",
               w.tail)
    assert os.path.exists(f"/proc/{w.proc.pid}")
    check_stream(redis_client, require_end=False)
