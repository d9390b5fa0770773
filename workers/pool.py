"""The master's child processes: start them up to the limit, place jobs, retire and kill them.

Responsibilities:

1. Start a child (``python -m workers.child``) when the placed jobs need more room than the
   running children have, up to ``NodeConfig.processes``; each child runs up to
   ``threads_per_process`` jobs.
2. Place jobs: a host's job goes to the child that last ran one on that host while that child
   has room (its SSH connection pool may hold the host's idle connection: no new handshake);
   any other job is packed onto the oldest child with room, so extra children fall idle and
   exit after ``idle_s`` (the first ``min_processes`` stay warm for the next due job).
3. One reader thread per child turns its messages into calls of ``on_done(child, outcomes)``
   and, at end-of-file, ``on_exit(child)`` (whatever the cause: stop, kill, crash). A pool may
   start its first children before the node that handles these exists (``fleetsched worker``
   boots them before loading the master): until ``attach`` gives the handlers, an exit is kept
   and handed over then (no job can be done before a node dispatched one).
4. Retire a child (no new jobs) whose job passed its timeout, and kill it once its other jobs
   are done or the grace period is over.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from workers.config import NodeConfig
from workers.protocol import DONE, INIT, READY, RUN, STOP, Order, Outcome

log = logging.getLogger(__name__)

# Hosts whose last child the master remembers (step 2); the oldest is forgotten first.
HOST_MEMORY = 10_000


@dataclass(eq=False)
class ChildHandle:
    """The master's view of one child process."""

    seq: int
    proc: subprocess.Popen
    conn: Connection
    capacity: int
    jobs: set[str] = field(default_factory=set)  # mutated under Slots.lock only
    retiring: bool = False
    retire_by: float | None = None  # monotonic time at which a retiring child is killed
    stopping: bool = False  # told to stop, or killed: expected to exit
    killed_because: str | None = None
    ready: bool = False
    exited: bool = False  # its reader saw end-of-file and reaped it
    idle_since: float = field(default_factory=time.monotonic)
    send_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def free(self) -> int:
        if self.retiring or self.stopping:
            return 0
        return self.capacity - len(self.jobs)

    def send(self, msg: Any, then: Callable[[], None] | None = None) -> bool:
        """Write ``msg``; False if the child is gone. ``then`` runs once it is written, before
        the reader can close the connection and report the child's exit."""
        with self.send_lock:
            try:
                self.conn.send(msg)
            except (OSError, ValueError):
                return False
            if then is not None:
                then()
            return True

    def kill(self, reason: str) -> None:
        """SIGKILL: the only way to stop a thread stuck in an action."""
        if self.killed_because is None:
            self.killed_because = reason
        self.stopping = True
        try:
            os.kill(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def describe_exit(self) -> str:
        code = self.proc.returncode
        if code is None:
            return "is gone"
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = f"signal {-code}"
            return f"was killed by {name}"
        return f"exited with status {code}"


OnDone = Callable[[ChildHandle, list[Outcome]], None]
OnExit = Callable[[ChildHandle], None]


class Pool:
    """Children of one master. Placement runs under the slots' lock (``lock``)."""

    def __init__(self, config: NodeConfig, lock: threading.RLock, on_done: OnDone | None = None,
                 on_exit: OnExit | None = None) -> None:
        self.config = config
        self.lock = lock
        self.on_done = on_done
        self.on_exit = on_exit
        self._early_exits: list[ChildHandle] = []  # exits before ``attach``
        self.children: list[ChildHandle] = []
        self._seq = 0
        self.started = 0
        self._last_child: OrderedDict[str, int] = OrderedDict()  # host -> child seq

    def attach(self, on_done: OnDone, on_exit: OnExit) -> None:
        """Give the handlers (step 3); exits seen before are handed over now."""
        with self.lock:
            self.on_done, self.on_exit = on_done, on_exit
            early, self._early_exits = self._early_exits, []
        for child in early:
            on_exit(child)

    # ---------------------------------------------------------------------------- starting

    def start_child(self) -> ChildHandle:
        parent_sock, child_sock = socket.socketpair()
        child_fd = child_sock.detach()
        try:
            proc = subprocess.Popen(
                [sys.executable, "-P", "-m", "workers.child", str(child_fd), str(os.getpid())],
                pass_fds=(child_fd,), stdin=subprocess.DEVNULL,
            )
        finally:
            os.close(child_fd)
        self._seq += 1
        self.started += 1
        child = ChildHandle(seq=self._seq, proc=proc, conn=Connection(parent_sock.detach()),
                            capacity=self.config.threads_per_process)
        child.send((INIT, self.config.settings, child.capacity, self.config.worker_id))
        self.children.append(child)
        threading.Thread(target=self._read_loop, args=(child,), name=f"child-{child.seq}",
                         daemon=True).start()
        log.debug("started child %s (pid %s)", child.seq, child.pid)
        return child

    def active(self) -> list[ChildHandle]:
        return [c for c in self.children if not c.retiring and not c.stopping]

    def ensure_warm(self) -> None:
        with self.lock:
            while len(self.active()) < min(self.config.min_processes, self.config.processes):
                self.start_child()

    def wait_ready(self, timeout: float, until: threading.Event | None = None) -> bool:
        """Wait until every child has said ``ready`` (or died); False after ``timeout``, or as
        soon as ``until`` is set."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not (until is not None and until.is_set()):
            with self.lock:
                if all(c.ready or c.exited for c in self.children):
                    return True
            time.sleep(0.01)
        return False

    # ---------------------------------------------------------------------------- placing

    def place(self, hosts: list[str]) -> list[ChildHandle]:
        """A child for each job, given each job's host, in order (see step 2); fewer when the
        children are full and no more may start (the caller checked the node's slots)."""
        out: list[ChildHandle] = []
        with self.lock:
            pending: dict[int, int] = {}
            active = self.active()

            def has_room(c: ChildHandle) -> bool:
                return c.free - pending.get(c.seq, 0) > 0

            for host in hosts:
                last = self._last_child.get(host)
                target = next((c for c in active if c.seq == last and has_room(c)), None) \
                    or next((c for c in active if has_room(c)), None)
                if target is None:
                    if len(active) >= self.config.processes:
                        break
                    target = self.start_child()
                    active.append(target)
                target.idle_since = time.monotonic()  # chosen: not idle, whatever tend() sees
                pending[target.seq] = pending.get(target.seq, 0) + 1
                out.append(target)
                self._last_child[host] = target.seq
                self._last_child.move_to_end(host)
                if len(self._last_child) > HOST_MEMORY:
                    self._last_child.popitem(last=False)
        return out

    def dispatch(self, child: ChildHandle, orders: list[Order],
                 delivered: Callable[[], None] | None = None) -> bool:
        """Send ``orders`` to ``child``; ``delivered`` runs once they are written (see send)."""
        child.idle_since = time.monotonic()
        return child.send((RUN, orders), delivered)

    # ---------------------------------------------------------------------------- retiring

    def retire(self, child: ChildHandle, grace_s: float) -> None:
        with self.lock:
            if not child.retiring:
                child.retiring = True
                child.retire_by = time.monotonic() + grace_s

    def tend(self, now: float, live_jobs: Callable[[ChildHandle], int]) -> None:
        """Kill retiring children that are done or out of time; stop children idle too long."""
        with self.lock:
            for c in list(self.children):
                if c.stopping:
                    continue
                if c.retiring:
                    if live_jobs(c) == 0 or (c.retire_by is not None and now >= c.retire_by):
                        c.kill("a job on it passed its timeout")
                    continue
                if c.jobs:
                    c.idle_since = now
                    continue
                warm = len(self.active()) <= self.config.min_processes
                if not warm and now - c.idle_since >= self.config.idle_s:
                    c.stopping = True
                    c.send((STOP,))

    def kill_all(self, reason: str) -> None:
        with self.lock:
            for c in self.children:
                c.kill(reason)

    def wait_all_exited(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not self.children:
                    return True
            time.sleep(0.01)
        return False

    def rss_bytes(self) -> int:
        """Resident memory of all children (from /proc), for stats and benchmarks."""
        with self.lock:
            pids = [c.pid for c in self.children]
        return sum(rss_of(p) for p in pids)

    # ---------------------------------------------------------------------------- reading

    def _read_loop(self, child: ChildHandle) -> None:
        try:
            while True:
                msg = child.conn.recv()
                if msg[0] == DONE:
                    assert self.on_done is not None  # no job is dispatched before ``attach``
                    self.on_done(child, msg[1])
                elif msg[0] == READY:
                    child.ready = True
        except (EOFError, OSError):
            pass
        child.stopping = True
        try:
            child.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            child.kill("it stopped answering")
            child.proc.wait()
        with child.send_lock:  # a dispatch in another thread must not write to a closed handle
            child.conn.close()
        with self.lock:
            child.exited = True
            if child in self.children:
                self.children.remove(child)
            on_exit = self.on_exit
            if on_exit is None:
                self._early_exits.append(child)
        if on_exit is not None:
            on_exit(child)


def rss_of(pid: int) -> int:
    """Resident set size of a process in bytes (0 if it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0
