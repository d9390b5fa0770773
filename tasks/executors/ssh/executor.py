"""The ``ssh`` executor: commands and files on a host over SSH (paramiko).

What it owns:

1. a session per job on a pooled, authenticated connection (``ssh_connect.connect`` checks the
   host key strictly before anything else happens);
2. ``run``: an argv list (run through ``sudo -n -u USER --`` when the host or task asks for
   become, or ``sudo -S`` fed the become password at its prompt, ``become.py``) quoted with ``shlex.join``, stdout and stderr drained together with a
   select on the channel (never ``recv_exit_status`` before draining), head and tail kept
   (each line also handed on as it comes while the job's output is followed, ``live.tap``),
   stdin fed as the window allows; at the timeout the remote process group gets SIGKILL (the
   ``signal`` channel request), the channel is closed and the result says ``timed_out``;
3. ``put``/``rename``/``remove`` over SFTP (``put`` narrows the mode before writing data); a
   host whose sshd has no ``sftp`` subsystem raises ``SftpUnavailableError`` (permanent), not
   ``HostUnreachableError``, unless its ``fleetsched_files=shell`` variable sends its files
   through the shell (``shellfiles.py``, as the login user like SFTP);
4. the pool: idle connections keyed by (user, address, port) and the jump hosts on the way,
   expired after ``idle_s``, dropped after a fork; a pooled connection found broken is
   replaced once, and only while nothing has been started on it;
5. hosts behind jump hosts (``jump.py``): their connections run over channels from the
   executor's :class:`~tasks.executors.ssh.tunnel.Bastions`, one login per bastion chain
   shared by all of them.
"""

from __future__ import annotations

import errno
import os
import select
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import paramiko
from paramiko.common import cMSG_CHANNEL_REQUEST
from paramiko.message import Message

from scheduler.config import Settings
from scheduler.errors import HostUnreachableError
from scheduler.redact import Redactor
from tasks.executors import live
from tasks.executors.capture import Capture
from tasks.executors.ssh import shellfiles
from tasks.executors.ssh.become import Become, Gate, become_of
from tasks.executors.ssh.connect import (
    Target,
    connect,
    file_transfer_of,
    load_ssh_config,
    resolve,
    ssh_options,
    start_sftp,
)
from tasks.executors.ssh.exitsignal import exit_signal
from tasks.executors.ssh.tunnel import Bastions
from tasks.host import CommandResult, Host

CHUNK = 64 * 1024
POLL_S = 0.5  # longest wait between checks of the transport while a command runs
# The remote shell announces its pid (= the session's process group) on stderr first, so a
# timed-out command can be killed with its children even where sshd refuses "signal" requests
# (OpenSSH does for root logins). The line is removed from the captured stderr.
PGID_MARK = b"fleetsched-pgid="
PGID_PREFIX = "printf 'fleetsched-pgid=%s\\n' \"$$\" >&2; "


class PgidFilter:
    """Takes the pid announcement off the front of stderr; passes everything else on."""

    def __init__(self, sink: Capture) -> None:
        self.sink = sink
        self.pgid: int | None = None
        self._buf: bytearray | None = bytearray()

    def feed(self, data: bytes) -> None:
        if self._buf is None:
            self.sink.feed(data)
            return
        self._buf += data
        if not PGID_MARK.startswith(bytes(self._buf[:len(PGID_MARK)])):
            self.flush()  # something else came first (a noisy .bashrc): no pid for us
            return
        end = self._buf.find(b"\n")
        if end < 0:
            if len(self._buf) > 64:
                self.flush()
            return
        digits = bytes(self._buf[len(PGID_MARK):end])
        if digits.isdigit():
            self.pgid = int(digits)
            rest = bytes(self._buf[end + 1:])
        else:
            rest = bytes(self._buf)
        self._buf = None
        self.sink.feed(rest)

    def flush(self) -> None:
        if self._buf is not None:
            data, self._buf = bytes(self._buf), None
            self.sink.feed(data)


@dataclass
class Connection:
    """One authenticated transport and its SFTP client, as the pool holds it; ``release``
    gives back its hold on the jump hosts it runs through, once it is closed."""

    key: tuple[Any, ...]
    transport: paramiko.Transport
    reused: bool = False
    broken: bool = False
    last_used: float = field(default_factory=time.monotonic)
    sftp: paramiko.SFTPClient | None = None
    release: Callable[[], None] | None = None

    def healthy(self) -> bool:
        return not self.broken and self.transport.is_active()

    def close(self) -> None:
        try:
            if self.sftp is not None:
                self.sftp.close()
        finally:
            self.transport.close()
            release, self.release = self.release, None
            if release is not None:
                release()


