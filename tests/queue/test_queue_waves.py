"""Rollout waves at the queue level, on Redis 7 and 6.2: ``stage.lua`` keeps later waves out of
every due set, ``release_wave.lua`` releases a wave once, ``cancel.lua`` and the abort sweep
cancel staged jobs, and the controller's steps (``scheduler.submission.rollout.step``) move a
rollout through its waves, its gate and its check."""

from __future__ import annotations

import time

import pytest
import redis

from scheduler.errors import ValidationError
from scheduler.parse import Limit
from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from scheduler.queue.waves import move, release_wave, stage, wave_outcome
from scheduler.submission import rollout
from scheduler.submission.waves import WaveSpec, parse_waves, split, wave_spec
from tests.queue_support import KEYS, events


def make_waves(q: Queue, task_id: str, waves: list[list[int]], *, policy: dict | None = None,
               **spec) -> None:
    """A task whose job n runs on host-n, queued as submit does it: wave 1 enqueued, the rest
    staged."""
    q.create_task(TaskSpec(task_id, **spec))
    jobs = {n: JobSpec(f"{task_id}.{n}", f"host-{n}") for wave in waves for n in wave}
    q.enqueue(task_id, [jobs[n] for n in waves[0]])
    stage(q, task_id, len(waves), {**(policy or {}), "counts": [len(w) for w in waves]},
          [(jobs[n], k) for k, wave in enumerate(waves, 1) for n in wave])


def run_all(q: Queue, *, fail: set[str] = frozenset()) -> list[str]:
    """Claim every claimable job and end it (failed for good when its id is in ``fail``)."""
    claim = q.claim("w", 100)
    for job in claim.jobs:
        if job.job_id in fail:
            q.fail("w", job.job_id, job.token, JobResult(1), error="boom", retryable=False)
        else:
            q.ack("w", [(job.job_id, job.token, JobResult(0))])
    return sorted(j.job_id for j in claim.jobs)


def no_check(task: dict, hosts: list[str], command: str) -> list[str]:
    return []


def test_later_waves_are_never_claimed_until_released_and_a_wave_is_released_once(
        queue: Queue, qclient: redis.Redis) -> None:
    # Given a task of 5 jobs in waves [0], [1, 2], [3, 4]
    make_waves(queue, "t1", [[0], [1, 2], [3, 4]])
    # Then only wave 1 can be claimed; the others wait, counted in the task's total
    assert run_all(queue) == ["t1.0"]
    assert queue.claim("w", 10).jobs == []
    task = queue.task_state("t1")
    assert (task["total"], task["wave"], task["waves"], task["wave_state"]) == ("5", "1", "3", "running")
    assert queue.job_state("t1.3")["state"] == "waiting"
    # When wave 2 is released from state running, twice
    assert release_wave(queue, "t1", 2, ["running"]) == 2
    assert release_wave(queue, "t1", 2, ["running"]) is None
    # Then its jobs run, and wave 3's do not
    assert run_all(queue) == ["t1.1", "t1.2"]
    assert [e["jobs"] for e in events(qclient, "wave-release")] == ["t1.1 t1.2"]
    assert wave_outcome(queue, "t1", 2).live == 0
    assert wave_outcome(queue, "t1", 3).live == 2


def test_a_wave_released_while_the_task_is_paused_is_held_until_resume(queue: Queue) -> None:
    make_waves(queue, "t2", [[0], [1]])
    run_all(queue)
    queue.pause("t2", "ops")
    assert release_wave(queue, "t2", 2, ["running"]) == 1
    assert queue.job_state("t2.1")["state"] == "held"
    assert queue.claim("w", 10).jobs == []
    queue.resume("t2", "ops")
    assert run_all(queue) == ["t2.1"]


def test_cancel_cancels_the_staged_waves_and_drops_their_set(
        queue: Queue, qclient: redis.Redis) -> None:
    make_waves(queue, "t3", [[0, 1], [2, 3], [4]])
    assert queue.cancel_task("t3", "ops") == 5
    assert queue.task_state("t3")["cancelled"] == "5"
    assert not qclient.exists(KEYS.waves("t3"), KEYS.job("t3.4"))


