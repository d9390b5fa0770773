"""kill -9 of a child process in the middle of its jobs, and of a whole node master.

Whatever is killed, no job is lost: every job ends acked, failed (as lost, when its action is
not idempotent) or is retried and then acked. Counted from the queue's own events.
"""

from __future__ import annotations

import os
import random
import signal
import time
import uuid
from pathlib import Path

import pytest

from scheduler.queue.client import Queue
from tests.faults.history import check_stream
from tests.worker_support import (
    KEYS,
    alive,
    claims_per_job,
    dump,
    events,
    final_outcomes,
    plugin_site,
    started_workers,
    submit,
    wait_until,
)


@pytest.fixture
def start_worker(redis_url: str, tmp_path: Path):
    with started_workers(redis_url, tmp_path) as start:
        yield start


def starts(marks: Path, job_ids: list[str]) -> list[int]:
    """How many times each job's action started (the jobs of ``submit``: host = task-h<i>)."""
    out = []
    for job in job_ids:
        task, i = job.split(".")
        path = marks / f"{task}-h{i}"
        out.append(len(path.read_text().splitlines()) if path.exists() else 0)
    return out


def test_killing_a_child_mid_job_reruns_idempotent_jobs_and_fails_the_others_as_lost(
        redis_client, start_worker, tmp_path: Path) -> None:
    # Given one node with one child running 2 idempotent and 2 non-idempotent jobs of 2 s
    marks = tmp_path / "marks"
    marks.mkdir()
    action = {"action": "mark-then-sleep", "params": {"dir": str(marks), "seconds": "2"}}
    idem = submit(redis_client, "11", 2, **action, idempotent=True)
    once = submit(redis_client, "12", 2, **action, idempotent=False)
    site = plugin_site(tmp_path / "plugin")
    w = start_worker("node-k", slots=4, processes=1, lease="2s", env={"PYTHONPATH": str(site)})
    jobs = idem + once
    wait_until(lambda: starts(marks, jobs) == [1, 1, 1, 1], 15, "all four running", w.tail, [w])
    (child,) = wait_until(w.children, 5, "the child process", w.tail)
    # When the child is killed with SIGKILL in the middle of them
    os.kill(child, signal.SIGKILL)
    wait_until(lambda: "open" not in final_outcomes(redis_client, jobs).values(), 20,
               "every job to end", lambda: w.tail() + dump(redis_client), [w])
    # Then the idempotent jobs ran again and were acked; the others failed as lost, for good
    outcome = final_outcomes(redis_client, jobs)
    assert [outcome[j] for j in idem] == ["acked", "acked"]
    assert [outcome[j] for j in once] == ["failed", "failed"]
    fails = {e["job"]: e["error"] for e in events(redis_client, ("fail",))}
    for j in once:
        assert fails[j].startswith("lost: its worker process") and "SIGKILL" in fails[j]
        assert "not idempotent" in fails[j]
    assert all(claims_per_job(redis_client)[j] == 2 for j in idem)
    assert all(claims_per_job(redis_client)[j] == 1 for j in once)
    assert starts(marks, idem) == [2, 2] and starts(marks, once) == [1, 1]
    # And the node went on with a new child
    later = submit(redis_client, "13", 2)
    wait_until(lambda: set(final_outcomes(redis_client, later).values()) == {"acked"}, 10,
               "later jobs acked", w.tail, [w])
    check_stream(redis_client)