class Pool:
    """Idle connections by (user, address, port); a checked-out connection is exclusive."""

    def __init__(self, idle_s: float, max_idle_per_key: int = 8) -> None:
        self.idle_s = idle_s
        self.max_idle_per_key = max_idle_per_key
        self._lock = threading.Lock()
        self._idle: dict[tuple[Any, ...], list[Connection]] = {}
        self._pid = os.getpid()

    def _after_fork(self) -> None:
        # A forked child shares the parent's sockets: forget them, never use or close them.
        if self._pid != os.getpid():
            self._idle = {}
            self._pid = os.getpid()

    def take(self, key: tuple[Any, ...]) -> Connection | None:
        stale: list[Connection] = []
        found = None
        with self._lock:
            self._after_fork()
            now = time.monotonic()
            conns = self._idle.get(key, [])
            while conns:
                conn = conns.pop()
                if now - conn.last_used <= self.idle_s and conn.healthy():
                    found = conn
                    break
                stale.append(conn)
        for conn in stale:
            conn.close()
        if found is not None:
            found.reused = True
        return found

    def give(self, conn: Connection) -> None:
        if not conn.healthy():
            conn.close()
            return
        conn.last_used = time.monotonic()
        evicted: list[Connection] = []
        with self._lock:
            self._after_fork()
            conns = self._idle.setdefault(conn.key, [])
            conns.append(conn)
            while len(conns) > self.max_idle_per_key:
                evicted.append(conns.pop(0))
            for key, others in self._idle.items():
                expired = [c for c in others if conn.last_used - c.last_used > self.idle_s]
                evicted += expired
                self._idle[key] = [c for c in others if c not in expired]
        for old in evicted:
            old.close()

    def close_all(self) -> None:
        with self._lock:
            self._after_fork()
            conns = [c for cs in self._idle.values() for c in cs]
            self._idle = {}
        for conn in conns:
            conn.close()

    def idle_count(self) -> int:
        with self._lock:
            return sum(len(cs) for cs in self._idle.values())