def test_an_abort_sweeps_the_staged_waves_too(queue: Queue) -> None:
    make_waves(queue, "t4", [[0], [1, 2]], max_failures=1)
    claim = queue.claim("w", 10)
    out = queue.fail_job("w", claim.jobs[0].job_id, claim.jobs[0].token, JobResult(1),
                         error="boom", retryable=False)
    assert out.aborted
    assert queue.sweep_aborted("t4") == 2
    assert queue.task_state("t4")["state"] == "aborted"


def test_the_controller_stops_a_wave_over_the_failure_limit_and_continue_goes_on(
        queue: Queue, qclient: redis.Redis) -> None:
    # Given waves [0, 1], [2], [3] and a task that may lose 2 hosts
    make_waves(queue, "t5", [[0, 1], [2], [3]], max_failures=2, count_failures="final")
    # When wave 1 runs with one failure
    run_all(queue, fail={"t5.0"})
    # Then the controller releases wave 2 (1 failure is under the limit of 2)
    assert rollout.step(queue, "t5", 0, no_check) == "released"
    assert queue.task_state("t5")["wave"] == "2"
    # When wave 2 fails too, the task aborts at 2 failures (the task's own threshold)
    run_all(queue, fail={"t5.2"})
    assert queue.task_state("t5")["state"] == "aborted"
    assert rollout.step(queue, "t5", 0, no_check) == "left"
    assert not qclient.sismember(KEYS.waving, "t5")


def test_a_check_that_fails_stops_the_rollout_naming_the_hosts(queue: Queue) -> None:
    make_waves(queue, "t6", [[0], [1]], policy={"check": "false"})
    run_all(queue)
    seen = []

    def check(task: dict, hosts: list[str], command: str) -> list[str]:
        seen.append((hosts, command))
        return [f"{h}: exit 1" for h in hosts]

    assert rollout.step(queue, "t6", 0, check) == "stopped"
    assert seen == [(["host-0"], "false")]
    t = queue.task_state("t6")
    assert t["wave_state"] == "stopped"
    assert "host-0: exit 1" in t["wave_why"]
    # A stopped rollout waits: another step does nothing, wave 2 stays staged
    assert rollout.step(queue, "t6", 0, check) == "stopped"
    assert queue.job_state("t6.1")["state"] == "waiting"
    # When an operator continues it, the next step releases wave 2 without a check
    assert move(queue, "t6", 1, ["stopped"], "continued", "continue", operator="ops")
    assert rollout.step(queue, "t6", 0, check) == "released"
    assert len(seen) == 1
    run_all(queue)
    assert rollout.step(queue, "t6", 0, check) == "done"


def test_a_gate_waits_for_the_operator_then_a_pause_waits_for_its_time(queue: Queue) -> None:
    make_waves(queue, "t7", [[0], [1], [2]], policy={"gate": "approve", "pause_ms": 0})
    run_all(queue)
    assert rollout.step(queue, "t7", 0, no_check) == "gated"
    assert rollout.step(queue, "t7", 0, no_check) == "gated"
    assert move(queue, "t7", 1, ["gated"], "approved", "continue", operator="ops")
    assert rollout.step(queue, "t7", 0, no_check) == "released"
    # A pause: pausing until the Redis clock passes wave_until
    queue.client.hset(KEYS.task("t7"), "wave_policy", '{"pause_ms": 60000}')
    run_all(queue)
    assert rollout.step(queue, "t7", 0, no_check) == "pausing"
    until = int(queue.task_state("t7")["wave_until"])
    assert rollout.step(queue, "t7", until - 1, no_check) == "pausing"
    assert rollout.step(queue, "t7", until, no_check) == "released"


def test_wave_sizes_repeat_the_last_and_orders_are_stable() -> None:
    hosts = [f"h{n}" for n in range(10)]
    spec = WaveSpec(parse_waves("1,20%,50%"))
    assert split(spec, hosts, seed="1") == [[0], [1, 2], [3, 4, 5, 6, 7], [8, 9]]
    rnd = WaveSpec(parse_waves("3"), order="random")
    assert split(rnd, hosts, seed="42") == split(rnd, hosts, seed="42")
    assert split(rnd, hosts, seed="42") != split(rnd, hosts, seed="43")
    groups = {h: ("a" if n < 5 else "b") for n, h in enumerate(hosts)}
    by = split(WaveSpec((Limit(2),), order="by-group"), hosts, seed="1", groups=groups)
    assert all({groups[hosts[n]] for n in wave} == {"a", "b"} for wave in by)