def test_children_killed_at_any_moment_of_a_stream_of_jobs_never_run_a_job_twice_unknowingly(
        redis_client, start_worker, tmp_path: Path) -> None:
    """The kills land anywhere: before a child has its jobs, while it starts them, mid-run, as
    it reports. Whatever the moment, a job ends once, a non-idempotent job's action never runs
    twice, the node survives, and the history checker agrees."""
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    marks = tmp_path / "marks"
    marks.mkdir()
    action = {"action": "mark-then-sleep", "params": {"dir": str(marks), "seconds": "0.3"}}
    # Given a node (1 child, 4 slots) draining 2 tasks of 24 jobs: idempotent and not
    idem = submit(redis_client, "16", 24, **action, idempotent=True, max_attempts=10)
    once = submit(redis_client, "17", 24, **action, idempotent=False)
    site = plugin_site(tmp_path / "plugin")
    w = start_worker("node-n", slots=4, processes=1, lease="2s", env={"PYTHONPATH": str(site)})
    wait_until(lambda: claims_per_job(redis_client), 15, "a first claim", w.tail, [w])
    # When its child is killed -9 eight times at random moments
    kills = 0
    while kills < 8 and "open" in final_outcomes(redis_client, idem + once).values():
        time.sleep(rng.uniform(0.0, 0.4))
        children = [p for p in w.children() if b"workers.child" in _cmdline(p)]
        if children and alive(children[0]):
            os.kill(children[0], signal.SIGKILL)
            kills += 1
    wait_until(lambda: "open" not in final_outcomes(redis_client, idem + once).values(), 60,
               "every job to end", lambda: f"seed {seed}\n" + w.tail() + dump(redis_client), [w])
    # Then every job ended once; each non-idempotent action ran at most once, and exactly once
    # if its job was acked; every idempotent job was acked
    outcome = final_outcomes(redis_client, idem + once)
    ran = dict(zip(once, starts(marks, once), strict=True))
    assert all(n <= 1 for n in ran.values()), f"seed {seed}: {ran}"
    assert all(ran[j] == 1 for j in once if outcome[j] == "acked"), f"seed {seed}: {ran}"
    assert all(outcome[j] == "acked" for j in idem), f"seed {seed}: {outcome}"
    assert alive(w.proc.pid), w.tail()
    assert kills == 8
    check_stream(redis_client)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def test_killing_the_whole_master_gives_its_jobs_to_another_node_after_the_lease(
        redis_client, start_worker) -> None:
    # Given a node (lease 1 s) running 3 idempotent and 3 non-idempotent jobs of 3 s
    idem = submit(redis_client, "14", 3, options={"duration_ms": 3000}, idempotent=True)
    once = submit(redis_client, "15", 3, options={"duration_ms": 3000}, idempotent=False)
    a = start_worker("node-l", slots=6, processes=2, lease="1s")
    wait_until(lambda: len(claims_per_job(redis_client)) == 6, 15, "all six claimed", a.tail, [a])
    children = a.children()
    assert children
    # When the master is killed with SIGKILL
    a.kill9()
    # Then its children die with it (nobody renews their leases any more)
    wait_until(lambda: not any(alive(p) for p in children), 5, "the children to die")
    # And a second node takes the jobs over once the leases have expired
    b = start_worker("node-m", slots=6, processes=2, lease="1s")
    jobs = idem + once
    wait_until(lambda: "open" not in final_outcomes(redis_client, jobs).values(), 20,
               "every job to end", lambda: b.tail() + dump(redis_client), [b])
    outcome = final_outcomes(redis_client, jobs)
    assert all(outcome[j] == "acked" for j in idem)
    assert all(outcome[j] == "failed" for j in once)
    # Idempotent ones re-ran on the new node after a loss; the others failed as lost
    reclaims = [e for e in events(redis_client, ("claim",)) if e["worker"] == "node-m"]
    assert sorted(e["job"] for e in reclaims) == sorted(idem)
    assert {e["worker"] for e in events(redis_client, ("ack",))} == {"node-m"}
    lost = {e["job"] for e in events(redis_client, ("lost",))}
    assert lost == set(jobs)
    q = Queue(redis_client, KEYS)
    assert {q.job_state(j)["state"] for j in once} == {"failed"}
    # Nothing left anywhere: no job pending, running or forgotten
    assert all(redis_client.zcard(k) == 0 for k in KEYS.all_due())
    check_stream(redis_client)


def _processes_with(marker: str) -> list[int]:
    """Pids whose command line or environment holds ``marker`` (this test's own commands).

    The marker is a fresh random token: a short one (say ``10.29``) also matched unrelated
    processes, such as an sshd of the test fleet listening on 127.0.10.29."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue
        if (marker.encode() in cmdline or marker.encode() in environ) and alive(int(entry)):
            found.append(int(entry))
    return found


def _describe(pids: list[int]) -> str:
    """One line per pid: parent, process group, state and command line (for a failure)."""
    lines = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        lines.append(f"pid {pid} ppid {fields[1]} pgid {fields[2]} state {fields[0]}: {cmdline}")
    return "\n".join(lines)


@pytest.mark.parametrize("victim", ["child", "master", "sigterm", "timeout"])
def test_a_local_command_and_what_it_started_end_with_the_worker_that_started_them(
        redis_client, start_worker, victim: str) -> None:
    # Given a local command that starts a grandchild in its process group and waits on it
    marker = f"fleetsched-test-{uuid.uuid4().hex}"
    script = f"export FLEETSCHED_TEST_MARK={marker}; sleep 1000 & sleep 1001; wait"
    timeout_ms = 1_500 if victim == "timeout" else 60_000
    submit(redis_client, "16", 1, params={"cmd": ["sh", "-c", script]}, executor="local",
           idempotent=False, timeout_ms=timeout_ms)
    w = start_worker("node-p", slots=1, processes=1, lease="2s", grace="1s")
    wait_until(lambda: len(_processes_with(marker)) >= 3, 15,
               "the command and what it started", w.tail, [w])
    # When the worker that started them goes, in one of the ways a worker goes
    if victim == "child":
        (child,) = [p for p in w.children() if p in _processes_with("workers.child")]
        os.kill(child, signal.SIGKILL)
    elif victim == "master":
        w.kill9()
    elif victim == "sigterm":
        w.signal(signal.SIGTERM)
    # Then no process of the job is left running: a retry could not run beside an old copy
    wait_until(lambda: not _processes_with(marker), 10, "every process of the job to end",
               lambda: f"{_describe(_processes_with(marker))}\n{w.tail()}")
    check_stream(redis_client, require_end=False)
