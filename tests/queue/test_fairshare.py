"""Fair share under overload (scheduler/queue/fairshare.py, reorder.lua, overload.lua) on a real Redis.

The reorder is driven directly here (``reorder_now``, ``maybe_reorder``) and the claims are
``Queue.claim`` calls; tests/workers/test_fairshare_workers.py runs the same on real worker processes.
Every test runs on Redis 7 and on Redis 6.2 (the ``qclient`` fixture).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from scheduler.config import Settings
from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from scheduler.queue.fairshare import CHUNK, interleave, maybe_reorder, reorder_now
from tests.queue_support import KEYS, events, make_task, redis_now_ms

SETTINGS = Settings(overload_threshold_ms=1_000, overload_lock_ms=5_000)


def claim_ids(queue: Queue, n: int, batch: int = 1) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        jobs = queue.claim("w", min(batch, n - len(out))).jobs
        if not jobs:
            break
        out += [j.job_id for j in jobs]
    return out


def overdue_backlog(queue: Queue, sizes: dict[str, int], *, late_ms: int = 10_000, **policy) -> int:
    """Tasks with ``sizes`` jobs each, all due ``late_ms`` ago, in the order given; Redis now."""
    now = redis_now_ms(queue.client)
    for i, (task, n) in enumerate(sizes.items()):
        make_task(queue, task, n, due_ms=now - late_ms + i, **policy)
    return now


def test_without_overload_nothing_is_reordered_and_claims_follow_due_order(queue: Queue) -> None:
    # Given two tasks due half a second ago: late, but under the 1 s threshold
    now = redis_now_ms(queue.client)
    make_task(queue, "a", 20, due_ms=now - 500)
    make_task(queue, "b", 3, due_ms=now - 499)
    scores = dict(queue.client.zrange(KEYS.due("normal"), 0, -1, withscores=True))
    # When a worker claims and runs its overload check after the claim
    claim = queue.claim("w", 1)
    assert maybe_reorder(queue, claim, SETTINGS) is None
    # Then no reorder began, no score moved, and the claims follow due order
    assert reorder_now(queue, SETTINGS) is None
    rest = dict(queue.client.zrange(KEYS.due("normal"), 0, -1, withscores=True))
    assert all(rest[k] == v for k, v in scores.items() if k in rest and k != "a.0")
    expected = [f"a.{k}" for k in range(20)] + ["b.0", "b.1", "b.2"]
    assert [j.job_id for j in claim.jobs] + claim_ids(queue, 22, batch=4) == sorted(
        expected, key=lambda i: (scores[i], i))
    assert events(queue.client, "reorder") == []


def test_a_small_task_behind_a_big_one_is_interleaved_to_the_front(queue: Queue) -> None:
    # Given Alice's 300 overdue jobs, then Bob's 4
    overdue_backlog(queue, {"alice": 300, "bob": 4})
    # When a reorder runs
    summary = reorder_now(queue, SETTINGS)
    assert summary is not None and summary.complete
    # Then Bob's jobs alternate with Alice's at the front, each task in its own order
    order = claim_ids(queue, 12, batch=3)
    assert order == ["alice.0", "bob.0", "alice.1", "bob.1", "alice.10", "bob.2",
                     "alice.100", "bob.3", "alice.101", "alice.102", "alice.103", "alice.104"]
    assert (summary.jobs, summary.tasks, summary.overdue) == (304, 2, 304)


def test_every_new_score_is_earlier_than_now_and_than_the_old_head(queue: Queue) -> None:
    now = overdue_backlog(queue, {"a": 50, "b": 50})
    before = dict(queue.client.zrange(KEYS.due("normal"), 0, -1, withscores=True))
    reorder_now(queue, SETTINGS)
    after = dict(queue.client.zrange(KEYS.due("normal"), 0, -1, withscores=True))
    assert after.keys() == before.keys()
    assert max(after.values()) < min(before.values()) < now
    assert len(set(after.values())) == len(after)  # a strict order, no ties


def test_running_jobs_and_jobs_not_yet_due_are_untouched(queue: Queue) -> None:
    # Given overdue jobs of two tasks, two of them running, and a task due in a minute
    now = overdue_backlog(queue, {"a": 10, "b": 10})
    make_task(queue, "later", 5, due_ms=now + 60_000)
    running = queue.claim("w", 2).jobs
    before = dict(queue.client.zrange(KEYS.due("normal"), 0, -1, withscores=True))
    # When a reorder runs
    reorder_now(queue, SETTINGS, force=True)
    after = dict(queue.client.zrange(KEYS.due("normal"), 0, -1, withscores=True))
    # Then the leases and the future jobs kept their scores; only pending overdue jobs moved
    untouched = [j.job_id for j in running] + [f"later.{k}" for k in range(5)]
    assert all(after[i] == before[i] for i in untouched)
    assert all(after[i] < before[i] for i in before if i not in untouched)


def test_sharing_by_operator_gives_one_share_per_operator_not_per_task(queue: Queue) -> None:
    # Given ann's three tasks and bo's one, all overdue
    now = redis_now_ms(queue.client)
    for i, (task, who) in enumerate([("a1", "ann"), ("a2", "ann"), ("a3", "ann"), ("b1", "bo")]):
        queue.create_task(TaskSpec(task, operator=who))
        due = now - 10_000 + i
        queue.enqueue(task, [JobSpec(f"{task}.{k}", f"{task}-h{k}", due_ms=due)
                             for k in range(6)])
    # When reordered by operator
    reorder_now(queue, Settings(overload_threshold_ms=1_000, fair_share_by="operator"))
    # Then every other claim is bo's until his task is done
    order = claim_ids(queue, 12, batch=4)
    assert [i.startswith("b1.") for i in order[:12]] == [False, True] * 6
    assert [i for i in order if not i.startswith("b1.")] == [f"a1.{k}" for k in range(6)]


def test_a_reorder_is_one_event_and_a_stats_summary(queue: Queue) -> None:
    overdue_backlog(queue, {"a": 700, "b": 5})
    summary = reorder_now(queue, SETTINGS, worker="node-1")
    assert summary is not None
    [event] = events(queue.client, "reorder")
    detail = json.loads(event["detail"])
    assert event["worker"] == "node-1" and int(event["count"]) == 705
    assert detail["jobs"] == 705 and detail["tasks"] == 2 and detail["chunks"] == -(-705 // CHUNK)
    assert detail["complete"] is True and detail["longest_call_ms"] > 0
    stats = queue.client.hgetall(KEYS.stats)
    assert stats["reorder_jobs"] == "705" and stats["reorder_tasks"] == "2"
    assert stats["reorder_chunks"] == str(-(-705 // CHUNK)) and stats["reorder_count"] == "1"
    assert int(stats["reorder_at"]) >= int(event["ts"]) - 1
    assert "fairshare_open" not in stats
    assert not queue.client.exists(KEYS.overload_lock)


def test_no_second_reorder_until_something_new_becomes_due(queue: Queue) -> None:
    settings = Settings(overload_threshold_ms=1_000, overload_lock_ms=5_000)
    now = overdue_backlog(queue, {"a": 20, "b": 20})
    assert reorder_now(queue, settings) is not None
    queue.client.hset(KEYS.stats, "fairshare_next", 0)  # no minimum gap in this test
    # When nothing new arrived, there is nothing to do
    assert reorder_now(queue, settings) is None
    # A retry coming due after the reorder's cut is new
    job = queue.claim("w", 1).jobs[0]
    queue.fail("w", job.job_id, job.token, JobResult(exit_code=1), error="boom")
    queue.client.zadd(KEYS.due("normal"), {job.job_id: redis_now_ms(queue.client)}, xx=True)
    assert reorder_now(queue, settings) is not None
    queue.client.hset(KEYS.stats, "fairshare_next", 0)
    assert reorder_now(queue, settings) is None
    # So is a newly queued task, even one due in the past
    make_task(queue, "c", 3, due_ms=now - 20_000)
    assert reorder_now(queue, settings) is not None


def test_a_job_back_from_a_host_wait_is_placed_by_the_next_reorder(queue: Queue) -> None:
    # Given Alice's 100 overdue jobs, one of them running on host-x, and Bob's 2 jobs, one on
    # host-x (the demo's case: Bob's hosts were the ones Alice was running when he submitted)
    now = redis_now_ms(queue.client)
    queue.create_task(TaskSpec("alice"))
    queue.enqueue("alice", [JobSpec("alice.0", "host-x", due_ms=now - 10_000)]
                  + [JobSpec(f"alice.{k}", f"a-{k}", due_ms=now - 10_000) for k in range(1, 100)])
    running = queue.claim("w", 1).jobs[0]
    assert running.job_id == "alice.0"
    queue.create_task(TaskSpec("bob"))
    queue.enqueue("bob", [JobSpec("bob.0", "host-x", due_ms=now - 5_000),
                          JobSpec("bob.1", "host-y", due_ms=now - 5_000)])
    # When a reorder puts Bob first, bob.0 waits for the host (claimed, then parked),
    summary = reorder_now(queue, SETTINGS)
    assert summary is not None and summary.tasks == 2
    first = claim_ids(queue, 3)
    assert "bob.1" in first and "bob.0" not in first
    assert [e["job"] for e in events(queue.client, "park")] == ["bob.0"]
    # and comes back at its old due time when Alice's job on host-x ends
    queue.ack("w", [(running.job_id, running.token, JobResult(exit_code=0))])
    assert [e["job"] for e in events(queue.client, "unpark")] == ["bob.0"]
    queue.client.hset(KEYS.stats, "fairshare_next", 0)  # no minimum gap in this test
    # Then its return counts as new: the next reorder interleaves it at the front again (one
    # of the first two claims), where before it waited behind the 97 jobs of Alice the first
    # reorder had moved below the head
    again = reorder_now(queue, SETTINGS)
    assert again is not None and again.tasks == 2
    assert "bob.0" in claim_ids(queue, 2)
    queue.client.hset(KEYS.stats, "fairshare_next", 0)
    assert reorder_now(queue, SETTINGS) is None  # and nothing new since


def test_a_job_unparked_under_a_concurrency_limit_counts_as_new(queue: Queue) -> None:
    now = overdue_backlog(queue, {"a": 50})
    make_task(queue, "b", 3, due_ms=now - 5_000, max_running=1)
    assert reorder_now(queue, SETTINGS) is not None
    queue.client.hset(KEYS.stats, "fairshare_next", 0)
    claimed = [j for j in (queue.claim("w", 1).jobs[0] for _ in range(6))]
    b_job = next(j for j in claimed if j.job_id.startswith("b."))
    assert events(queue.client, "park")  # b's other jobs wait for its one slot
    assert reorder_now(queue, SETTINGS) is None  # nothing new yet
    queue.ack("w", [(b_job.job_id, b_job.token, JobResult(exit_code=0))])
    assert events(queue.client, "unpark")
    assert reorder_now(queue, SETTINGS) is not None


@pytest.mark.parametrize("back", ["resume", "release", "reprioritize"])
def test_jobs_back_at_their_old_scores_are_placed_by_the_next_reorder(queue: Queue,
                                                                     back: str) -> None:
    # Given Alice's 100 jobs overdue by 10 s and Bob's 2 by 5 s (in bulk, for the
    # reprioritize case), and a reorder that placed what it saw
    now = redis_now_ms(queue.client)
    make_task(queue, "alice", 100, due_ms=now - 10_000)
    make_task(queue, "bob", 2, due_ms=now - 5_000,
              **({"priority": "bulk"} if back == "reprioritize" else {}))
    if back == "resume":
        queue.pause("bob", "ops")
    assert reorder_now(queue, SETTINGS) is not None
    queue.client.hset(KEYS.stats, "fairshare_next", 0)  # no minimum gap in this test
    # When Bob's jobs come back to the normal due set at their old scores
    if back == "resume":
        claim_ids(queue, 3)  # Bob's jobs met while paused go to his held set
        queue.resume("bob", "ops")
    elif back == "release":
        jobs = [j for j in queue.claim("w", 4).jobs if j.job_id.startswith("bob.")]
        assert jobs, "the reorder put Bob's jobs at the front"
        queue.release("w", [(j.job_id, j.token) for j in jobs])
    else:
        queue.reprioritize("bob", "normal", "ops")
    # Then that is something new: the next reorder interleaves them at the front again
    again = reorder_now(queue, SETTINGS)
    assert again is not None and again.tasks == 2
    assert {"bob.0", "bob.1"} <= set(claim_ids(queue, 4))


def test_the_next_reorder_waits_for_the_gap_after_the_last(queue: Queue) -> None:
    overdue_backlog(queue, {"a": 20, "b": 20})
    assert reorder_now(queue, SETTINGS) is not None  # the gap is at least the threshold (1 s)
    make_task(queue, "c", 3, due_ms=redis_now_ms(queue.client) - 5_000)
    assert reorder_now(queue, SETTINGS) is None
    queue.client.hset(KEYS.stats, "fairshare_next", 0)
    assert reorder_now(queue, SETTINGS) is not None


def test_a_held_lock_stops_other_workers_and_only_its_owner_releases_it(queue: Queue) -> None:
    overdue_backlog(queue, {"a": 20, "b": 20})
    queue.client.set(KEYS.overload_lock, "someone-else", px=60_000)
    assert reorder_now(queue, SETTINGS) is None
    assert reorder_now(queue, SETTINGS, force=True) is None
    assert queue.client.get(KEYS.overload_lock) == "someone-else"


def test_a_chunk_whose_lock_expired_writes_nothing(queue: Queue) -> None:
    overdue_backlog(queue, {"a": 3})
    before = queue.client.zscore(KEYS.due("normal"), "a.1")
    moves = [("a.1", before, before - 100)]
    assert queue.reorder_chunk("normal", "not-the-owner", 1_000, moves) is None
    assert queue.client.zscore(KEYS.due("normal"), "a.1") == before


def test_a_reorder_that_lost_its_lock_midway_stops_and_says_so(queue: Queue) -> None:
    overdue_backlog(queue, {"a": 700, "b": 700})

    def steal(chunk: int) -> None:
        queue.client.set(KEYS.overload_lock, "thief")

    summary = reorder_now(queue, SETTINGS, on_chunk=steal)
    assert summary is not None and not summary.complete and summary.chunks == 2
    assert summary.jobs == CHUNK
    assert queue.client.get(KEYS.overload_lock) == "thief"  # not released by the loser


def test_maybe_reorder_runs_the_reorder_in_a_thread_of_its_own(queue: Queue) -> None:
    overdue_backlog(queue, {"a": 100, "b": 2})
    claim = queue.claim("w", 1)
    thread = maybe_reorder(queue, claim, SETTINGS, worker="node-7")
    assert thread is not None
    thread.join(10)
    assert [e["worker"] for e in events(queue.client, "reorder")] == ["node-7"]
    assert claim_ids(queue, 4, batch=4) == ["a.1", "b.0", "a.10", "b.1"]  # ids sort as text
    # and right after, the same check does not start another
    assert maybe_reorder(queue, queue.claim("w", 1), SETTINGS) is None


def test_fair_share_off_never_reorders(queue: Queue) -> None:
    overdue_backlog(queue, {"a": 100, "b": 2})
    claim = queue.claim("w", 1)
    off = Settings(overload_threshold_ms=1_000, fair_share_by="off")
    assert maybe_reorder(queue, claim, off) is None
    assert claim_ids(queue, 3, batch=3) == ["a.1", "a.10", "a.11"]


def test_ten_backlogged_tasks_get_equal_shares_while_all_have_work(queue: Queue) -> None:
    # Given ten tasks of 60 to 240 jobs, oldest first the biggest
    sizes = {f"t{i}": 240 - 20 * i for i in range(10)}
    overdue_backlog(queue, sizes)
    reorder_now(queue, SETTINGS)
    # When claimed in batches of 8 until the smallest task runs out
    order: list[str] = []
    while True:
        jobs = [j.job_id for j in queue.claim("w", 8).jobs]
        order += jobs
        done = Counter(i.rpartition(".")[0] for i in order)
        if not jobs or done["t9"] == sizes["t9"]:
            break
    # Then every task got within 10% of an equal share of those claims
    window = Counter(i.rpartition(".")[0] for i in order)
    fair = len(order) / 10
    assert len(window) == 10
    assert all(abs(n - fair) <= 0.1 * fair for n in window.values()), window


def test_interleave_keeps_each_keys_order_and_takes_keys_by_their_first_entry() -> None:
    entries = [("a.0", 1), ("a.1", 2), ("b.0", 3), ("a.2", 4), ("c.0", 5), ("b.1", 6)]
    out = interleave(entries, lambda i: i[0])
    assert [i for i, _ in out] == ["a.0", "b.0", "c.0", "a.1", "b.1", "a.2"]


@pytest.mark.parametrize("bad", [{"fair_share_by": "host"}, {"overload_lock_ms": 5}])
def test_bad_fair_share_settings_are_refused_in_one_line(bad: dict) -> None:
    from scheduler.config import load_settings
    from scheduler.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        load_settings(bad, environ={})
    assert "\n" not in str(err.value) and next(iter(bad)) in str(err.value)
