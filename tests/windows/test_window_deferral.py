"""Claim-time window deferral: the hook on real Redis (open, closed, too little left, freeze,
unapproved, missing), then end to end with a real worker process on one-off windows a few
seconds long: jobs wait for their window, run inside it, are deferred when it closes or the
expected duration would not fit, and never start outside it (claim times read from SQL)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import redis

from scheduler.queue.client import ClaimedJob, JobSpec, Queue, TaskSpec
from scheduler.record.migrate import upgrade
from scheduler.windows.wire import unpublish
from tests.submit_support import KEYS, data, drain, sql_rows
from tests.worker_support import WorkerProcess, wait_until, worker_args
from workers.deferral import RECHECK_MS, window_deferral

S = 1000


def define(client: redis.Redis, name: str, start_ms: int, end_ms: int, *, freeze: bool = False,
           approved: bool = True) -> None:
    """A one-off window (or freeze) the way ``windows add`` copies it into Redis."""
    client.hset(KEYS.window(name), mapping={
        "kind": "freeze" if freeze else "oneoff", "tz": "UTC", "rrule": "", "cron": "",
        "duration_s": "", "end_time": "", "starts_at": str(start_ms), "ends_at": str(end_ms),
        "approved": "1" if approved else "0"})


def job(window: str) -> ClaimedJob:
    return ClaimedJob(job_id="1.0", task_id="1", host="h", token=1, attempt=1, due_ms=0,
                      window=window, wclose_ms=None, after_loss=False)


T = 1_900_000_000_000  # a fixed instant: the hook is judged by the claim's clock, not ours


def test_a_job_inside_an_open_window_with_room_runs(redis_client: redis.Redis) -> None:
    define(redis_client, "a", T, T + 60 * S)
    assert window_deferral(redis_client, KEYS, job("a"), T + 10 * S, 30 * S) is None


def test_a_job_after_its_window_closed_waits_for_the_next_opening(redis_client: redis.Redis) -> None:
    define(redis_client, "a", T, T + 60 * S)
    define(redis_client, "b", T + 120 * S, T + 180 * S)
    d = window_deferral(redis_client, KEYS, job("a b"), T + 70 * S, 5 * S)
    assert d is not None and (d.due_ms, d.wclose_ms) == (T + 120 * S, T + 180 * S)
    assert d.reason.startswith("outside its window; deferred to the next opening")


def test_a_job_that_cannot_finish_before_the_window_closes_is_deferred_as_the_cutoff(
        redis_client: redis.Redis) -> None:
    define(redis_client, "a", T, T + 60 * S)
    define(redis_client, "b", T + 120 * S, T + 180 * S)
    d = window_deferral(redis_client, KEYS, job("a b"), T + 50 * S, 20 * S)
    assert d is not None and d.due_ms == T + 120 * S and "cutoff" in d.reason


def test_a_freeze_defers_a_job_to_its_end_even_inside_a_window(redis_client: redis.Redis) -> None:
    define(redis_client, "a", T, T + 600 * S)
    define(redis_client, "f", T + 100 * S, T + 200 * S, freeze=True, approved=False)
    d = window_deferral(redis_client, KEYS, job("a !f"), T + 150 * S, 10 * S)
    assert d is not None and (d.due_ms, d.wclose_ms) == (T + 200 * S, T + 600 * S)
    assert d.reason.startswith("inside a freeze period")


def test_an_unapproved_window_is_never_used(redis_client: redis.Redis) -> None:
    define(redis_client, "a", T, T + 600 * S, approved=False)
    d = window_deferral(redis_client, KEYS, job("a"), T + 10 * S, 0)
    assert d is not None and d.due_ms == T + 10 * S + RECHECK_MS and "no approved opening" in d.reason


def test_a_window_missing_from_redis_is_named_and_the_job_waits(redis_client: redis.Redis) -> None:
    d = window_deferral(redis_client, KEYS, job("gone"), T, 0)
    assert d is not None and d.due_ms == T + RECHECK_MS
    assert "window gone is not in Redis" in d.reason and "windows sync" in d.reason


# ---------------------------------------------------------------------------- end to end


def test_a_removed_freeze_no_longer_holds_a_job_back(redis_client: redis.Redis) -> None:
    # Given a job queued under window a and freeze f (not in force yet when it was queued)
    define(redis_client, "a", T, T + 60 * S)
    define(redis_client, "f", T + 5 * S, T + 50 * S, freeze=True)
    assert window_deferral(redis_client, KEYS, job("a !f"), T + 10 * S, 5 * S) is not None
    # When the freeze is removed (windows remove writes a tombstone in Redis)
    unpublish(redis_client, KEYS, ["f"], T + 8 * S)
    # Then the job runs in its open window instead of being deferred every 5 minutes forever
    assert window_deferral(redis_client, KEYS, job("a !f"), T + 10 * S, 5 * S) is None


def test_a_job_whose_every_window_was_removed_fails_with_a_reason(redis_client: redis.Redis) -> None:
    define(redis_client, "a", T, T + 60 * S)
    define(redis_client, "b", T + 120 * S, T + 180 * S)
    unpublish(redis_client, KEYS, ["a"], T)
    # One of two windows gone: the other is used
    d = window_deferral(redis_client, KEYS, job("a b"), T + 10 * S, 5 * S)
    assert d is not None and not d.fail and d.due_ms == T + 120 * S
    # Both gone: it can never run inside a window, and says so
    unpublish(redis_client, KEYS, ["b"], T)
    d = window_deferral(redis_client, KEYS, job("a b"), T + 10 * S, 5 * S)
    assert d is not None and d.fail and "window a b was removed" in d.reason


def queue_task(client: redis.Redis, task_id: str, hosts: list[str], window: str, due_ms: int,
               *, expected_ms: int, duration_ms: int, max_running: int) -> list[str]:
    """A task whose jobs carry a window, as ``submit --in-window`` queues it."""
    pipe = client.pipeline()
    for h in hosts:
        pipe.hset(KEYS.host(h), mapping={"address": "127.0.0.1", "port": 22, "user": "", "vars": "{}"})
    pipe.execute()
    spec = {"action": "command", "params": {"cmd": ["true"]}, "executor": "simulate",
            "executor_options": {"duration_ms": duration_ms}, "expected_ms": expected_ms}
    q = Queue(client, KEYS)
    q.create_task(TaskSpec(task_id, spec=spec, max_running=max_running, timeout_ms=60_000))
    jobs = [JobSpec(f"{task_id}.{i}", h, due_ms=due_ms, window=window) for i, h in enumerate(hosts)]
    q.enqueue(task_id, jobs)
    return [j.job_id for j in jobs]


def started_claims(url: str) -> tuple[dict[str, list[int]], list[dict[str, Any]]]:
    """Claims that led to a start (no defer with the same token), by job; and the defers."""
    rows = sql_rows(url, "SELECT id, ts, kind, job_id, data FROM events WHERE kind IN ('claim', 'defer')")
    claims: dict[tuple[str, int], int] = {}
    defers = []
    for r in rows:
        d = data(r)
        ms, _, _ = r.id.partition("-")
        if r.kind == "claim":
            claims[(r.job_id, int(d["token"]))] = int(ms)
        else:
            defers.append({"job": r.job_id, "token": int(d["token"]), "ms": int(ms), **d})
    for d in defers:
        claims.pop((d["job"], d["token"]), None)
    out: dict[str, list[int]] = defaultdict(list)
    for (job_id, _), at in claims.items():
        out[job_id].append(at)
    return out, defers


def test_jobs_wait_for_their_window_run_inside_it_and_are_deferred_when_it_closes_or_is_too_short(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> None:
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    now = int(redis_client.time()[0]) * S
    a, b = (now + 3 * S, now + 7 * S), (now + 10 * S, now + 14 * S)  # one-off windows, UTC
    define(redis_client, "a", *a)
    define(redis_client, "b", *b)
    # Given 8 one-second jobs (expected 1.5 s) one at a time, due when window a opens,
    # and one job due now whose only window is b
    serial = queue_task(redis_client, "1", [f"s{i}" for i in range(8)], "a b", a[0],
                        expected_ms=1500, duration_ms=1000, max_running=1)
    early = queue_task(redis_client, "2", ["e0"], "b", now, expected_ms=1500, duration_ms=200,
                       max_running=0)
    worker = WorkerProcess(redis_url, tmp_path, worker_args("w", slots=4, processes=1)).start()
    try:
        worker.wait_registered(redis_client)
        # When the worker runs until both windows have closed
        wait_until(lambda: int(redis_client.time()[0]) * S > b[1] + 500, 30, "window b to close",
                   worker.tail, watch=[worker])
    finally:
        worker.stop()
    drain(redis_client, db)
    started, defers = started_claims(db)
    # Then no job started outside a window, nor later than its close minus the expected time
    for job_id, starts in started.items():
        for at in starts:
            assert any(lo <= at <= hi - 1500 for lo, hi in (a, b)), (job_id, at - now)
    # And the early job waited for window b
    assert started[early[0]] and all(b[0] <= at for at in started[early[0]])
    # And the serial jobs used both windows; some were deferred at the cutoff, some because
    # the window had closed; none ran twice; the rest waits for an opening that never comes
    ran = [j for j in serial if started.get(j)]
    assert any(min(started[j]) < a[1] for j in ran) and any(min(started[j]) >= b[0] for j in ran)
    assert all(len(started[j]) == 1 for j in ran)
    reasons = " | ".join(d.get("error", "") for d in defers)
    assert "cutoff" in reasons and "outside its window" in reasons
    assert 4 <= len(ran) < len(serial), {j: [x - now for x in started.get(j, [])] for j in serial}
    left = [j for j in serial if j not in ran]
    for j in left:
        state = Queue(redis_client, KEYS).job_state(j)
        assert state["state"] in ("pending", "parked") and state["attempt"] == "0"


def test_a_job_with_no_expected_duration_may_start_until_the_last_instant(
        redis_client: redis.Redis) -> None:
    define(redis_client, "a", T, T + 60 * S)
    assert window_deferral(redis_client, KEYS, job("a"), T + 60 * S - 1, 0) is None
    d = window_deferral(redis_client, KEYS, job("a"), T + 60 * S, 0)
    assert d is not None and d.reason.startswith("no approved opening")


def test_a_worker_fails_a_job_whose_windows_were_all_removed_and_runs_one_whose_freeze_was(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> None:
    now = int(redis_client.time()[0]) * S
    define(redis_client, "open", now - 60 * S, now + 600 * S)
    define(redis_client, "later", now + 3_600 * S, now + 7_200 * S)
    define(redis_client, "frz", now + 300 * S, now + 900 * S, freeze=True)
    # Given a job under a window removed since, and one under a freeze removed since
    orphan = queue_task(redis_client, "3", ["o0"], "later", now, expected_ms=0, duration_ms=0,
                        max_running=0)
    frozen = queue_task(redis_client, "4", ["f0"], "open !frz", now, expected_ms=0,
                        duration_ms=0, max_running=0)
    unpublish(redis_client, KEYS, ["later", "frz"], now)
    # When a worker claims them
    worker = WorkerProcess(redis_url, tmp_path, worker_args("w", slots=2, processes=1)).start()
    q = Queue(redis_client, KEYS)
    try:
        wait_until(lambda: q.job_state(orphan[0]).get("state") == "failed"
                   and not q.job_state(frozen[0]), 20, "both jobs to end", worker.tail, [worker])
    finally:
        worker.stop()
    # Then the orphan failed for good, saying why; the other ran in its open window
    assert "window later was removed" in q.job_state(orphan[0])["error"]
    assert q.task_state("4")["succeeded"] == "1"