@pytest.mark.parametrize("bad", ["", "1,,2", "0", "abc", "150%"])
def test_a_bad_wave_spec_is_refused_with_one_line(bad: str) -> None:
    with pytest.raises(ValidationError) as err:
        wave_spec(bad)
    assert "\n" not in str(err.value)
    with pytest.raises(ValidationError, match="--wave-gate needs --waves"):
        wave_spec(None, gate="approve")


def test_a_released_wave_keeps_its_windows_and_goes_into_the_tasks_class_now(
        queue: Queue, qclient: redis.Redis) -> None:
    # Given an urgent task whose wave 2 job has a service window and a due time in the past
    queue.create_task(TaskSpec("t8", priority="urgent"))
    first = JobSpec("t8.0", "host-0")
    later = JobSpec("t8.1", "host-1", due_ms=1_000, window="nightly", wclose_ms=2_000)
    queue.enqueue("t8", [first])
    stage(queue, "t8", 2, {}, [(first, 1), (later, 2)])
    run_all(queue)
    # When the task moves to bulk and wave 2 is released
    queue.reprioritize("t8", "bulk", "ops")
    assert release_wave(queue, "t8", 2, ["running"]) == 1
    # Then the job is in the bulk due set, due now (not earlier), its window kept for the claim
    job = queue.job_state("t8.1")
    assert (job["state"], job["window"], job["wclose"]) == ("pending", "nightly", "2000")
    assert int(job["due"]) > 1_000
    assert qclient.zscore(KEYS.due("bulk"), "t8.1") == int(job["due"])
    assert qclient.zscore(KEYS.due("urgent"), "t8.1") is None


def test_a_percentage_failure_limit_applies_to_each_waves_hosts(queue: Queue) -> None:
    # Given waves of 4 and 4 hosts, --max-failures 25% (of each wave: 1 host), and a task that
    # would abort only at 2 failures (25% of its 8 hosts)
    make_waves(queue, "t9", [[0, 1, 2, 3], [4, 5, 6, 7]], policy={"max_failures": "25%"},
               max_failures=2, count_failures="final")
    # When one host of wave 1 fails
    run_all(queue, fail={"t9.2"})
    # Then the task is not aborted, but the rollout stops at wave 1 (and the task is paused)
    t = queue.task_state("t9")
    assert (t["state"], t["wave_state"], t["failed"]) == ("paused", "stopped", "1")
    assert rollout.step(queue, "t9", 0, no_check) == "paused"
    assert t["wave_why"] == ("wave 1: 1 of 4 hosts failed (host-2), the limit is 1; its "
                             "pending jobs are held, running ones finish")
    assert queue.job_state("t9.4")["state"] == "waiting"


def test_a_check_left_running_by_a_dead_controller_runs_again(queue: Queue) -> None:
    # Given a rollout whose controller died while checking wave 1 (the state says checking)
    make_waves(queue, "t10", [[0], [1]], policy={"check": "true"})
    run_all(queue)
    assert move(queue, "t10", 1, ["running"], "checking", "wave-check")
    # When another controller steps it, the check runs again and the next wave is released
    ran = []

    def check(task: dict, hosts: list[str], command: str) -> list[str]:
        ran.append(hosts)
        return []

    assert rollout.step(queue, "t10", 0, check) == "released"
    assert ran == [["host-0"]]