class SshSession:
    """Operations on one host over one connection (see the module docstring)."""

    def __init__(self, executor: "SshExecutor", target: Target, conn: Connection,
                 become: Become | None = None, files: str = "sftp") -> None:
        self.executor = executor
        self.target = target
        self.conn = conn
        self.become = become
        self.files = files  # "sftp", or "shell" for a host without SFTP (shellfiles.py)

    # ----------------------------------------------------------------------------- channels

    def _reconnect_once(self, exc: BaseException) -> None:
        """A pooled connection died while idle: replace it, once; a fresh one failing is real."""
        if not self.conn.reused:
            raise HostUnreachableError(f"connection to {self.target.where} failed: "
                                       f"{exc or type(exc).__name__}") from None
        self.conn.broken = True
        self.conn.close()
        self.conn = self.executor.connect(self.target)

    def _open_channel(self) -> paramiko.Channel:
        timeout = self.executor.options["connect_timeout"]
        try:
            return self.conn.transport.open_session(timeout=timeout)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            self._reconnect_once(exc)
        try:
            return self.conn.transport.open_session(timeout=timeout)
        except (paramiko.SSHException, EOFError, OSError) as exc:
            self.conn.broken = True
            raise HostUnreachableError(f"cannot open a channel to {self.target.where}: "
                                       f"{exc or type(exc).__name__}") from None

    def _sftp(self) -> paramiko.SFTPClient:
        """The connection's SFTP client, started once. A host that cannot be reached raises
        ``HostUnreachableError``; a reachable one whose sshd refuses (or at once ends) the
        ``sftp`` subsystem raises ``SftpUnavailableError``: not a reachability problem, and
        not one a retry cures."""
        if self.conn.sftp is not None:
            return self.conn.sftp
        try:
            self.conn.sftp = start_sftp(self._open_channel(), self.target.where)
        except HostUnreachableError:
            self.conn.broken = True
            raise
        return self.conn.sftp

    # ---------------------------------------------------------------------------- commands

    def run(self, argv: list[str], timeout: float, stdin: bytes | None = None) -> CommandResult:
        """Run ``argv`` on the host; see the module docstring for capture and timeout."""
        if not argv:
            raise ValueError("argv must not be empty")
        if self.become is not None:
            gates: list[Gate] = []
            result = self._run(self.become.wrap(argv), timeout, stdin, self.become, gates)
            return self.become.check(result, gates[0] if gates else None)
        return self._run(argv, timeout, stdin)

    def _run(self, argv: list[str], timeout: float, stdin: bytes | None,
             become: Become | None = None, gates: list[Gate] | None = None) -> CommandResult:
        command = shlex.join(argv)
        cap = self.executor.options["capture_bytes"]
        out, err = Capture(cap, cap), Capture(cap, cap)
        start = time.monotonic()
        deadline = start + timeout
        chan = self._open_channel()
        try:
            gate = become.gate(err) if become is not None else None
            if gate is not None and gates is not None:
                gates.append(gate)
            errf = PgidFilter(gate or err)  # type: ignore[arg-type]
            feed = _Feed(stdin, gate, become.password if become is not None else None)
            try:
                chan.exec_command(PGID_PREFIX + command)
            except (paramiko.SSHException, EOFError, OSError) as exc:
                self.conn.broken = True
                return _result(command, None, out, err, start,
                               error=f"connection to {self.target.where} lost while starting "
                                     f"the command ({exc}); it may or may not have started")
            done_streaming = live.tap(out, err)  # lines followed live (``tasks output --follow``)
            try:
                finished = _pump(chan, feed, out, errf, deadline)
                errf.flush()
                if gate is not None:
                    gate.flush()
            finally:
                done_streaming()
            if not finished or not chan.status_event.wait(max(0.0, deadline - time.monotonic())):
                self._kill(chan, errf.pgid)
                return _result(command, None, out, err, start, timed_out=True)
            if not self.conn.transport.is_active():
                self.conn.broken = True
            code = chan.exit_status
            signal = exit_signal(chan)
            if code < 0 and signal is not None:
                return _result(command, None, out, err, start,
                               error=f"killed by signal {signal} on {self.target.where}")
            if code < 0:
                why = ("the connection was lost" if self.conn.broken
                       else "the command ended without an exit status (killed by a signal?)")
                return _result(command, None, out, err, start,
                               error=f"{why} on {self.target.where}")
            return _result(command, code, out, err, start)
        finally:
            chan.close()

    def _kill(self, chan: paramiko.Channel, pgid: int | None) -> None:
        """SIGKILL a timed-out command's process group: by request, and by ``kill`` if known."""
        _signal(chan, "KILL")
        chan.close()
        if pgid is None or pgid <= 1:
            return
        try:
            killer = self.conn.transport.open_session(timeout=self.executor.options["connect_timeout"])
            killer.exec_command(f"kill -KILL -- -{pgid} 2>/dev/null; true")
            killer.status_event.wait(self.executor.options["connect_timeout"])
            killer.close()
        except (paramiko.SSHException, EOFError, OSError):
            self.conn.broken = True

    # ------------------------------------------------------------------------------- files

    def put(self, data: bytes, remote_path: str, mode: int = 0o600) -> None:
        """Write ``data`` to ``remote_path`` with ``mode`` (set before any byte is written)."""
        if self.files == "shell":
            shellfiles.put(self._run, data, remote_path, mode)
            return
        sftp = self._sftp()
        with sftp.open(remote_path, "wb") as f:
            f.chmod(mode)
            f.set_pipelined(True)
            f.write(data)

    def rename(self, src: str, dst: str) -> None:
        """Atomic replace (``posix-rename@openssh.com``; ``mv -f`` through the shell)."""
        if self.files == "shell":
            shellfiles.rename(self._run, src, dst)
            return
        self._sftp().posix_rename(src, dst)

    def remove(self, remote_path: str) -> None:
        if self.files == "shell":
            shellfiles.remove(self._run, remote_path)
            return
        try:
            self._sftp().remove(remote_path)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise


class _Feed:
    """What a command's stdin gets, and when. Without a gate: ``stdin``, at once. With one (a
    become password, ``become.py`` point 4): nothing until sudo's prompt shows on stderr, then
    the password and a newline; ``stdin`` once the start mark says the command runs; nothing
    more once sudo asks a second time (a wrong password: it then reads end-of-file)."""

    def __init__(self, stdin: bytes | None, gate: Gate | None, password: str | None) -> None:
        self.stdin = stdin or b""
        self.gate = gate
        self.password = password
        self.stage = "stdin" if gate is None else "prompt"  # prompt -> password -> stdin
        self.pending = memoryview(self.stdin if gate is None else b"")
        self.over = False

    def now(self) -> memoryview:
        """What may be written now (possibly empty)."""
        gate = self.gate
        if gate is not None and not self.over:
            if gate.refused:
                self.pending, self.over = memoryview(b""), True
            elif self.stage == "prompt" and gate.prompts and self.password is not None:
                self.pending = memoryview((self.password + "\n").encode())
                self.stage = "password"
            elif self.stage != "stdin" and gate.started and not self.pending:
                self.pending, self.stage = memoryview(self.stdin), "stdin"
        return self.pending

    def sent(self, n: int) -> None:
        self.pending = self.pending[n:]

    def stop(self) -> None:
        """The remote closed its stdin: nothing more is written."""
        self.pending, self.over = memoryview(b""), True

    def done(self) -> bool:
        """Everything written: the channel's write side may be shut."""
        return self.over or (self.stage == "stdin" and not self.pending)


