"""A child process of the node master: runs jobs in threads and reports outcomes in batches.

Started by the master as ``python -m workers.child <fd> <master pid>`` with one end of a
socketpair as ``<fd>``. Responsibilities:

1. Die with the master: ``PR_SET_PDEATHSIG`` on Linux, and end-of-file on the socket anywhere
   (a child must never keep running jobs whose leases nobody renews).
2. Leave SIGINT and SIGTERM to the master (a Ctrl-C reaches the whole process group; the master
   decides what happens to running jobs).
3. Load the actions before saying ``ready``, and the executors (paramiko for SSH: about 0.1 s)
   in a thread right after, so the node's first claim does not wait for them and no job due
   later pays for imports (one that comes sooner waits for the import in progress).
4. Count a job's timeout from when the master placed it, as the master's deadline does: a job
   that reaches a child still starting has its timeout shortened by the delay, or, when the
   delay took all of it, is failed as never started (retryable: it did not run).
5. Start every order it receives at once in a thread pool sized by the master (the master
   never sends more than the child's share of slots).
6. Send outcomes back in batches, from the job threads themselves: a job thread that finds no
   send under way sends everything finished so far in one message (a burst of short jobs costs
   one pickle and one write); one that finds a send under way leaves its outcome to it.
7. Publish the lines its jobs print as they print them (``workers.liveout``, one thread): the
   one thing a child writes to Redis itself, best effort, never in a job's way.
"""

from __future__ import annotations

import ctypes
import logging
import os
import queue
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection

from scheduler.config import Settings
from scheduler.logs import configure
from scheduler.redact import LockedRedactor, RedactingFilter, UrlRedactingFilter
from workers.protocol import DONE, INIT, READY, RUN, STOP, Order, Outcome
from workers.runner import Runner

PR_SET_PDEATHSIG = 1

START_SLACK_S = 0.1
"""A job that starts later than this after the master placed it (a child still starting) runs
with its timeout shortened by the delay; a normal hand-off takes a millisecond or two."""


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process when the master dies; exit now if it already has."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the end-of-file check below still ends us
    if os.getppid() != parent_pid:
        os._exit(0)


