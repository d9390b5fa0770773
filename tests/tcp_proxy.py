"""A loopback TCP proxy a test controls, to cut a real server's connections on purpose.

``cut()`` drops every open connection (reset, like a dead network path) and refuses new ones
until ``restore()``. ``freeze()`` keeps every connection open but forwards nothing (a stalled
path: no error, no reset) until ``thaw()``. ``drop_reply_to(marker)`` forwards the next request
that carries ``marker`` to the server, then throws its reply away and resets the connection:
the request ran, and the client cannot know (the ambiguous reply). Threaded, byte-for-byte, no protocol knowledge: it works for PostgreSQL,
Redis or anything else.
"""

from __future__ import annotations

import socket
import struct
import threading


class TcpProxy:
    """Listens on 127.0.0.1:<port>, forwards to ``(host, port)`` while not cut."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.host, self.port = self._listener.getsockname()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = False
        self._flowing = threading.Event()
        self._flowing.set()
        self._drop_markers: list[bytes] = []  # requests whose replies are to be lost
        self.dropped = 0  # replies thrown away so far
        self.accepted = 0
        self.refused = 0
        self._thread = threading.Thread(target=self._accept_loop, name="tcp-proxy", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ control

    def cut(self) -> None:
        """Reset every open connection and refuse new ones."""
        with self._lock:
            self._cut = True
            sockets, self._open = self._open, set()
        for s in sockets:
            _reset(s)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def freeze(self) -> None:
        """Forward nothing more, in either direction, until ``thaw()``; connections stay open."""
        self._flowing.clear()

    def thaw(self) -> None:
        self._flowing.set()

    def drop_reply_to(self, marker: bytes, times: int = 1) -> None:
        """Lose the replies of the next ``times`` requests that carry ``marker`` (bytes of the
        request, such as a Lua script's SHA): each request reaches the server and runs, then
        its reply is dropped and its connection reset."""
        with self._lock:
            self._drop_markers += [marker] * times

    def close(self) -> None:
        self._closed = True
        self.thaw()
        self.cut()
        try:
            self._listener.close()
        except OSError:
            pass

    # ------------------------------------------------------------------ forwarding

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                cut = self._cut
            if cut:
                self.refused += 1
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                _reset(client)
                continue
            with self._lock:
                if self._cut:
                    _reset(client)
                    _reset(upstream)
                    continue
                self._open.update((client, upstream))
                self.accepted += 1
            doomed = threading.Event()  # this pair's next reply is to be lost
            threading.Thread(target=self._pump, args=(client, upstream, doomed, True),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, doomed, False),
                             daemon=True).start()

    def _marked(self, data: bytes) -> bool:
        with self._lock:
            for i, marker in enumerate(self._drop_markers):
                if marker in data:
                    del self._drop_markers[i]
                    return True
        return False

    def _pump(self, src: socket.socket, dst: socket.socket, doomed: threading.Event,
              request: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                self._flowing.wait()
                if request and self._marked(data):
                    doomed.set()  # before the request leaves: its reply cannot overtake it
                elif not request and doomed.is_set():
                    self.dropped += 1
                    _reset(src)
                    _reset(dst)
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                try:
                    s.close()
                except OSError:
                    pass

    def __enter__(self) -> TcpProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _reset(s: socket.socket) -> None:
    """Close with SO_LINGER 0: the peer gets a RST at once, as from a dead path."""
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    try:
        s.shutdown(socket.SHUT_RD)  # wakes a pump thread blocked in recv; sends nothing
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
