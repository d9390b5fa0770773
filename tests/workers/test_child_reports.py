"""How a child process sends outcomes to its master (workers.child.Child.report): the job
threads send themselves, one at a time, and an outcome finished while another thread sends is
carried by that thread. Every outcome must reach the master exactly once, however the threads
interleave: a lost one would leave its job running until its lease ran out."""

from __future__ import annotations

import socket
import threading
import time
from multiprocessing.connection import Connection

from workers.child import Child
from workers.protocol import DONE, Outcome


class SlowConnection(Connection):
    """A send that takes a while: outcomes pile up while one is under way (the race to win)."""

    def send(self, obj: object) -> None:
        time.sleep(0.001)
        super().send(obj)


def outcome(i: int) -> Outcome:
    return Outcome(f"7.{i}", 1, True, 0, 1, "", None, False, 0.0)


def test_outcomes_reported_from_many_threads_at_once_each_reach_the_master_once() -> None:
    ours, theirs = socket.socketpair()
    master, child_end = Connection(ours.detach()), SlowConnection(theirs.detach())
    child = Child(child_end)
    threads, per_thread = 16, 100
    start = threading.Barrier(threads)

    def job_thread(t: int) -> None:
        start.wait()
        for k in range(per_thread):
            child.report(outcome(t * per_thread + k))

    workers = [threading.Thread(target=job_thread, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    got: list[str] = []
    messages = 0
    while len(got) < threads * per_thread:
        assert master.poll(10), f"only {len(got)} outcomes arrived"
        kind, batch = master.recv()
        assert kind == DONE and batch
        got += [o.job_id for o in batch]
        messages += 1
    for w in workers:
        w.join()
    assert sorted(got) == sorted(f"7.{i}" for i in range(threads * per_thread))
    assert not master.poll(0.2)  # and nothing twice
    assert messages < threads * per_thread  # outcomes finished during a send share a message
    master.close()
    child_end.close()


class GatedConnection(Connection):
    """The first send waits at a gate: a job thread caught mid-send, deterministically."""

    def __init__(self, handle: int) -> None:
        super().__init__(handle)
        self.in_send, self.gate = threading.Event(), threading.Event()

    def send(self, obj: object) -> None:
        if not self.gate.is_set():
            self.in_send.set()
            assert self.gate.wait(10)
        super().send(obj)


def test_an_outcome_finished_while_another_thread_sends_is_sent_by_that_thread() -> None:
    ours, theirs = socket.socketpair()
    master, child_end = Connection(ours.detach()), GatedConnection(theirs.detach())
    child = Child(child_end)
    # Given a job thread caught in the middle of sending its outcome
    first = threading.Thread(target=child.report, args=(outcome(1),))
    first.start()
    assert child_end.in_send.wait(10)
    # When another job finishes meanwhile: its thread leaves the sending to the first
    second = threading.Thread(target=child.report, args=(outcome(2),))
    second.start()
    second.join(5)
    assert not second.is_alive()
    # Then once the first send is through, the first thread sends the second outcome too
    child_end.gate.set()
    first.join(5)
    got = []
    while master.poll(1):
        got += [o.job_id for o in master.recv()[1]]
    assert got == ["7.1", "7.2"]
    master.close()
    child_end.close()


def test_an_outcome_that_cannot_be_pickled_fails_its_job_and_the_rest_of_its_batch_goes(
        caplog) -> None:
    ours, theirs = socket.socketpair()
    master, child_end = Connection(ours.detach()), Connection(theirs.detach())
    child = Child(child_end)
    # Given a good outcome waiting, and a plugin's result that pickle refuses (a lock)
    child.finished.put(outcome(1))
    odd = outcome(2)._replace(exit_code=threading.Lock())
    # When both go in one batch
    child.report(odd)
    got = []
    while master.poll(1):
        got += master.recv()[1]
    # Then the good one arrives as it was, and the odd one as a failure that says why
    assert [(o.job_id, o.ok) for o in got] == [("7.1", True), ("7.2", False)]
    assert got[1].error.startswith("the job's outcome could not be sent to the master: "
                                   "TypeError")
    assert got[1].retryable is False
    assert "7.2: its outcome cannot be sent to the master" in caplog.text
    assert child.finished.empty()
    master.close()
    child_end.close()