class Child:
    """The receiving loop and the job threads of one child process."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.finished: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
        self._sending = threading.Lock()

    def serve(self) -> None:
        msg = self.conn.recv()
        if msg[0] != INIT:
            raise SystemExit(f"first message must be {INIT!r}, got {msg[0]!r}")
        _, settings, threads, worker = msg
        from workers.liveout import Publisher

        runner = Runner(settings, log_through_redactor(settings, worker), Publisher(settings))
        load_actions()
        warm = threading.Event()  # jobs wait for it: no import runs in two threads at once

        def warm_up() -> None:
            try:
                load_executors()
            finally:
                warm.set()

        threading.Thread(target=warm_up, name="warm-up", daemon=True).start()
        # One thread more than the child's share of slots: a job thread still sending its
        # batch must not hold up the next order.
        pool = ThreadPoolExecutor(max_workers=threads + 1, thread_name_prefix="job")
        self.conn.send((READY, os.getpid()))

        def run_one(order: Order) -> None:
            warm.wait()
            late = time.monotonic() - order.placed if order.placed else 0.0
            if late > START_SLACK_S:
                # The job's time runs from its placing, as the master's deadline counts it: a
                # child still starting, or still loading its executors, took some of it.
                if late >= order.timeout_s:
                    self.report(Outcome(
                        order.job_id, order.token, False, None, 0, "",
                        f"its timeout ({order.timeout_s:g}s) passed before it could start: "
                        f"the child process was still starting; never started", True, 0))
                    return
                order = order._replace(timeout_s=order.timeout_s - late)
            try:
                outcome = runner.run(order)
            except BaseException as exc:  # noqa: BLE001 - report, never lose a job silently
                outcome = Outcome(order.job_id, order.token, False, None, 0, "",
                                  f"{type(exc).__name__}: {exc}", True, 0)
            self.report(outcome)

        while True:
            try:
                msg = self.conn.recv()
            except (EOFError, OSError):
                os._exit(0)  # the master is gone: nobody would renew these leases
            kind = msg[0]
            if kind == RUN:
                for order in msg[1]:
                    pool.submit(run_one, order)
            elif kind == STOP:
                os._exit(0)

    def report(self, outcome: Outcome) -> None:
        """Send ``outcome`` to the master, with whatever else finished meanwhile.

        An outcome put while another thread sends is sent by that thread: it looks at the queue
        again after every send, and an outcome put while the lock is held is in the queue by
        the time the holder looks (a sender thread would cost a thread hand-off per job)."""
        self.finished.put(outcome)
        while not self.finished.empty() and self._sending.acquire(blocking=False):
            try:
                batch = []
                while True:
                    try:
                        batch.append(self.finished.get_nowait())
                    except queue.Empty:
                        break
                if batch:
                    self._send(batch)
            finally:
                self._sending.release()

    def _send(self, batch: list[Outcome]) -> None:
        """One ``done`` message; an outcome that cannot be pickled (a plugin's odd result) is
        sent as a failure saying so, and the rest of its batch still goes."""
        try:
            self.conn.send((DONE, batch))
            return
        except OSError:
            os._exit(0)  # the master is gone: nobody would renew these leases
        except Exception:  # noqa: BLE001 - pickling: nothing was written; send one by one
            pass
        for o in batch:
            try:
                self.conn.send((DONE, [o]))
            except OSError:
                os._exit(0)
            except Exception as exc:  # noqa: BLE001 - report it in a form that travels
                logging.getLogger(__name__).error("job %s: its outcome cannot be sent to the "
                                                  "master (%s); reported as failed", o.job_id, exc)
                self._send_plain(o, f"the job's outcome could not be sent to the master: "
                                    f"{type(exc).__name__}: {exc}")

    def _send_plain(self, o: Outcome, error: str) -> None:
        try:
            self.conn.send((DONE, [Outcome(str(o.job_id), int(o.token), False, None, 0, "",
                                           error[:2000], False, 0)]))
        except OSError:
            os._exit(0)


def load_actions() -> None:
    """Load the actions (plugins included) now, not on the first due job."""
    from tasks.registry import registry

    registry()


def load_executors() -> None:
    """Load the executors now, not on the first due job."""
    import importlib

    modules = {"simulate": "tasks.executors.simulate", "local": "tasks.executors.local",
               "ssh": "tasks.executors.ssh.executor"}
    for name, module in modules.items():
        try:
            importlib.import_module(module)
        except ImportError as exc:  # reported by the first job that needs it
            logging.getLogger(__name__).warning("executor %s cannot be loaded: %s", name, exc)


def log_through_redactor(settings: Settings, worker: str) -> LockedRedactor:
    """Log to stderr (the master's) in the node's format (``scheduler.logs``), masking every
    secret any job of this child resolved and the credentials of the Redis and database URLs
    (``UrlRedactingFilter``)."""
    redactor = LockedRedactor()
    configure(settings.log_level, settings.log_format,
              [RedactingFilter(redactor), UrlRedactingFilter(settings)],
              static={"worker": worker}, prefix=f"child[{os.getpid()}] ")
    return redactor


def _leave_to_the_master(_signum: int, _frame: object) -> None:
    """SIGINT and SIGTERM are the master's to act on (see the module docstring)."""


def main(argv: list[str]) -> None:
    fd, parent_pid = int(argv[1]), int(argv[2])
    die_with_parent(parent_pid)
    # Caught, not ignored: an ignored signal stays ignored in every program a job starts (and
    # a shell cannot trap it again), while a caught one is reset to its default at exec.
    signal.signal(signal.SIGINT, _leave_to_the_master)
    signal.signal(signal.SIGTERM, _leave_to_the_master)
    Child(Connection(fd)).serve()


if __name__ == "__main__":
    main(sys.argv)
