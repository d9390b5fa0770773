"""Reaching a host through its jump hosts, and keeping the jump hosts' logins for reuse.

1. :meth:`Bastions.open` gives a ``direct-tcpip`` channel from the last jump host of
   ``target.via`` to the target; ``connect.connect`` speaks SSH over it exactly as over TCP, so
   the target's host key is checked strictly before anything authenticates, as for a direct host.
2. Each hop is connected the way a host is (``connect.connect``): the first over TCP, every
   next one over a ``direct-tcpip`` channel from the hop before it; the handshake offers only the
   key types ``known_hosts`` records for the hop, its host key is checked against
   ``known_hosts`` before authenticating, and it logs in with the same agent and key files.
3. One authenticated transport per hop chain (keyed by each hop's user, address and port) is
   shared by every connection through it from this process: jobs on many hosts behind one
   bastion cost one bastion login. A transport found dead is replaced; one that no connection
   uses any more is closed after ``idle_s`` (checked whenever the cache is used) or by
   :meth:`Bastions.close_all`; after a fork the child forgets the parent's.
4. Errors say which side failed. A hop's own failure keeps its class (``HostUnreachableError``,
   ``HostKeyError``, ``AuthenticationError``) and is reported as the bastion's:
   ``bastion jump-1 (10.0.0.9:2222) unreachable (while reaching web-07): ...``; a target (or
   next hop) the bastion cannot open a channel to is
   ``bastion jump-1 (10.0.0.9:2222) cannot reach web-07 (10.1.0.7:22): Connect failed`` (the
   bastion's words).
   Nothing secret is in them: names, addresses, the server's reason.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paramiko

from scheduler.errors import AuthenticationError, HostKeyError, HostUnreachableError
from tasks.executors.ssh.connect import Target, connect, open_socket

ChainKey = tuple[tuple[str, str, int, tuple[str, ...]], ...]
_WHAT = ((HostKeyError, "host key refused"), (AuthenticationError, "refused the login"),
         (HostUnreachableError, "unreachable"))


@dataclass(eq=False)
class Link:
    """An authenticated transport to the last hop of ``key``, and how many use it."""

    key: ChainKey
    hop: Target
    transport: paramiko.Transport
    parent: Link | None = None  # the link this one's connection runs through
    users: int = 1
    last_used: float = field(default_factory=time.monotonic)
    closed: bool = False


class HopSocket:
    """The ``direct-tcpip`` channel a transport runs over, as its socket. Closing it never
    raises: the bastion may be gone already (its EOF not yet seen), and closing the transport
    over it, to replace or drop it, must not fail for that."""

    def __init__(self, channel: paramiko.Channel) -> None:
        self.channel = channel

    def __getattr__(self, name: str) -> Any:  # send, recv, settimeout, _closed ...
        return getattr(self.channel, name)

    def close(self) -> None:
        try:
            self.channel.close()
        except (paramiko.SSHException, EOFError, OSError):
            pass


def _bastion_error(exc: Exception, hop: Target, reaching: str) -> Exception:
    """``exc`` (about ``hop``) as the bastion's failure, same class, same hint (point 4)."""
    what = next(w for cls, w in _WHAT if isinstance(exc, cls))
    error = type(exc)(f"bastion {hop.endpoint} {what} (while reaching {reaching}): {exc}",
                      hint=getattr(exc, "hint", None))
    if hasattr(exc, "verdict"):
        error.verdict = exc.verdict  # type: ignore[attr-defined]
    return error