def test_a_wave_stops_as_soon_as_its_hosts_failed_an_attempt_holding_the_rest_of_the_wave(
        queue: Queue, qclient: redis.Redis) -> None:
    # Given waves of 4 and 2 hosts, --max-failures 25% (1 host of wave 1; the task's own limit
    # is 4 of 6) counting hosts that failed an attempt (the default), with retries
    make_waves(queue, "t11", [[0, 1, 2, 3], [4, 5]], policy={"max_failures": "25%"},
               max_failures=4, max_attempts=3, backoff_ms=1)
    # When one job of wave 1 runs and fails its first attempt (to be retried)
    [job] = queue.claim("w", 1).jobs
    assert queue.fail("w", job.job_id, job.token, JobResult(1), error="boom") == "retry"
    # Then the rollout stopped at once, in the failing job's own script, though the wave has
    # not ended: the task is paused with the wave's other jobs and the retry held back, and the
    # task itself goes on (1 host of its limit of 4)
    t = queue.task_state("t11")
    assert (t["state"], t["wave_state"], t.get("wave_held")) == ("paused", "stopped", "1")
    assert t["wave_why"] == (f"wave 1: 1 of 4 hosts failed an attempt ({job.host}), the limit "
                             "is 1; its pending jobs are held, running ones finish")
    assert [(e["kind"], e.get("operator")) for e in events(qclient)
            if e["kind"] in ("wave-stop", "pause")] == [("wave-stop", None), ("pause", "rollout")]
    time.sleep(0.05)  # the retry's backoff
    assert queue.claim("w", 10).jobs == []
    assert rollout.step(queue, "t11", 0, no_check) == "paused"
    # When the operator continues: the held jobs run, and wave 2 waits for wave 1 to end
    assert move(queue, "t11", 1, ["stopped"], "continued", "continue", operator="ops")
    queue.resume("t11", "ops")
    assert "wave_held" not in queue.task_state("t11")
    assert rollout.step(queue, "t11", 0, no_check) == "continued"
    assert run_all(queue, fail={"t11.1", "t11.2"} - {job.job_id}) == [
        "t11.0", "t11.1", "t11.2", "t11.3"]
    # (a continued wave does not stop again; its later failures count against the task)
    assert queue.task_state("t11")["wave_state"] == "continued"
    assert rollout.step(queue, "t11", 0, no_check) == "released"
    t = queue.task_state("t11")
    assert (t["wave"], t["wave_limit"], t["wave_size"], t["wave_failures"]) == ("2", "1", "2", "0")


def test_counted_as_final_failures_a_retried_host_stops_the_wave_only_when_it_fails_for_good(
        queue: Queue) -> None:
    # Given the same kind of rollout counting only jobs failed for good (--count-failures final)
    make_waves(queue, "t12", [[0, 1], [2]], policy={"max_failures": "50%"},
               max_failures=2, max_attempts=3, backoff_ms=1, count_failures="final")
    [job] = queue.claim("w", 1).jobs
    assert queue.fail("w", job.job_id, job.token, JobResult(1), error="boom") == "retry"
    # Then the wave goes on: a retry is not a failure for good
    t = queue.task_state("t12")
    assert (t["state"], t["wave_state"], t["wave_failures"]) == ("active", "running", "0")
    # When the same job fails for good, the wave's limit (50% of 2 hosts: 1) is reached
    time.sleep(0.05)
    [again] = [j for j in queue.claim("w", 10).jobs if j.job_id == job.job_id]
    assert queue.fail("w", again.job_id, again.token, JobResult(1), error="boom",
                      retryable=False) == "failed"
    t = queue.task_state("t12")
    assert (t["state"], t["wave_state"], t["wave_failures"]) == ("paused", "stopped", "1")


# ---------------------------------------------------------- found by an adversarial review


def test_a_wave_whose_job_waits_for_its_host_or_group_has_not_ended(
        queue: Queue, qclient: redis.Redis) -> None:
    # Given another task running on host-0 and host-9, host-9 in group g limited to 1 job
    qclient.hset(KEYS.host("host-9"), "limits", "g")
    qclient.hset(KEYS.host("host-2"), "limits", "g")
    queue.set_group_limit("g", 1, "ops")
    queue.create_task(TaskSpec("other"))
    queue.enqueue("other", [JobSpec("other.0", "host-0"), JobSpec("other.1", "host-9")])
    assert len(queue.claim("w", 10).jobs) == 2
    # And a rollout in waves [0], [2], [1] whose first wave's job waits for host-0
    make_waves(queue, "t13", [[0], [2], [1]])
    assert queue.claim("w", 10).jobs == []
    assert queue.job_state("t13.0")["state"] == "hostwait"
    # Then the wave has not ended: the next wave is not released
    assert rollout.step(queue, "t13", 0, no_check) == "running"
    # When host-0 frees, wave 1 runs and wave 2 is released; its job waits for group g
    token = int(qclient.hget(KEYS.job("other.0"), "token"))
    queue.ack("w", [("other.0", token, JobResult(0))])
    assert run_all(queue) == ["t13.0"]
    assert rollout.step(queue, "t13", 0, no_check) == "released"
    assert queue.claim("w", 10).jobs == []
    assert queue.job_state("t13.2")["state"] == "hostwait"
    # Then the last wave is not released (nor the rollout done) while it waits
    assert rollout.step(queue, "t13", 0, no_check) == "running"
    assert queue.task_state("t13")["wave"] == "2"


