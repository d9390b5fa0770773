"""create_task, enqueue, pause, resume and cancel, and bad input to them (nothing half-written).

Every test runs on Redis 7 and on Redis 6.2 (the ``qclient`` fixture).
"""

from __future__ import annotations

import json

import pytest
import redis

from scheduler.errors import BadArgumentError, Code, QueueError, UnknownTaskError
from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from scheduler.queue.scripts import script_source
from tests.queue_support import KEYS, due_score, events, make_task, redis_now_ms


def test_enqueue_counts_only_new_jobs_and_emits_one_event_per_batch(queue: Queue) -> None:
    queue.create_task(TaskSpec("t"))
    assert queue.enqueue("t", [JobSpec("t.0", "a"), JobSpec("t.1", "b")]) == 2
    assert queue.enqueue("t", [JobSpec("t.1", "b"), JobSpec("t.2", "c"), JobSpec("t.2", "c")]) == 1
    assert queue.client.zcard(KEYS.due("normal")) == 3
    assert queue.client.hget(KEYS.stats, "enqueued") == "3"
    assert (queue.task_state("t")["total"], queue.task_state("t")["span"]) == ("3", "3")
    assert [(e["jobs"], e["count"]) for e in events(queue.client, "enqueue")] == [("t.0 t.1", "2"), ("t.2", "1")]


def test_enqueue_splits_thousands_of_jobs_into_chunks(queue: Queue) -> None:
    queue.create_task(TaskSpec("big", priority="bulk"))
    assert queue.enqueue("big", [JobSpec(f"big.{k}", f"h{k}") for k in range(2_500)]) == 2_500
    assert queue.client.zcard(KEYS.due("bulk")) == 2_500
    assert [e["count"] for e in events(queue.client, "enqueue")] == ["1000", "1000", "500"]


def test_due_zero_means_now_by_the_redis_clock(queue: Queue) -> None:
    before = redis_now_ms(queue.client)
    make_task(queue, "t", 1)
    after = redis_now_ms(queue.client)
    assert before <= due_score(queue.client, "t.0") <= after
    due = str(int(due_score(queue.client, "t.0")))
    # The stored hash stays small; job_state fills in what it leaves out
    assert queue.client.hgetall(KEYS.job("t.0")) == {"host": "host-t.0", "state": "pending", "due": due}
    assert queue.job_state("t.0") == {"task": "t", "host": "host-t.0", "state": "pending", "due": due,
                                      "attempt": "0", "token": "0"}


def test_hosts_with_quotes_and_non_ascii_survive_enqueue_and_claim(queue: Queue) -> None:
    # Given host and window names that JSON must escape (the jobs travel as one JSON argument)
    queue.create_task(TaskSpec("t"))
    hosts = ['we"b\\1', "hôte-漢字", "a]},{b", "tab\there"]
    jobs = [JobSpec(f"t.{k}", h, due_ms=1 + k) for k, h in enumerate(hosts)]
    jobs.append(JobSpec("t.4", "w", due_ms=9, window='win "1"', wclose_ms=1_700_000_000_123))
    assert queue.enqueue("t", jobs) == 5
    # When they are claimed, they come back exactly as given
    claimed = queue.claim("w", 5).jobs
    assert [(j.host, j.due_ms) for j in claimed[:4]] == [(h, 1 + k) for k, h in enumerate(hosts)]
    assert (claimed[4].window, claimed[4].wclose_ms) == ('win "1"', 1_700_000_000_123)
    assert [e["host"] for e in events(queue.client, "claim")] == [*hosts, "w"]


def test_a_job_hash_keeps_its_window(queue: Queue) -> None:
    queue.create_task(TaskSpec("t"))
    queue.enqueue("t", [JobSpec("t.0", "h", due_ms=5, window="sun-night", wclose_ms=99)])
    claimed = queue.claim("w", 1).jobs[0]
    assert (claimed.window, claimed.wclose_ms, claimed.due_ms) == ("sun-night", 99, 5)


def test_enqueue_publishes_a_wake_only_when_a_job_becomes_the_earliest(queue: Queue) -> None:
    now = redis_now_ms(queue.client)
    pubsub = queue.client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(KEYS.wake)
    pubsub.get_message(timeout=1)
    queue.create_task(TaskSpec("t"))

    def wakes() -> list[str]:
        out = []
        while (m := pubsub.get_message(timeout=0.2)) is not None:
            out.append(m["data"])
        return out

    queue.enqueue("t", [JobSpec("t.0", "h", due_ms=now + 10_000)])
    assert wakes() == [str(now + 10_000)]
    queue.enqueue("t", [JobSpec("t.1", "h", due_ms=now + 20_000)])
    assert wakes() == []
    queue.enqueue("t", [JobSpec("t.2", "h", due_ms=now + 5_000)])
    assert wakes() == [str(now + 5_000)]
    pubsub.close()


