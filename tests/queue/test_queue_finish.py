"""ack, extend, fail, defer and release: each checks the fencing token; a stale one changes nothing.

Every test runs on Redis 7 and on Redis 6.2 (the ``qclient`` fixture).
"""

from __future__ import annotations

import json

import pytest
import redis

from scheduler.errors import BadArgumentError, Code, QueueError, StaleTokenError, UnknownJobError
from scheduler.queue.client import BACKOFF_CAP_MS, JobResult, Queue, TaskSpec
from scheduler.queue.scripts import script_source
from tests.queue_support import KEYS, due_score, events, make_task, redis_now_ms, snapshot


def claimed_twice(queue: Queue) -> tuple[int, int]:
    """A job claimed by w1, lost, and claimed again by w2: (stale token, current token)."""
    make_task(queue, "t", 1)
    old = queue.claim("w1", 1).jobs[0]
    queue.client.zadd(KEYS.due("normal"), {"t.0": 0}, xx=True)  # w1's lease ran out
    new = queue.claim("w2", 1).jobs[0]
    return old.token, new.token


def test_ack_removes_the_job_and_counts_it(queue: Queue) -> None:
    make_task(queue, "t", 2)
    jobs = queue.claim("w", 2).jobs
    codes = queue.ack("w", [(j.job_id, j.token, JobResult(0, 12, "done")) for j in jobs])
    assert codes == [Code.OK, Code.OK]
    assert queue.job_state("t.0") == {} and queue.client.zcard(KEYS.due("normal")) == 0
    state = queue.task_state("t")
    assert (state["running"], state["succeeded"]) == ("0", "2")
    ack = events(queue.client, "ack")[0]
    assert (ack["job"], ack["exit_code"], ack["duration_ms"], ack["output"], ack["worker"]) == \
        ("t.0", "0", "12", "done", "w")


def test_ack_output_reaches_the_event_byte_for_byte_through_the_json_argument(queue: Queue) -> None:
    # Given output with quotes, backslashes, control characters, NUL, non-ASCII and an emoji
    make_task(queue, "t", 2)
    jobs = queue.claim("w", 2).jobs
    tricky = 'say "hi" \\ C:\\tmp\n\ttab\x00nul \x7f é 漢字 🚀 \u2028 ]},'
    # When both jobs are acked in one call, one with the tricky output and a negative exit code
    codes = queue.ack("w", [(jobs[0].job_id, jobs[0].token, JobResult(-9, 3, tricky)),
                            (jobs[1].job_id, jobs[1].token, JobResult(None, 0, ""))])
    # Then the events carry exactly what was given
    assert codes == [Code.OK, Code.OK]
    first, second = events(queue.client, "ack")
    assert (first["output"], first["exit_code"], first["duration_ms"]) == (tricky, "-9", "3")
    assert (second["output"], second["exit_code"], second["duration_ms"]) == ("", "", "0")


def test_a_stale_ack_extend_fail_defer_or_release_changes_nothing(queue: Queue) -> None:
    stale, current = claimed_twice(queue)
    before = snapshot(queue.client)
    assert queue.ack("w1", [("t.0", stale, JobResult(0))]) == [Code.STALE_TOKEN]
    assert queue.extend("w1", [("t.0", stale)]) == [Code.STALE_TOKEN]
    assert queue.release("w1", [("t.0", stale)]) == [Code.STALE_TOKEN]
    assert queue.defer("w1", "t.0", stale, 0, wclose_ms=None, reason="x") == Code.STALE_TOKEN
    with pytest.raises(StaleTokenError, match="claimed again"):
        queue.fail("w1", "t.0", stale, JobResult(1), error="boom")
    assert snapshot(queue.client) == before
    assert queue.ack("w2", [("t.0", current, JobResult(0))]) == [Code.OK]


def test_ack_answers_per_job_for_unknown_and_not_running_jobs(queue: Queue) -> None:
    make_task(queue, "t", 2)
    job = queue.claim("w", 1).jobs[0]
    codes = queue.ack("w", [("t.9", 1, JobResult()), ("t.1", 0, JobResult()), (job.job_id, job.token, JobResult())])
    assert codes == [Code.UNKNOWN_JOB, Code.NOT_RUNNING, Code.OK]


def test_extend_moves_the_lease_expiry_and_emits_no_event(queue: Queue) -> None:
    make_task(queue, "t", 1)
    job = queue.claim("w", 1, lease_ms=1_000).jobs[0]
    before = len(events(queue.client))
    assert queue.extend("w", [(job.job_id, job.token)], lease_ms=600_000) == [Code.OK]
    assert due_score(queue.client, "t.0") >= redis_now_ms(queue.client) + 590_000
    assert len(events(queue.client)) == before
    assert queue.extend("w", [("t.5", 1)]) == [Code.UNKNOWN_JOB]


