"""Property test: a fair-share reorder with claims, acks, retries and submissions in between its
chunks loses no job, duplicates none, claims none early and moves none later (real Redis).

The reorder's page and chunk sizes are shrunk so that small random queues need many pages and
many chunks; the operations run between chunks through ``on_chunk``.
"""

from __future__ import annotations

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduler.config import Settings
from scheduler.queue import fairshare
from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from scheduler.queue.keys import PRIORITY_CLASSES
from tests.queue_support import KEYS, redis_now_ms

def _not_due_soon(offset: int) -> int:
    """A job not due yet is due a minute on at least: one that came due while an example ran
    (seconds on a loaded machine) changed the claims, hence the chunks and the draws between
    them, and Hypothesis stopped the replay as "inconsistent data generation"."""
    return offset if offset <= 0 else offset + 60_000


TASKS = st.lists(
    st.tuples(st.sampled_from(PRIORITY_CLASSES), st.sampled_from(["ann", "bo"]),
              st.lists(st.integers(-30_000, 5_000).map(_not_due_soon), min_size=1, max_size=25)),
    min_size=1, max_size=5)
OPS = st.lists(st.one_of(st.tuples(st.just("claim"), st.integers(1, 6)),
                         st.tuples(st.just("ack"), st.integers(0, 5)),
                         st.tuples(st.just("fail"), st.integers(0, 5)),
                         st.tuples(st.just("release"), st.integers(0, 5)),
                         st.tuples(st.just("submit"), st.integers(1, 4)),
                         st.tuples(st.just("reprioritize"), st.sampled_from(PRIORITY_CLASSES))),
               max_size=4)


class Model:
    """What the test did, to check Redis against: running jobs, finished jobs, all jobs."""

    def __init__(self, q: Queue) -> None:
        self.q = q
        self.jobs: set[str] = set()
        self.running: dict[str, int] = {}  # job id -> token
        self.acked: set[str] = set()
        self.tasks: list[str] = []

    def submit(self, task: str, prio: str, operator: str, offsets: list[int]) -> None:
        now = redis_now_ms(self.q.client)
        self.q.create_task(TaskSpec(task, priority=prio, operator=operator, backoff_ms=1))
        # hosts of their own: this is about shares, not about tasks taking turns on a host
        jobs = [JobSpec(f"{task}.{k}", f"{task}-h{k}", due_ms=max(1, now + off))
                for k, off in enumerate(offsets)]
        self.q.enqueue(task, jobs)
        self.jobs |= {j.job_id for j in jobs}
        self.tasks.append(task)

    def claim(self, batch: int) -> None:
        claim = self.q.claim("w", batch)
        for job in claim.jobs:
            assert job.job_id not in self.running, f"{job.job_id} claimed twice"
            assert job.job_id not in self.acked, f"{job.job_id} claimed after its ack"
            assert job.due_ms <= claim.now_ms, f"{job.job_id} claimed before it was due"
            self.running[job.job_id] = job.token

    def _some(self, n: int) -> list[tuple[str, int]]:
        return sorted(self.running.items())[:n]

    def ack(self, n: int) -> None:
        for job_id, token in self._some(n):
            assert self.q.ack("w", [(job_id, token, JobResult(exit_code=0))])[0] == 0
            del self.running[job_id]
            self.acked.add(job_id)

    def fail(self, n: int) -> None:
        for job_id, token in self._some(n):
            self.q.fail("w", job_id, token, JobResult(exit_code=1), error="boom")
            del self.running[job_id]
            if self.q.job_state(job_id).get("state") == "failed":
                self.acked.add(job_id)  # failed for good: finished too

    def release(self, n: int) -> None:
        for job_id, token in self._some(n):
            assert self.q.release("w", [(job_id, token)])[0] == 0
            del self.running[job_id]


def entries(client: redis.Redis) -> dict[str, list[tuple[str, float]]]:
    found: dict[str, list[tuple[str, float]]] = {}
    for prio in PRIORITY_CLASSES:
        for member, score in client.zrange(KEYS.due(prio), 0, -1, withscores=True):
            found.setdefault(member, []).append((prio, score))
    return found


def check(model: Model) -> None:
    client = model.q.client
    found = entries(client)
    dead = set(client.zrange(KEYS.dead, 0, -1))
    for job_id in model.jobs:
        state = model.q.job_state(job_id).get("state")
        if job_id in model.acked:
            assert job_id not in found
            continue
        assert len(found.get(job_id, [])) == 1, f"{job_id} is in {found.get(job_id)} ({state})"
        (_prio, score), = found[job_id]
        if state == "pending":
            due = int(model.q.job_state(job_id)["due"])
            assert score <= due, f"{job_id} was moved later: {score} > due {due}"
        else:
            assert state == "running" and job_id in model.running
        assert job_id not in dead
    assert set(found) <= model.jobs


@pytest.mark.parametrize("by", ["task", "operator"])
@settings(max_examples=25, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tasks=TASKS, before=st.integers(0, 6), data=st.data())
def test_a_reorder_amid_claims_loses_duplicates_and_advances_no_job(
        redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch, by: str,
        tasks: list, before: int, data: st.DataObject) -> None:
    monkeypatch.setattr(fairshare, "CHUNK", 3)
    monkeypatch.setattr(fairshare, "PAGE", 6)
    monkeypatch.setattr(fairshare, "OVERLAP", 2)
    redis_client.flushall()
    model = Model(Queue(redis_client))
    # Given random tasks in random classes, some jobs overdue, some not due yet, some running
    for i, (prio, operator, offsets) in enumerate(tasks):
        model.submit(f"t{i}", prio, operator, offsets)
    if before:
        model.claim(before)
    fresh = iter(range(100, 1_000))

    def between(_chunk: int) -> None:
        # When claims, acks, retries, releases, submissions and reprioritizes run between chunks
        for op, arg in data.draw(OPS, label="ops"):
            if op == "claim":
                model.claim(arg)
            elif op == "ack":
                model.ack(arg)
            elif op == "fail":
                model.fail(arg)
            elif op == "release":
                model.release(arg)
            elif op == "submit":
                model.submit(f"t{next(fresh)}", "normal", "bo", [-40_000] * arg)
            else:
                model.q.reprioritize(data.draw(st.sampled_from(model.tasks)), arg, "ops")
            check(model)

    fairshare.reorder_now(model.q, Settings(overload_threshold_ms=1_000, fair_share_by=by),
                          force=True, on_chunk=between)
    # Then every job is in exactly one place, none moved later, none claimed early or twice
    check(model)
    # and draining the due jobs claims each remaining one exactly once
    for _ in range(1_000):
        model.claim(7)
        if not model.running:
            break
        model.ack(len(model.running))
        check(model)
    assert not model.running
    now = redis_now_ms(redis_client)
    for job_id, places in entries(redis_client).items():
        state = model.q.job_state(job_id)
        assert state["state"] == "pending" and places[0][1] == int(state["due"]) > now - 1_000