class Bastions:
    """The jump-host transports of one executor (or one ``hosts check``) (point 3)."""

    def __init__(self, known_hosts: Path, options: dict[str, Any]) -> None:
        self.known_hosts = Path(known_hosts)
        self.options = options
        self.idle_s = float(options["idle_s"])
        self._lock = threading.Lock()
        self._links: dict[ChainKey, Link] = {}
        self._logins: dict[ChainKey, threading.Lock] = {}  # one login per chain at a time
        self._pid = os.getpid()

    def open(self, target: Target) -> tuple[HopSocket, Callable[[], None]]:
        """A channel from ``target.via[-1]`` to the target, and the call that gives back the
        hold on the jump hosts once the connection over the channel is closed."""
        for attempt in (1, 2):
            link = self._acquire(target.via, target.name)
            try:
                chan = self._channel(link, target, target.name)
            except HostUnreachableError:
                self.release(link)
                if attempt == 2 or link.transport.is_active():
                    raise
                self._retire(link)  # died since it was checked: log in again, once
                continue
            return chan, functools.partial(self.release, link)
        raise AssertionError("not reached")

    def login(self, target: Target) -> None:
        """Log in to ``target``'s jump hosts, or find them logged in, without reaching the
        target (``hosts check`` times the two apart); they stay open for ``idle_s``."""
        self.release(self._acquire(target.via, target.name))

    def _acquire(self, hops: tuple[Target, ...], reaching: str) -> Link:
        key: ChainKey = tuple(h.login_key for h in hops)
        with self._lock:
            self._after_fork()
            login = self._logins.setdefault(key, threading.Lock())
        with login:
            with self._lock:
                link = self._links.get(key)
                if link is not None and link.transport.is_active():
                    link.users += 1
                    link.last_used = time.monotonic()
                    return link
            if link is not None:
                self._retire(link)
            parent = self._acquire(hops[:-1], reaching) if len(hops) > 1 else None
            try:
                transport = self._login(hops[-1], parent, reaching)
            except BaseException:
                if parent is not None:
                    self.release(parent)
                raise
            link = Link(key, hops[-1], transport, parent)
            with self._lock:
                self._links[key] = link
            return link

    def _login(self, hop: Target, parent: Link | None, reaching: str) -> paramiko.Transport:
        """An authenticated transport to ``hop`` (point 2); its failures are the bastion's."""
        sock = self._channel(parent, hop, reaching) if parent is not None else None
        try:
            if sock is None:
                sock = open_socket(hop, self.options)
            transport = connect(hop, self.known_hosts, self.options, sock=sock)
        except (HostUnreachableError, HostKeyError, AuthenticationError) as exc:
            if sock is not None:
                sock.close()
            raise _bastion_error(exc, hop, reaching) from None
        if self.options["keepalive_s"]:
            transport.set_keepalive(self.options["keepalive_s"])
        return transport

    def _channel(self, link: Link, to: Target, reaching: str) -> HopSocket:
        """``direct-tcpip`` from ``link``'s hop to ``to`` (a host or the next hop)."""
        try:
            return HopSocket(link.transport.open_channel(
                "direct-tcpip", (to.address, to.port), ("127.0.0.1", 0),
                timeout=self.options["connect_timeout"]))
        except paramiko.ChannelException as exc:
            why = exc.text or f"channel open failed (code {exc.code})"
            if exc.code == paramiko.common.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED:
                why += " (administratively prohibited: its sshd forbids forwarding there)"
            raise HostUnreachableError(
                f"bastion {link.hop.endpoint} cannot reach {to.endpoint}: {why}",
                hint=f"check that {to.name} is up and that {link.hop.name} may connect to "
                     f"{to.address} port {to.port} (sshd AllowTcpForwarding, PermitOpen, "
                     "firewalls)") from None
        except (paramiko.SSHException, EOFError, OSError) as exc:
            if link.transport.is_active():  # alive, but no answer in time
                raise HostUnreachableError(
                    f"bastion {link.hop.endpoint} opened no channel to {to.endpoint} within "
                    f"{self.options['connect_timeout']:g}s", hint=f"check that {to.name} is up"
                ) from None
            raise HostUnreachableError(
                f"bastion {link.hop.endpoint} unreachable (while reaching {reaching}): its "
                f"connection was lost ({exc or type(exc).__name__})") from None

    def release(self, link: Link) -> None:
        """One user less on ``link``; then close what has been unused for ``idle_s``."""
        with self._lock:
            link.users -= 1
            link.last_used = time.monotonic()
        self._sweep()

    def _retire(self, link: Link) -> None:
        """Forget a dead link and close it (its users hold only dead channels now)."""
        with self._lock:
            if self._links.get(link.key) is link:
                del self._links[link.key]
        self._close(link)

    def _close(self, link: Link) -> None:
        with self._lock:
            if link.closed:
                return
            link.closed = True
        link.transport.close()
        if link.parent is not None:
            self.release(link.parent)

    def _sweep(self) -> None:
        now = time.monotonic()
        with self._lock:
            done = [k for k, ln in self._links.items() if ln.users <= 0 and (
                now - ln.last_used >= self.idle_s or not ln.transport.is_active())]
            gone = [self._links.pop(k) for k in done]
        for link in sorted(gone, key=lambda ln: -len(ln.key)):  # the far end first
            self._close(link)

    def _after_fork(self) -> None:
        # A forked child shares the parent's sockets: forget them, never use or close them.
        if self._pid != os.getpid():
            self._links, self._logins = {}, {}
            self._pid = os.getpid()

    def close_all(self) -> None:
        with self._lock:
            self._after_fork()
            links, self._links = list(self._links.values()), {}
        for link in sorted(links, key=lambda ln: -len(ln.key)):
            self._close(link)

    def count(self) -> int:
        """How many jump-host transports are open (for tests and metrics)."""
        with self._lock:
            return sum(1 for ln in self._links.values() if not ln.closed)


__all__ = ["Bastions", "HopSocket", "Link"]