def test_fail_retries_with_exponential_backoff_and_jitter(queue: Queue) -> None:
    make_task(queue, "t", 1, backoff_ms=10_000, max_attempts=5)
    delays = []
    for attempt in range(1, 4):
        queue.client.zadd(KEYS.due("normal"), {"t.0": 0}, xx=True)  # due now
        job = queue.claim("w", 1).jobs[0]
        assert job.attempt == attempt
        before = redis_now_ms(queue.client)
        out = queue.fail_job("w", "t.0", job.token, JobResult(1), error="exit 1")
        assert out.outcome == "retry" and not out.aborted
        delays.append(out.due_ms - before)
        assert due_score(queue.client, "t.0") == out.due_ms
        assert queue.job_state("t.0")["state"] == "pending"
    # base * 2^(attempt-1), +-20% jitter (plus a few ms of clock between our reads)
    for attempt, delay in enumerate(delays, start=1):
        base = 10_000 * 2 ** (attempt - 1)
        assert 0.8 * base - 50 <= delay <= 1.2 * base + 50
    retry = events(queue.client, "retry")[0]
    assert (retry["error"], retry["exit_code"]) == ("exit 1", "1")
    assert queue.task_state("t")["running"] == "0"


def test_backoff_is_capped(qclient: redis.Redis) -> None:
    queue = Queue(qclient)
    make_task(queue, "t", 1, backoff_ms=BACKOFF_CAP_MS, max_attempts=9)
    for _ in range(3):
        qclient.zadd(KEYS.due("normal"), {"t.0": 0}, xx=True)
        job = queue.claim("w", 1).jobs[0]
        before = redis_now_ms(qclient)
        out = queue.fail_job("w", "t.0", job.token, JobResult(1), error="x")
    assert out.due_ms - before <= BACKOFF_CAP_MS + 50


def test_the_last_attempt_fails_for_good_into_the_dead_letter_set(queue: Queue) -> None:
    make_task(queue, "t", 1, max_attempts=2, backoff_ms=0)
    outcomes = []
    for _ in range(2):
        job = queue.claim("w", 1).jobs[0]
        outcomes.append(queue.fail("w", "t.0", job.token, JobResult(2), error=f"attempt {job.attempt}"))
    assert outcomes == ["retry", "failed"]
    assert queue.client.zscore(KEYS.dead, "t.0") is not None
    state = queue.job_state("t.0")
    assert (state["state"], state["error"]) == ("failed", "attempt 2")
    assert due_score(queue.client, "t.0") is None
    assert queue.task_state("t")["failed"] == "1"


def test_a_non_retryable_failure_fails_at_once(queue: Queue) -> None:
    make_task(queue, "t", 1, max_attempts=5)
    job = queue.claim("w", 1).jobs[0]
    assert queue.fail("w", "t.0", job.token, JobResult(2), error="bad args", retryable=False) == "failed"
    assert queue.job_state("t.0")["state"] == "failed"


def test_crossing_max_failures_aborts_the_task_and_later_failures_overshoot(queue: Queue) -> None:
    # Given a task that aborts after 2 failures, 3 jobs running and 2 pending
    make_task(queue, "t", 5, max_failures=2, max_attempts=1)
    jobs = queue.claim("w", 3).jobs
    outs = [queue.fail_job("w", j.job_id, j.token, JobResult(1), error="x") for j in jobs]
    assert [o.aborted for o in outs] == [False, True, False]
    state = queue.task_state("t")
    assert (state["state"], state["failed"], state["overshoot"]) == ("aborted", "3", "1")
    assert len(events(queue.client, "abort")) == 1
    # Then the pending jobs are cancelled: lazily by claim, or swept by cancel_task
    assert queue.cancel_task("t", "ops") == 2
    assert queue.task_state("t")["state"] == "aborted"
    assert queue.claim("w", 10).jobs == []


def test_defer_puts_the_job_back_later_without_counting_an_attempt(queue: Queue) -> None:
    make_task(queue, "t", 1)
    job = queue.claim("w", 1).jobs[0]
    later = redis_now_ms(queue.client) + 3_600_000
    assert queue.defer("w", "t.0", job.token, later, wclose_ms=later + 60_000, reason="window closed") == Code.OK
    state = queue.job_state("t.0")
    assert (state["state"], state["attempt"], state["due"], state["wclose"]) == \
        ("pending", "0", str(later), str(later + 60_000))
    assert due_score(queue.client, "t.0") == later
    [defer] = events(queue.client, "defer")
    assert (defer["due"], defer["error"]) == (str(later), "window closed")
    # The same token's defer again (its first reply lost) answers the first outcome and
    # records nothing; another verb with that token is refused
    assert queue.defer("w", "t.0", job.token, later, wclose_ms=None, reason="x") == Code.OK
    assert len(events(queue.client, "defer")) == 1
    assert queue.release("w", [("t.0", job.token)]) == [Code.NOT_RUNNING]