def test_enqueue_to_an_unknown_or_cancelled_task_is_refused(queue: Queue) -> None:
    with pytest.raises(UnknownTaskError):
        queue.enqueue("nope", [JobSpec("nope.0", "h")])
    make_task(queue, "c", 1)
    queue.cancel_task("c", "ops")
    with pytest.raises(QueueError) as caught:
        queue.enqueue("c", [JobSpec("c.1", "h")])
    assert caught.value.code == Code.TASK_NOT_ACTIVE
    assert queue.job_state("c.1") == {}


@pytest.mark.parametrize("jobs, words", [
    ([], "at least one job"),
    ([JobSpec("t.0", "h"), JobSpec("u.1", "h")], "not of task"),
    ([JobSpec("t.x", "h")], "job id"),
    ([JobSpec("t.01", "h")], "job id"),
    ([JobSpec("t.0", "")], "host"),
    ([JobSpec("t.0", "h", due_ms=-1)], "due_ms"),
    ([JobSpec("t.0", "h", wclose_ms=1.5)], "wclose_ms"),  # type: ignore[arg-type]
    (["t.0"], "JobSpec"),
])
def test_bad_jobs_are_refused_and_nothing_is_written(queue: Queue, jobs: list, words: str) -> None:
    queue.create_task(TaskSpec("t"))
    before = queue.client.dbsize()
    with pytest.raises(BadArgumentError, match=words):
        queue.enqueue("t", jobs)
    assert queue.client.dbsize() == before
    assert queue.client.zcard(KEYS.due("normal")) == 0


def test_the_enqueue_script_validates_the_whole_batch_before_its_first_write(qclient: redis.Redis) -> None:
    Queue(qclient).create_task(TaskSpec("t"))
    enqueue = qclient.register_script(script_source("enqueue"))
    keys = [KEYS.task("t"), *KEYS.all_due(), KEYS.stats, KEYS.events]
    good = ["t.0", "h", "0", "", ""]
    for jobs, words in (([good, ["x.1", "h", "0", "", ""]], "not of task t"),
                        ([good, ["t.1", "h", "-3", "", ""]], "due"),
                        ([good, ["t.1", "", "0", "", ""]], "no host"),
                        ([good, ["t.1", "h", "0", "w", "soon"]], "window close"),
                        ([good, ["t.1", "h", 0, "", ""]], "5 strings"),
                        ([], "at least one job")):
        code, message = enqueue(keys=keys, args=[KEYS.tag, "t", KEYS.wake, json.dumps(jobs)])
        assert code == Code.BAD_ARGUMENT and words in message, (jobs, message)
    code, message = enqueue(keys=keys, args=[KEYS.tag, "t", KEYS.wake, "[[\"t.0\""])
    assert code == Code.BAD_ARGUMENT and "JSON list" in message
    assert qclient.exists(KEYS.job("t.0")) == 0 and qclient.zcard(KEYS.due("normal")) == 0


@pytest.mark.parametrize("spec, words", [
    (TaskSpec("t", priority="high"), "priority"),
    (TaskSpec("bad id"), "task id"),
    (TaskSpec("t", max_running=-1), "max_running"),
    (TaskSpec("t", max_attempts=0), "max_attempts"),
    (TaskSpec("t", idempotent="yes"), "idempotent"),  # type: ignore[arg-type]
    (TaskSpec("t", spec={"x": object()}), "JSON"),
    (TaskSpec("t", spec={"x": float("nan")}), "JSON"),
])
def test_a_malformed_task_spec_is_refused_and_nothing_is_written(queue: Queue, spec: TaskSpec, words: str) -> None:
    with pytest.raises(BadArgumentError, match=words):
        queue.create_task(spec)
    assert queue.client.dbsize() == 0


def test_the_create_task_script_refuses_a_bad_priority(qclient: redis.Redis) -> None:
    create = qclient.register_script(script_source("create_task"))
    code, message = create(keys=[KEYS.task("t"), KEYS.events],
                           args=["t", "high", 0, 0, 3, 1000, 1000, 1, "{}", "", "t"])
    assert code == Code.BAD_ARGUMENT and "priority" in message
    assert qclient.dbsize() == 0