def _pump(chan: paramiko.Channel, feed: _Feed, out: Capture, err: PgidFilter,
          deadline: float) -> bool:
    """Drain stdout and stderr together until EOF, writing stdin as ``feed`` allows; False if
    the deadline came first."""
    chan.setblocking(False)
    shut = False
    fd = chan.fileno()  # readable whenever either stream has data, or at EOF/close
    while True:
        while chan.recv_ready():
            out.feed(chan.recv(CHUNK))
        while chan.recv_stderr_ready():
            err.feed(chan.recv_stderr(CHUNK))
        pending = feed.now() if not shut else memoryview(b"")
        if pending and chan.send_ready():
            try:
                feed.sent(chan.send(bytes(pending[:CHUNK])))
            except (OSError, paramiko.SSHException):  # the remote closed its stdin
                feed.stop()
            pending = feed.now()
        if not shut and feed.done():
            chan.shutdown_write()
            shut = True
        if (chan.eof_received or chan.closed) and not chan.recv_ready() \
                and not chan.recv_stderr_ready():
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        wait = min(remaining, 0.01 if pending and not shut else POLL_S)
        select.select([fd], [], [], wait)


def _signal(chan: paramiko.Channel, name: str) -> None:
    """Best effort ``signal`` request (RFC 4254 6.9); OpenSSH kills the process group."""
    if chan.closed or not chan.transport or not chan.transport.is_active():
        return
    m = Message()
    m.add_byte(cMSG_CHANNEL_REQUEST)
    m.add_int(chan.remote_chanid)
    m.add_string("signal")
    m.add_boolean(False)
    m.add_string(name)
    try:
        chan.transport._send_user_message(m)  # paramiko has no public API for this request
    except (paramiko.SSHException, EOFError, OSError):
        pass


def _result(command: str, code: int | None, out: Capture, err: Capture, start: float,
            timed_out: bool = False, error: str | None = None) -> CommandResult:
    return CommandResult(
        command=command, exit_code=code, stdout_head=out.head, stdout_tail=out.tail,
        stderr_head=err.head, stderr_tail=err.tail, stdout_bytes=out.total,
        stdout_cut=out.cut, stderr_cut=err.cut,
        stderr_bytes=err.total, duration_s=time.monotonic() - start, timed_out=timed_out,
        error=error,
    )


class SshExecutor:
    """Opens :class:`SshSession` objects on pooled connections."""

    name = "ssh"

    def __init__(self, options: Mapping[str, Any] | None = None,
                 settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.options = ssh_options(options, self.settings)
        self.pool = Pool(self.options["idle_s"])
        self.bastions = Bastions(self.settings.known_hosts, self.options)
        self._config = load_ssh_config(self.settings.ssh_config)

    def target(self, host: Host) -> Target:
        return resolve(host, self._config, self.options, self.settings.ssh_config)

    def connect(self, target: Target) -> Connection:
        """A new authenticated connection (host key checked first), through the target's
        jump hosts if it has any."""
        chan, release = self.bastions.open(target) if target.via else (None, None)
        try:
            transport = connect(target, self.settings.known_hosts, self.options, sock=chan)
        except BaseException:
            if chan is not None:
                chan.close()
            if release is not None:
                release()
            raise
        if self.options["keepalive_s"]:
            transport.set_keepalive(self.options["keepalive_s"])
        return Connection(key=target.pool_key, transport=transport, release=release)

    @contextmanager
    def session(self, host: Host, redactor: Redactor | None = None) -> Iterator[SshSession]:
        """A session on ``host``; a become password is read now and taught to ``redactor``."""
        target = self.target(host)
        # a refused become method, or a literal become password, fails before connecting
        become = become_of(host, self.options, redactor)
        files = file_transfer_of(host)
        conn = (self.pool.take(target.pool_key) if self.options["pool"] else None) \
            or self.connect(target)
        session = SshSession(self, target, conn, become, files)
        try:
            yield session
        finally:
            if self.options["pool"]:
                self.pool.give(session.conn)
            else:
                session.conn.close()

    def close(self) -> None:
        self.pool.close_all()
        self.bastions.close_all()


__all__ = ["Connection", "Pool", "SshExecutor", "SshSession"]