def test_release_gives_the_lease_back_at_the_original_due_time(queue: Queue) -> None:
    now = redis_now_ms(queue.client)
    make_task(queue, "t", 2, due_ms=now - 5_000, max_running=1)
    job = queue.claim("w", 5).jobs[0]
    assert queue.job_state("t.1")["state"] == "parked"
    assert queue.release("w", [(job.job_id, job.token)]) == [Code.OK]
    state = queue.job_state("t.0")
    assert (state["state"], state["attempt"], state.get("owner")) == ("pending", "0", None)
    assert due_score(queue.client, "t.0") == now - 5_000
    assert due_score(queue.client, "t.1") == now - 5_000  # the parked one came back too
    again = queue.claim("w", 1).jobs[0]
    assert (again.attempt, again.token) == (1, 2)


def test_fail_of_an_unknown_or_not_running_job_raises_typed_errors(queue: Queue) -> None:
    make_task(queue, "t", 1)
    with pytest.raises(UnknownJobError):
        queue.fail("w", "t.7", 1, JobResult(), error="x")
    with pytest.raises(QueueError) as caught:
        queue.fail("w", "t.0", 0, JobResult(), error="x")
    assert caught.value.code == Code.NOT_RUNNING


def test_finishing_scripts_reject_malformed_arguments_before_writing(qclient: redis.Redis) -> None:
    queue = Queue(qclient)
    make_task(queue, "t", 1)
    job = queue.claim("w", 1).jobs[0]
    before = snapshot(qclient)
    ack = qclient.register_script(script_source("ack"))
    keys = [KEYS.events, *KEYS.all_due()]
    good = ["t.0", str(job.token), "", "0", ""]
    for jobs, words in ((json.dumps([["t.0", "abc", "", "0", ""]]), "token"),
                        (json.dumps([good, ["t.0", str(job.token), "", "-3", ""]]), "duration"),
                        (json.dumps([good, ["t.0", str(job.token), "x", "0", ""]]), "exit code"),
                        (json.dumps([["t0", str(job.token), "", "0", ""]]), "not <task>.<n>"),
                        (json.dumps([good[:4]]), "is not [id"),
                        (json.dumps([["t.0", job.token, "", "0", ""]]), "is not [id"),
                        (json.dumps([]), "at least one job"),
                        (json.dumps(good)[:-1], "JSON list")):
        code, message = ack(keys=keys, args=[KEYS.tag, "w", KEYS.wake, jobs, 30_000])
        assert code == Code.BAD_ARGUMENT and words in message, (jobs, message)
    code, message = ack(keys=keys, args=[KEYS.tag, "w", KEYS.wake, json.dumps([good]), 0])
    assert code == Code.BAD_ARGUMENT and "memo lifetime" in message
    fail = qclient.register_script(script_source("fail"))
    keys = [KEYS.job("t.0"), KEYS.task("t"), *KEYS.all_due(), KEYS.parked("t"), KEYS.dead, KEYS.events]
    base = [KEYS.tag, "w", KEYS.wake, "t.0", job.token, 1, "e", "", 0, ""]
    for tail, words in (([1.5, 1000, 30_000, "host"], "jitter"),
                        ([0.5, 1000, "", "host"], "memo lifetime"),
                        ([0.5, 1000, 30_000, "nobody"], "blame")):
        code, message = fail(keys=keys, args=base + tail)
        assert code == Code.BAD_ARGUMENT and words in message, (tail, message)
    assert snapshot(qclient) == before
    with pytest.raises(BadArgumentError, match="token"):
        queue.ack("w", [("t.0", -1, JobResult())])
    with pytest.raises(BadArgumentError, match="duration_ms"):
        queue.ack("w", [("t.0", job.token, JobResult(0, -5))])
    with pytest.raises(BadArgumentError, match="due_ms"):
        queue.defer("w", "t.0", job.token, -1, wclose_ms=None, reason="x")
    assert snapshot(qclient) == before


def test_a_late_ack_after_the_lease_ran_out_is_accepted_while_nobody_took_the_job(queue: Queue) -> None:
    # The token, not the clock, decides: an expired lease not yet reclaimed is still this worker's.
    make_task(queue, "t", 1)
    job = queue.claim("w", 1, lease_ms=1).jobs[0]
    assert queue.ack("w", [(job.job_id, job.token, JobResult(0))]) == [Code.OK]


def test_a_task_spec_is_written_once(queue: Queue) -> None:
    assert queue.create_task(TaskSpec("t", max_running=3, spec={"action": "command"})) is True
    assert queue.create_task(TaskSpec("t", max_running=9)) is False
    state = queue.task_state("t")
    assert (state["max_running"], state["spec"], state["state"]) == ("3", '{"action": "command"}', "active")
