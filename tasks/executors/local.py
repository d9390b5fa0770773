"""The ``local`` executor: run a process on the worker node itself.

For actions that drive a host from the worker (``ansible-playbook -l web-07 ...``). What it
owns:

1. running an argv list with no shell, in its own process group (``start_new_session``),
   under a guard that kills the group when the worker process running the job dies
   (``guarded``: ``setpriv --pdeathsig``), so no command outlives its worker;
2. reading stdout and stderr at once (a selector, no threads), writing stdin as it drains, so
   no amount of output can deadlock; keeping head and tail (``capture.Capture``), and handing
   each line on as it comes while the job's output is followed (``live.tap``);
3. a timeout that kills the whole process group (``killpg`` SIGKILL) and reports
   ``timed_out=True``;
4. ``put``/``rename``/``remove`` on the worker's own filesystem.

A program that cannot be started reports exit code 127 (as a shell would); one killed by a
signal reports ``128 + signal``.
"""

from __future__ import annotations

import functools
import os
import selectors
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from scheduler.config import Settings
from tasks.executors import live
from tasks.executors.capture import CAP_BYTES, Capture
from tasks.executors.options import EXECUTOR_DEFAULTS, read_options
from tasks.host import CommandResult, Host

DEFAULTS = EXECUTOR_DEFAULTS["local"]
CHUNK = 64 * 1024


# Nothing a command starts may outlive the worker process that started it (a retry would run a
# second copy beside the first). The command runs under a guard: `setpriv --pdeathsig TERM`
# has the kernel send SIGTERM to the guard when its parent (the worker child running the job)
# dies, whatever killed it (kill -9 of the child, of the master, a timeout, SIGTERM); the guard,
# sh leading the command's own process group, then kills that whole group. A guard whose parent
# is already gone when it starts kills the group at once.
GUARD_SCRIPT = (
    'trap "trap - TERM; kill -KILL 0" TERM; '
    '[ "$PPID" = "$FLEETSCHED_GUARD_PARENT" ] || kill -KILL 0; '
    'exec 3<&0; "$@" <&3 3<&- & wait $!'
)


@functools.cache
def _setpriv() -> str | None:
    return shutil.which("setpriv")


def guarded(argv: list[str]) -> list[str]:
    """``argv`` under the death-signal guard (unchanged where ``setpriv`` is missing)."""
    setpriv = _setpriv()
    if setpriv is None:
        return argv
    return [setpriv, "--pdeathsig", "TERM", "--", "/bin/sh", "-c", GUARD_SCRIPT, "sh", *argv]


def _unstartable(program: str, cwd: str | None, path: str | None) -> str | None:
    """Why ``program`` cannot be executed, or None (found the way execvp finds it)."""
    if "/" in program:
        where = os.path.join(cwd or "", program)
        if not os.path.exists(where):
            return "No such file or directory"
        return None if os.access(where, os.X_OK) and not os.path.isdir(where) else "Permission denied"
    return None if shutil.which(program, path=path) else "No such file or directory"


def run_process(argv: list[str], timeout: float, stdin: bytes | None = None, *,
                cwd: str | None = None, env: Mapping[str, str] | None = None,
                capture_bytes: int = CAP_BYTES) -> CommandResult:
    """Run ``argv`` (no shell) with a timeout that kills its whole process group."""
    if not argv:
        raise ValueError("argv must not be empty")
    command = shlex.join(argv)
    out, err = Capture(capture_bytes, capture_bytes), Capture(capture_bytes, capture_bytes)
    start = time.monotonic()
    env = {**(os.environ if env is None else env), "FLEETSCHED_GUARD_PARENT": str(os.getpid())}
    problem = _unstartable(argv[0], cwd, env.get("PATH"))
    if problem is not None:  # said as exec would say it, not as the guard's shell would
        err.feed(f"{argv[0]}: {problem}\n".encode())
        return _result(command, 127, out, err, time.monotonic() - start)
    try:
        proc = subprocess.Popen(
            guarded(argv), stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd or None, env=env,
            start_new_session=True,
        )
    except OSError as exc:
        err.feed(f"{argv[0]}: {exc.strerror or exc}\n".encode())
        return _result(command, 127, out, err, time.monotonic() - start)
    done_streaming = live.tap(out, err)  # lines followed live (``tasks output --follow``)
    try:
        timed_out = not _pump(proc, stdin, out, err, start + timeout)
    finally:
        done_streaming()
    if not timed_out:
        try:
            proc.wait(timeout=max(0.0, start + timeout - time.monotonic()))
        except subprocess.TimeoutExpired:
            timed_out = True
    if timed_out:
        _kill_group(proc)
        return _result(command, None, out, err, time.monotonic() - start, timed_out=True)
    code = proc.returncode
    return _result(command, code if code >= 0 else 128 - code, out, err,
                   time.monotonic() - start)


