"""next_due and wait_for_work: workers sleep until the earliest due time or a wake, no polling.

Every test runs on Redis 7 and on Redis 6.2 (the ``qclient`` fixture).
"""

from __future__ import annotations

import threading
import time

import pytest
import redis

from scheduler.errors import BadArgumentError
from scheduler.queue.client import JobSpec, Queue, TaskSpec
from tests.queue_support import make_task, redis_now_ms, second_client


def test_next_due_is_the_redis_clock_and_the_earliest_score_of_any_class(queue: Queue) -> None:
    now, earliest = queue.next_due()
    assert earliest is None and abs(now - redis_now_ms(queue.client)) < 1_000
    t = redis_now_ms(queue.client)
    make_task(queue, "b", 1, due_ms=t + 1_000, priority="bulk")
    make_task(queue, "u", 1, due_ms=t + 5_000, priority="urgent")
    assert queue.next_due()[1] == t + 1_000


def test_wait_for_work_returns_at_once_when_a_job_is_due(queue: Queue) -> None:
    make_task(queue, "t", 1)
    start = time.monotonic()
    queue.wait_for_work(5)
    assert time.monotonic() - start < 0.5


def test_wait_for_work_sleeps_until_the_earliest_due_time(queue: Queue) -> None:
    make_task(queue, "t", 1, due_ms=redis_now_ms(queue.client) + 400)
    start = time.monotonic()
    queue.wait_for_work(5)
    waited = time.monotonic() - start
    assert 0.3 <= waited < 2.0
    assert len(queue.claim("w", 1).jobs) == 1


def test_wait_for_work_wakes_when_an_earlier_job_arrives(queue: Queue, qclient: redis.Redis) -> None:
    # Given a worker asleep with nothing queued
    queue.create_task(TaskSpec("t"))
    producer = Queue(second_client(qclient))

    def enqueue_soon() -> None:
        time.sleep(0.3)
        producer.enqueue("t", [JobSpec("t.0", "h")])

    thread = threading.Thread(target=enqueue_soon)
    start = time.monotonic()
    thread.start()
    # When a job is enqueued 0.3 s later, the sleeper wakes well before its 10 s timeout
    queue.wait_for_work(10)
    waited = time.monotonic() - start
    thread.join()
    assert 0.25 <= waited < 3.0


def test_wait_for_work_ends_at_its_timeout_when_nothing_comes(queue: Queue) -> None:
    start = time.monotonic()
    queue.wait_for_work(0.3)
    assert 0.25 <= time.monotonic() - start < 2.0


def test_old_wakes_do_not_cut_a_later_sleep_short(queue: Queue) -> None:
    queue.wait_for_work(0.01)  # subscribed
    make_task(queue, "t", 1, due_ms=redis_now_ms(queue.client) + 60_000)  # publishes a wake
    start = time.monotonic()
    queue.wait_for_work(0.3)
    assert time.monotonic() - start >= 0.25


def test_wait_for_work_refuses_a_negative_timeout(queue: Queue) -> None:
    with pytest.raises(BadArgumentError, match="timeout"):
        queue.wait_for_work(-1)


def test_next_due_reads_the_redis_clock_to_the_microsecond(queue: Queue) -> None:
    # A waiter sleeping until a due time from a whole millisecond would wake up to 1 ms late.
    seen = set()
    for _ in range(20):
        now, _earliest = queue.next_due()
        seen.add(round(now % 1, 3))
        time.sleep(0.0003)
    assert len(seen) > 1, seen