def test_cancel_task_sweeps_pending_parked_and_held_jobs_but_lets_running_ones_finish(queue: Queue) -> None:
    # Given 1200 jobs (more than one cancel chunk), 2 running, the rest parked or pending
    make_task(queue, "t", 1_200, max_running=2)
    running = queue.claim("w", 10).jobs
    assert len(running) == 2 and queue.client.llen(KEYS.parked("t")) > 0
    queue.client.hset(KEYS.job("t.1199"), "state", "held")  # as if a pause had held it
    queue.client.zrem(KEYS.due("normal"), "t.1199")
    queue.client.zadd(KEYS.held("t"), {"t.1199": 1})
    # When cancelled
    assert queue.cancel_task("t", "carol") == 1_198
    # Then only the running ones are left, and they can still be acked
    assert queue.client.zcard(KEYS.due("normal")) == 2
    assert queue.client.exists(KEYS.parked("t"), KEYS.held("t")) == 0
    assert queue.task_state("t")["cancelled"] == "1198"
    assert queue.ack("w", [(j.job_id, j.token, JobResult(0)) for j in running]) == [Code.OK, Code.OK]
    assert queue.client.zcard(KEYS.due("normal")) == 0
    first = events(queue.client, "cancel")[0]
    assert (first["operator"], first.get("jobs")) == ("carol", None)
    assert sum(int(e.get("count", 0)) for e in events(queue.client, "cancel")) == 1_198


def test_cancel_of_an_unknown_task_raises(queue: Queue) -> None:
    with pytest.raises(UnknownTaskError):
        queue.cancel_task("ghost", "ops")


def test_pause_of_a_cancelled_task_is_refused_and_pause_twice_is_harmless(queue: Queue) -> None:
    make_task(queue, "t", 1)
    queue.pause("t", "a")
    queue.pause("t", "a")
    assert len(events(queue.client, "pause")) == 1
    queue.cancel_task("t", "a")
    with pytest.raises(QueueError) as caught:
        queue.pause("t", "a")
    assert caught.value.code == Code.TASK_NOT_ACTIVE
    with pytest.raises(QueueError):
        queue.resume("t", "a")
    with pytest.raises(UnknownTaskError):
        queue.pause("ghost", "a")


def test_resume_moves_many_held_jobs_back_in_chunks(queue: Queue) -> None:
    make_task(queue, "t", 2_345)
    queue.pause("t", "a")
    for _ in range(20):
        queue.claim("w", 1_000)
    assert queue.client.zcard(KEYS.held("t")) == 2_345
    assert queue.resume("t", "a") == 2_345
    assert queue.client.zcard(KEYS.due("normal")) == 2_345
    assert queue.client.exists(KEYS.held("t")) == 0


def test_a_task_recreated_with_carried_counts_starts_with_them_and_paused_in_one_step(
        queue: Queue) -> None:
    from scheduler.queue.client import Carried
    # Given a task reconcile recreates: 3 jobs had ended (2 succeeded, 1 lost), paused by its rollout
    carried = Carried(ended=3, succeeded=2, failed=1, failed_hosts=1, paused_by="rollout")
    assert queue.create_task(TaskSpec("r1"), carried)
    queue.enqueue("r1", [JobSpec("r1.3", "d")])
    # Then its counters count the ended jobs, it is paused by the rollout, and nothing is claimable
    t = queue.task_state("r1")
    assert (t["total"], t["succeeded"], t["failed"], t["failed_hosts"]) == ("4", "2", "1", "1")
    assert (t["state"], t.get("wave_held")) == ("paused", "1")
    assert [e["operator"] for e in events(queue.client, "pause")] == ["rollout"]
    assert queue.claim("w", 10).jobs == []
    # And a second creation changes nothing
    assert not queue.create_task(TaskSpec("r1"), Carried())


@pytest.mark.parametrize("carried", ['{"ended": 2, "succeeded": 1}', '[1]', '{"ended": -1}',
                                     '{"paused_by": 3}', 'not json'])
def test_carried_counts_that_do_not_add_up_are_refused_and_write_nothing(
        queue: Queue, carried: str) -> None:
    args = [*TaskSpec("r2").script_args(), carried]
    with pytest.raises(BadArgumentError):
        queue.call("create_task", [KEYS.task("r2"), KEYS.events], args)
    assert not queue.client.exists(KEYS.task("r2"))
