"""Each Lua script called directly (no Queue in between) with arguments Python would refuse:
a negative code and a message naming the problem, and nothing written.

Every test runs on Redis 7 and on Redis 6.2 (the ``qclient`` fixture).
"""

from __future__ import annotations

import pytest
import redis

from scheduler.errors import Code
from scheduler.queue.client import JobResult, Queue
from scheduler.queue.scripts import script_source
from tests.queue_support import KEYS, make_task, snapshot

JOB = [KEYS.job("t.0"), KEYS.task("t")]
TASK = [KEYS.task("t"), *KEYS.all_due(), KEYS.parked("t"), KEYS.held("t"), KEYS.events]

CASES = [
    ("extend", [*KEYS.all_due(), *JOB], [-5, 1, "t.0", 1], Code.BAD_ARGUMENT, "lease"),
    ("extend", [*KEYS.all_due(), *JOB], [1000, 1, "t.0", "x"], Code.BAD_ARGUMENT, "token"),
    ("extend", [*KEYS.all_due()], [1000, 0], Code.BAD_ARGUMENT, "at least one job"),
    ("release", [KEYS.events, *KEYS.all_due(), *JOB, KEYS.parked("t")],
     [KEYS.tag, "w", KEYS.wake, 2, "t.0", 1], Code.BAD_ARGUMENT, "release needs"),
    ("defer", [*JOB, *KEYS.all_due(), KEYS.parked("t"), KEYS.events],
     [KEYS.tag, "w", KEYS.wake, "t.0", 1, 0, "soon", "r"], Code.BAD_ARGUMENT, "window close"),
    ("defer", [KEYS.job("t.9"), KEYS.task("t"), *KEYS.all_due(), KEYS.parked("t"), KEYS.events],
     [KEYS.tag, "w", KEYS.wake, "t.9", 1, 0, "", "r", 30_000], Code.UNKNOWN_JOB, "no job t.9"),
    ("defer", [*JOB, *KEYS.all_due(), KEYS.parked("t"), KEYS.events],
     [KEYS.tag, "w", KEYS.wake, "t.0", 1, 0, "", "r", 0], Code.BAD_ARGUMENT, "memo lifetime"),
    ("release", [KEYS.events, *KEYS.all_due(), *JOB, KEYS.parked("t")],
     [KEYS.tag, "w", KEYS.wake, 1, 0, "t.0", 1], Code.BAD_ARGUMENT, "memo lifetime"),
    ("fail", [*JOB, *KEYS.all_due(), KEYS.parked("t"), KEYS.dead, KEYS.events],
     [KEYS.tag, "w", KEYS.wake, "t.0", 1, "maybe", "e", "", 0, "", 0.5, 1000], Code.BAD_ARGUMENT, "retryable"),
    ("cancel", [*TASK, KEYS.job("u.0")], ["t", "op", 0, 0, "", "u.0"], Code.BAD_ARGUMENT, "not of task t"),
    ("cancel", [KEYS.task("ghost"), *TASK[1:]], ["ghost", "op", 1, 0, ""], Code.UNKNOWN_TASK, "no task ghost"),
    ("resume", [KEYS.task("t"), KEYS.held("t"), *KEYS.all_due(), KEYS.events],
     [KEYS.tag, "t", "op", 0, 1, KEYS.wake, ""], Code.BAD_ARGUMENT, "chunk"),
    ("resume", [KEYS.task("x"), KEYS.held("x"), *KEYS.all_due(), KEYS.events],
     [KEYS.tag, "x", "op", 10, 1, KEYS.wake, ""], Code.UNKNOWN_TASK, "no task x"),
    ("pause", [KEYS.task("x"), KEYS.events], ["x", "op", ""], Code.UNKNOWN_TASK, "no task x"),
    ("create_task", [KEYS.task("n"), KEYS.events], ["n", "normal", -1, 0, 3, 0, 1, 1, "{}", "", "n"],
     Code.BAD_ARGUMENT, "max_running"),
    ("create_task", [KEYS.task("n"), KEYS.events], ["n", "normal", 0, 0, 3, 0, 1, "yes", "{}", "", "n"],
     Code.BAD_ARGUMENT, "idempotent"),
    ("hosts", [KEYS.host("a")], [KEYS.tag, "[not json"], Code.BAD_ARGUMENT, "JSON list"),
    ("hosts", [KEYS.host("a")], [KEYS.tag, '[["a", "10.0.0.1", "22", "", "{}", ""], ["b", "x"]]'],
     Code.BAD_ARGUMENT, "each host is"),
    ("hosts", [KEYS.host("a")], [KEYS.tag, '[["a", "10.0.0.1", 22, "", "{}", ""]]'],
     Code.BAD_ARGUMENT, "every field is text"),
]


@pytest.mark.parametrize("verb, keys, args, code, words", CASES,
                         ids=[f"{c[0]}-{c[4].replace(' ', '_')}" for c in CASES])
def test_a_script_refuses_bad_arguments_with_its_code_and_writes_nothing(
        qclient: redis.Redis, verb: str, keys: list, args: list, code: Code, words: str) -> None:
    # Given a task with one running job
    queue = Queue(qclient)
    make_task(queue, "t", 1)
    queue.claim("w", 1)
    before, events = snapshot(qclient), qclient.xlen(KEYS.events)
    # When the script is called with a bad argument
    reply = qclient.register_script(script_source(verb))(keys=keys, args=args)
    # Then it answers with the code and a message, and nothing changed
    assert reply[0] == code and words in reply[1]
    assert snapshot(qclient) == before and qclient.xlen(KEYS.events) == events


def test_the_same_job_twice_in_one_ack_batch_is_acked_once(qclient: redis.Redis) -> None:
    queue = Queue(qclient)
    make_task(queue, "t", 1)
    job = queue.claim("w", 1).jobs[0]
    codes = queue.ack("w", [(job.job_id, job.token, JobResult(0))] * 2)
    assert codes == [Code.OK, Code.NOT_RUNNING]
    assert queue.task_state("t")["succeeded"] == "1" and queue.task_state("t")["running"] == "0"


def test_next_due_script_answers_minus_one_for_an_empty_queue(qclient: redis.Redis) -> None:
    now, earliest, micros = qclient.register_script(script_source("next_due"))(
        keys=KEYS.all_due(), args=[])
    assert earliest == -1 and now > 1_600_000_000_000 and 0 <= micros < 1_000
