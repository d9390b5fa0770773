"""Ambiguous replies: every worker verb is safe to send again after its reply was lost.

A verb that ran but whose reply never came (a reset, a timeout) is sent again, by redis-py's
own retry or by the node: the same token's ack, fail, release or defer answers the first
outcome and records nothing new; a claim sent again with its request id gets the jobs the
first call claimed. The direct tests call each verb twice; the proxied ones lose real replies
on a real connection (tests/tcp_proxy.py ``drop_reply_to``) and let redis-py retry.
See docs/reliability.md, "Ambiguous replies".
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator

import pytest
import redis

from scheduler.errors import Code, StaleTokenError
from scheduler.queue.client import MEMO_CAP_MS, REPLY_WAIT_MS, JobResult, Queue
from scheduler.queue.scripts import VERBS, script_source
from tests.queue_support import KEYS, events, make_task, snapshot
from tests.tcp_proxy import TcpProxy


def sha(verb: str) -> bytes:
    """The SHA1 redis-py sends in an EVALSHA of this verb: a marker for the proxy."""
    return hashlib.sha1(script_source(verb).encode()).hexdigest().encode()


def kinds(client: redis.Redis) -> list[str]:
    return [e["kind"] for e in events(client)]


# ------------------------------------------------------------------ the same call twice


def test_the_same_tokens_ack_again_answers_ok_and_records_nothing(queue: Queue) -> None:
    # Given a job acked once
    make_task(queue, "t", 1)
    job = queue.claim("w", 1).jobs[0]
    assert queue.ack("w", [(job.job_id, job.token, JobResult(0))]) == [Code.OK]
    before, stream = snapshot(queue.client), kinds(queue.client)
    # When the same ack comes again (its reply was lost)
    # Then it answers OK, records no stale run and changes nothing
    assert queue.ack("w", [(job.job_id, job.token, JobResult(0))]) == [Code.OK]
    assert kinds(queue.client) == stream
    assert snapshot(queue.client) == before
    assert queue.task_state("t")["succeeded"] == "1"
    # But an ack under another token is still refused and recorded
    assert queue.ack("w", [(job.job_id, job.token + 1, JobResult(0))]) == [Code.UNKNOWN_JOB]
    assert kinds(queue.client) == stream + ["stale"]


@pytest.mark.parametrize("case", ["retry", "failed", "aborted"])
def test_the_same_tokens_fail_again_answers_its_first_outcome(queue: Queue, case: str) -> None:
    # Given a job whose fail was retried, failed for good, or aborted its task
    make_task(queue, "t", 3, max_attempts=2 if case == "retry" else 1, max_running=1,
              max_failures=1 if case == "aborted" else 0, idempotent=True)
    job = queue.claim("w", 1).jobs[0]
    first = queue.fail_job("w", job.job_id, job.token, JobResult(1), error="boom")
    assert (first.outcome, first.aborted) == {"retry": ("retry", False),
                                              "failed": ("failed", False),
                                              "aborted": ("failed", True)}[case]
    before, stream = snapshot(queue.client), kinds(queue.client)
    # When the same fail comes again
    again = queue.fail_job("w", job.job_id, job.token, JobResult(1), error="boom")
    # Then it answers the first outcome (an abort too, so the sweep still happens) and
    # records and changes nothing
    assert again == first
    assert kinds(queue.client) == stream
    assert snapshot(queue.client) == before


def test_the_same_tokens_release_and_defer_again_answer_ok_and_record_nothing(
        queue: Queue) -> None:
    make_task(queue, "t", 2)
    a, b = queue.claim("w", 2).jobs
    assert queue.release("w", [(a.job_id, a.token)]) == [Code.OK]
    assert queue.defer("w", b.job_id, b.token, 0, wclose_ms=None, reason="closed") == Code.OK
    before, stream = snapshot(queue.client), kinds(queue.client)
    assert queue.release("w", [(a.job_id, a.token)]) == [Code.OK]
    assert queue.defer("w", b.job_id, b.token, 0, wclose_ms=None, reason="closed") == Code.OK
    assert kinds(queue.client) == stream
    assert snapshot(queue.client) == before
    # A different verb under the same token is no repeat: refused as before
    assert queue.release("w", [(b.job_id, b.token)]) == [Code.NOT_RUNNING]


def test_a_repeat_after_its_memo_expired_is_refused_as_before(qclient: redis.Redis) -> None:
    # The memo lasts a lease plus the time a node waits for a reply (Queue.memo_ms), at most
    # MEMO_CAP_MS: one key per ended run, then gone
    queue = Queue(qclient, lease_ms=2_000)
    make_task(queue, "t", 1)
    job = queue.claim("w", 1).jobs[0]
    assert queue.ack("w", [(job.job_id, job.token, JobResult(0))]) == [Code.OK]
    memo = KEYS.memo(job.job_id, job.token)
    assert queue.lease_ms + REPLY_WAIT_MS - 1_000 < qclient.pttl(memo) <= queue.memo_ms
    assert queue.memo_ms == min(queue.lease_ms + REPLY_WAIT_MS, MEMO_CAP_MS)
    qclient.delete(memo)  # as its expiry does
    assert queue.ack("w", [(job.job_id, job.token, JobResult(0))]) == [Code.UNKNOWN_JOB]
    assert kinds(qclient)[-1] == "stale"


def test_a_claim_sent_again_with_its_request_id_gets_the_same_jobs(qclient: redis.Redis) -> None:
    # Given a claim whose reply never came: the queue keeps its request id
    queue = Queue(qclient)
    make_task(queue, "t", 4)
    queue._claim_request = "r1"  # as a claim that raised ConnectionError leaves it
    first = queue.claim("w", 2)
    assert [j.job_id for j in first.jobs] == ["t.0", "t.1"]
    stream = kinds(qclient)
    # When the same request id is sent again
    queue._claim_request = "r1"
    again = queue.claim("w", 2)
    # Then it gets the same jobs under the same tokens, their leases renewed from now, and
    # nothing more is claimed
    assert again.jobs == first.jobs and again.now_ms >= first.now_ms
    for job in again.jobs:
        assert qclient.zscore(KEYS.leases, job.job_id) == again.now_ms + queue.lease_ms
    assert kinds(qclient) == stream
    assert queue.task_state("t")["running"] == "2"
    # And a new request claims the next jobs
    assert [j.job_id for j in queue.claim("w", 2).jobs] == ["t.2", "t.3"]


def test_a_claim_replayed_late_leaves_out_a_job_that_ended_or_was_claimed_again(
        qclient: redis.Redis) -> None:
    queue = Queue(qclient)
    make_task(queue, "t", 3)
    queue._claim_request = "r2"
    a, b = queue.claim("w", 2, lease_ms=1).jobs
    # Meanwhile a's lease ran out and another node took it; b was acked (by this node's
    # finisher, say, for a reply that did come through another path)
    time.sleep(0.01)
    assert [j.job_id for j in Queue(qclient).claim("w2", 1).jobs] == [a.job_id]
    assert queue.ack("w", [(b.job_id, b.token, JobResult(0))]) == [Code.OK]
    queue._claim_request = "r2"
    # Then the replay hands out neither: a runs under w2's token, b is over; nothing is claimed
    stream = kinds(qclient)
    assert queue.claim("w", 2).jobs == []
    assert kinds(qclient) == stream


# -------------------------------------------------------------- replies lost on the wire


@pytest.fixture
def proxied(redis_url: str) -> Iterator[tuple[TcpProxy, Queue, redis.Redis]]:
    """A queue whose connection runs through a proxy that can lose replies, and a direct
    client to look with."""
    direct = redis.Redis.from_url(redis_url, decode_responses=True)
    for verb in VERBS:  # loaded: the reply lost is the verb's own, not a NOSCRIPT refusal
        direct.script_load(script_source(verb))
    target = direct.connection_pool.connection_kwargs
    with TcpProxy(target["host"], target["port"]) as proxy:
        client = redis.Redis(host=proxy.host, port=proxy.port, decode_responses=True)
        yield proxy, Queue(client), direct
        client.close()
    direct.close()


def test_a_lost_claim_reply_hands_the_node_the_jobs_the_first_call_claimed(
        proxied: tuple[TcpProxy, Queue, redis.Redis]) -> None:
    proxy, queue, direct = proxied
    make_task(queue, "t", 3)
    # When the claim runs but its reply is lost (redis-py sends it again on a new connection)
    proxy.drop_reply_to(sha("claim"))
    claim = queue.claim("w", 2)
    assert proxy.dropped == 1
    # Then the node gets the jobs the first call claimed, each claimed once
    assert [j.job_id for j in claim.jobs] == ["t.0", "t.1"]
    assert [e["job"] for e in events(direct, "claim")] == ["t.0", "t.1"]
    assert direct.hget(KEYS.task("t"), "running") == "2"
    # And acking them works as for any claim
    done = [(j.job_id, j.token, JobResult(0)) for j in claim.jobs]
    assert queue.ack("w", done) == [Code.OK, Code.OK]


def test_a_lost_ack_reply_records_no_stale_run(
        proxied: tuple[TcpProxy, Queue, redis.Redis]) -> None:
    proxy, queue, direct = proxied
    make_task(queue, "t", 1)
    job = queue.claim("w", 1).jobs[0]
    proxy.drop_reply_to(sha("ack"))
    assert queue.ack("w", [(job.job_id, job.token, JobResult(0))]) == [Code.OK]
    assert proxy.dropped == 1
    assert kinds(direct).count("ack") == 1 and "stale" not in kinds(direct)
    assert direct.hget(KEYS.task("t"), "succeeded") == "1"


def test_a_lost_reply_of_the_fail_that_aborts_still_tells_the_node_to_sweep(
        proxied: tuple[TcpProxy, Queue, redis.Redis]) -> None:
    proxy, queue, direct = proxied
    # Given a task that aborts at its first failure, one job running and two parked
    make_task(queue, "t", 3, max_running=1, max_failures=1, max_attempts=1)
    job = queue.claim("w", 3).jobs[0]
    proxy.drop_reply_to(sha("fail"))
    outcome = queue.fail_job("w", job.job_id, job.token, JobResult(1), error="boom")
    # Then the repeat answers the abort, and nothing is recorded twice
    assert proxy.dropped == 1
    assert (outcome.outcome, outcome.aborted) == ("failed", True)
    assert kinds(direct).count("fail") == 1 and kinds(direct).count("abort") == 1
    assert "stale" not in kinds(direct)
    # And the sweep the abort asks for is also known from state until it is done
    assert queue.aborting() == ["t"]
    assert queue.sweep_aborted("t") == 2
    assert queue.aborting() == []
    assert direct.llen(KEYS.parked("t")) == 0


def test_an_abort_whose_sweep_never_came_is_found_in_the_aborting_set(queue: Queue) -> None:
    # Given an abort whose node never swept (its reply was lost twice, or the node died)
    make_task(queue, "t", 3, max_running=1, max_failures=1, max_attempts=1)
    job = queue.claim("w", 3).jobs[0]
    assert queue.fail_job("w", job.job_id, job.token, JobResult(1), error="boom").aborted
    # Then any node finds it (workers.heartbeat sweeps what the set holds) and the parked
    # jobs end cancelled: the task's counters add up
    assert queue.aborting() == ["t"]
    assert queue.sweep_aborted("t") == 2
    t = queue.task_state("t")
    assert (t["state"], t["failed"], t["cancelled"], t["running"]) == ("aborted", "1", "2", "0")
    assert queue.aborting() == []


def test_retry_failed_takes_a_revived_task_out_of_the_aborting_set(queue: Queue) -> None:
    from scheduler.submission.control import retry_failed  # noqa: F401 - the operator's verb

    make_task(queue, "t", 2, max_failures=1, max_attempts=1)
    job = queue.claim("w", 1).jobs[0]
    assert queue.fail_job("w", job.job_id, job.token, JobResult(1), error="boom").aborted
    assert queue.aborting() == ["t"]
    keys = [KEYS.task("t"), *KEYS.all_due(), KEYS.dead, KEYS.events, KEYS.job("t.0")]
    queue.call("retry_failed", keys, ["t", "ops", KEYS.wake, "", "t.0"])
    assert queue.task_state("t")["state"] == "active"
    assert queue.aborting() == []


def test_a_stale_ack_is_still_refused_when_the_job_runs_again_under_a_new_token(
        queue: Queue) -> None:
    # A repeat is recognised only for the token its first call carried
    make_task(queue, "t", 1, max_attempts=3)
    job = queue.claim("w", 1, lease_ms=1).jobs[0]
    time.sleep(0.01)
    again = queue.claim("w2", 1).jobs[0]
    assert again.token == job.token + 1
    assert queue.ack("w", [(job.job_id, job.token, JobResult(0))]) == [Code.STALE_TOKEN]
    with pytest.raises(StaleTokenError):
        queue.fail_job("w", job.job_id, job.token, JobResult(1), error="late")