def _pump(proc: subprocess.Popen, stdin: bytes | None, out: Capture, err: Capture,
          deadline: float) -> bool:
    """Move data until both output pipes are closed; False if the deadline passed first."""
    assert proc.stdout is not None and proc.stderr is not None
    sel = selectors.DefaultSelector()
    sinks = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    for fd in sinks:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    pending = memoryview(stdin or b"")
    if proc.stdin is not None:
        os.set_blocking(proc.stdin.fileno(), False)
        if pending:
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
    try:
        while sinks:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            for key, _ in sel.select(remaining):
                fd = key.fd
                if fd in sinks:
                    data = os.read(fd, CHUNK)
                    if data:
                        sinks[fd].feed(data)
                    else:
                        sel.unregister(fd)
                        del sinks[fd]
                else:
                    assert proc.stdin is not None
                    try:
                        pending = pending[os.write(fd, pending[:CHUNK]):]
                    except BrokenPipeError:
                        pending = memoryview(b"")
                    if not pending:
                        sel.unregister(fd)
                        proc.stdin.close()
        return True
    finally:
        sel.close()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None and not stream.closed:
                stream.close()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _result(command: str, code: int | None, out: Capture, err: Capture, duration: float,
            timed_out: bool = False) -> CommandResult:
    return CommandResult(
        command=command, exit_code=code, stdout_head=out.head, stdout_tail=out.tail,
        stderr_head=err.head, stderr_tail=err.tail, stdout_bytes=out.total,
        stdout_cut=out.cut, stderr_cut=err.cut,
        stderr_bytes=err.total, duration_s=duration, timed_out=timed_out,
    )


class LocalSession:
    """Runs commands on the worker node on behalf of one host."""

    def __init__(self, host: Host, options: dict[str, Any]) -> None:
        self.host = host
        self.options = options
        self.env: dict[str, str] | None = None
        if options["host_env"]:
            self.env = dict(os.environ)
            self.env.update({
                "FLEETSCHED_HOST": host.name,
                "FLEETSCHED_HOST_ADDRESS": host.connect_address,
                "FLEETSCHED_HOST_PORT": str(host.port),
                "FLEETSCHED_HOST_USER": host.user or "",
            })

    def run(self, argv: list[str], timeout: float, stdin: bytes | None = None) -> CommandResult:
        return run_process(argv, timeout, stdin, cwd=self.options["cwd"] or None, env=self.env,
                           capture_bytes=self.options["capture_bytes"])

    def put(self, data: bytes, remote_path: str, mode: int = 0o600) -> None:
        fd = os.open(remote_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            os.fchmod(fd, mode)  # the umask may have narrowed the mode given to open()
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def remove(self, remote_path: str) -> None:
        try:
            os.unlink(remote_path)
        except FileNotFoundError:
            pass


class LocalExecutor:
    """Opens :class:`LocalSession` objects; holds no resources."""

    name = "local"

    def __init__(self, options: Mapping[str, Any] | None = None,
                 settings: Settings | None = None) -> None:
        self.options = read_options(self.name, options, DEFAULTS)
        self.settings = settings

    @contextmanager
    def session(self, host: Host) -> Iterator[LocalSession]:
        yield LocalSession(host, self.options)

    def close(self) -> None:
        pass


__all__ = ["LocalExecutor", "LocalSession", "run_process"]
