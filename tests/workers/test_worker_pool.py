"""The hand-off of jobs to a child that dies at that moment: nothing raises, nothing is lost,
and only a job the child received counts as lost with it.

Found by the child-kill fault test under load: the child's reader thread closed the connection
while the claim loop was writing to it, and the write raised TypeError, which killed the node.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import redis

from scheduler.config import Settings
from scheduler.queue.client import Queue
from tests.worker_support import KEYS, events, submit, wait_until
from workers.config import NodeConfig
from workers.finisher import Finisher
from workers.pool import ChildHandle, Pool
from workers.protocol import RUN
from workers.slots import Running, Slots
from workers.stats import NodeStats


def test_a_child_that_dies_during_a_send_is_closed_after_it_and_later_sends_say_false() -> None:
    # Given a pool with one ready child
    pool = Pool(NodeConfig(Settings(), slots=2, processes=1, worker_id="race"), threading.RLock())
    pool.attach(lambda child, outcomes: None, lambda child: None)
    pool.ensure_warm()
    [child] = pool.children
    try:
        assert pool.wait_ready(30)
        # When it dies while the master is in the middle of a send (holding the send lock)
        with child.send_lock:
            child.kill("test")
            wait_until(lambda: child.proc.returncode is not None, 15, "the reader to reap it")
            time.sleep(0.2)  # the reader goes on to close the connection
            # Then the reader waits for the send before it closes the connection
            assert not child.conn.closed
        wait_until(lambda: child.exited, 15, "the reader to finish")
        assert child.conn.closed
        # And a send after that returns False (the master releases the jobs), never raises
        assert pool.dispatch(child, []) is False
        assert child.send((RUN, [])) is False
    finally:
        pool.kill_all("test over")


def test_a_dead_childs_jobs_that_were_never_written_to_it_are_released_not_failed(
        redis_client: redis.Redis) -> None:
    # Given a node's finisher and one child, and two claimed jobs of a non-idempotent task
    # placed on that child: the first written to it, the second not yet (the master was
    # between placing and sending when the child died)
    submit(redis_client, "31", 2, idempotent=False)
    q = Queue(redis_client, KEYS)
    claimed = q.claim("node-x", 10).jobs
    config = NodeConfig(Settings(), slots=4, processes=1, worker_id="node-x", recorder=False)
    slots = Slots(config.slots)
    pool = Pool(config, slots.lock)
    finisher = Finisher(q, config, slots, pool, NodeStats())
    finisher.start()
    pool.attach(finisher.done, finisher.exited)
    pool.ensure_warm()
    [child] = pool.children
    try:
        assert pool.wait_ready(30)
        runs = [Running(j.job_id, j.token, j.task_id, j.due_ms, False, 60.0, child=child)
                for j in sorted(claimed, key=lambda j: j.job_id)]
        slots.add(runs)
        assert pool.dispatch(child, [], lambda: setattr(runs[0], "delivered", True))
        # When the child dies unexpectedly
        os.kill(child.pid, signal.SIGKILL)
        # Then the job it received fails for good as lost with it; the other is given back,
        # with no attempt counted, since it never started
        wait_until(lambda: {e["job"] for e in events(redis_client, ("fail", "release"))}
                   == {"31.0", "31.1"} and not len(slots), 15, "both jobs to end here")
        assert pool.dispatch(child, [], lambda: setattr(runs[1], "delivered", True)) is False
    finally:
        finisher.stop()
        pool.kill_all("test over")
    fails = {e["job"]: e["error"] for e in events(redis_client, ("fail",))}
    assert fails["31.0"].startswith("lost: its worker process") and "not idempotent" in fails["31.0"]
    assert [e["job"] for e in events(redis_client, ("release",))] == ["31.1"]
    assert "31.1" not in fails and not runs[1].delivered
    assert q.job_state("31.1")["state"] == "pending"


def test_a_job_claimed_again_and_placed_on_another_child_is_not_among_the_old_childs_runs() -> None:
    # Given job 1.0 placed on child A, then (its lease lost) claimed again and placed on B
    slots = Slots(4)
    a, b = (ChildHandle(seq=n, proc=None, conn=None, capacity=2)  # type: ignore[arg-type]
            for n in (1, 2))
    slots.add([Running("1.0", 1, "1", 0, False, 60.0, child=a)])
    slots.add([Running("1.0", 2, "1", 0, False, 60.0, child=b)])
    # Then A's exit finds none of its runs (ending 1.0 would end the run on B), B finds it
    assert slots.of_child(a) == []
    assert [(r.job_id, r.token) for r in slots.of_child(b)] == [("1.0", 2)]


def test_the_late_result_of_a_run_claimed_again_since_is_recorded_stale_and_frees_its_child(
        redis_client: redis.Redis) -> None:
    # Given a node whose master was stopped past its lease: it claimed its own job again
    # (token 2, placed on child B) while the first run (token 1, on child A) still ran
    from workers.protocol import Outcome

    submit(redis_client, "32", 1, idempotent=True)
    q = Queue(redis_client, KEYS)
    first = q.claim("node-x", 1, lease_ms=1).jobs[0]
    time.sleep(0.01)
    second = q.claim("node-x", 1).jobs[0]
    assert (first.job_id, second.token) == (second.job_id, first.token + 1)
    config = NodeConfig(Settings(), slots=4, processes=1, worker_id="node-x", recorder=False)
    slots = Slots(config.slots)
    a, b = (ChildHandle(seq=n, proc=None, conn=None, capacity=2)  # type: ignore[arg-type]
            for n in (1, 2))
    slots.add([Running("32.0", first.token, "32", 0, True, 60.0, child=a)])
    slots.add([Running("32.0", second.token, "32", 0, True, 60.0, child=b)])
    finisher = Finisher(q, config, slots, None, NodeStats())
    finisher.start()
    # When the first run's outcome arrives
    finisher.done(a, [Outcome("32.0", first.token, True, 0, 5, "first run", None, False, 0.0)])
    finisher.stop()
    # Then it is sent under its old token, refused, and recorded as stale with its result; the
    # place it held on A is free; the second run is untouched
    [stale] = events(redis_client, ("stale",))
    assert (stale["job"], stale["verb"], stale["reason"], stale["token"], stale["exit_code"],
            stale["output"]) == ("32.0", "ack", "stale_token", str(first.token), "0", "first run")
    assert "32.0" not in a.jobs and "32.0" in b.jobs
    assert slots.holds("32.0", second.token)
    assert q.job_state("32.0")["state"] == "running"