def test_a_lost_job_neither_stops_its_wave_nor_holds_the_waves_other_jobs(
        queue: Queue) -> None:
    # Given a non-idempotent rollout in waves [0, 1, 2], [3] whose wave limit is 1 (33%)
    make_waves(queue, "t14", [[0, 1, 2], [3]], max_failures=5, idempotent=False,
               policy={"max_failures": "33%"})
    assert [j.job_id for j in queue.claim("w", 1, lease_ms=1).jobs] == ["t14.0"]
    time.sleep(0.05)
    # When another claim finds t14.0 lost (failed for good as lost: its worker's loss)
    second = queue.claim("w2", 10)
    # Then the rollout goes on: that same claim takes the wave's other jobs
    t = queue.task_state("t14")
    assert (t["state"], t["wave_state"]) == ("active", "running")
    assert sorted(j.job_id for j in second.jobs) == ["t14.1", "t14.2"]


@pytest.mark.parametrize("paused_by_operator_first", [False, True])
def test_resume_of_a_stopped_rollout_is_refused_until_continue(
        queue: Queue, paused_by_operator_first: bool) -> None:
    from scheduler.errors import TaskNotActiveError

    # Given a rollout stopped by its first wave's failure (the operator may have paused first)
    make_waves(queue, "t15", [[0, 1, 2], [3]], max_failures=5, max_running=1,
               policy={"max_failures": "33%"})
    [job] = queue.claim("w", 10).jobs
    if paused_by_operator_first:
        queue.pause("t15", "ops")
    queue.fail("w", job.job_id, job.token, JobResult(1), error="boom", retryable=False)
    t = queue.task_state("t15")
    assert (t["state"], t["wave_state"]) == ("paused", "stopped")
    assert ("wave_held" in t) is not paused_by_operator_first
    # Then resume is refused, naming the way on: the stopped wave's jobs stay held
    with pytest.raises(TaskNotActiveError, match=r"t15's rollout stopped at wave 1: "
                       r"`fleetsched tasks continue t15` goes on"):
        queue.resume("t15", "ops")
    assert queue.claim("w", 10).jobs == []
    # When the rollout is continued, resume works (continue does it when the stop paused)
    assert move(queue, "t15", 1, ["stopped"], "continued", "continue", operator="ops")
    queue.resume("t15", "ops")
    assert [j.job_id for j in queue.claim("w", 10).jobs] == ["t15.1"]


def test_retry_failed_after_an_abort_gives_the_rollout_back_to_the_controllers(
        queue: Queue, qclient: redis.Redis) -> None:

    # Given a rollout aborted by its first wave, dropped by the controller before the sweep
    make_waves(queue, "t16", [[0], [1, 2]], max_failures=1)
    [job] = queue.claim("w", 10).jobs
    assert queue.fail_job("w", job.job_id, job.token, JobResult(1), error="boom",
                          retryable=False).aborted
    assert rollout.step(queue, "t16", 0, no_check) == "left"
    # When the operator retries the failed job and it succeeds
    queue.retry_failed("t16", "ops")
    assert qclient.sismember(KEYS.waving, "t16")
    assert run_all(queue) == ["t16.0"]
    # Then the rollout goes on: wave 2 is released, not stranded
    assert rollout.step(queue, "t16", 0, no_check) == "released"
    assert run_all(queue) == ["t16.1", "t16.2"]


def test_a_count_limit_is_the_tasks_even_when_a_wave_is_smaller(queue: Queue) -> None:
    # Given --waves 1,100% --max-failures 2 (a count: the task's, not capped at the wave)
    make_waves(queue, "t17", [[0], [1, 2, 3]], max_failures=2, policy={"max_failures": "2"})
    [job] = queue.claim("w", 10).jobs
    queue.fail("w", job.job_id, job.token, JobResult(1), error="boom", retryable=False)
    t = queue.task_state("t17")
    assert (t["state"], t["wave_state"], t["wave_limit"]) == ("active", "running", "2")
