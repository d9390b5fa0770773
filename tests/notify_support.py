"""Real receivers for the notification tests: an HTTP server recording the POSTs it gets, and an
SMTP server (aiosmtpd) recording the mails it gets, each on a free port of 127.0.0.1, each able
to stop and start again on the same port (the receiver being down, then back).

Fixtures: ``webhook`` (a :class:`Webhook`, started) and ``smtp`` (an :class:`Smtp`, started).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Webhook:
    """A webhook receiver: ``requests`` holds each POST (path, headers, JSON body) once read,
    ``arrived`` counts them as they come in; ``status`` is the answer it gives (with a
    ``Location`` header if ``location`` is set: a redirect); ``delay_s`` makes it slow to
    answer. A GET (a client following a redirect) is recorded in ``gets`` and answered 200."""

    def __init__(self) -> None:
        self.port = free_port()
        self.requests: list[dict[str, Any]] = []
        self.arrived = 0
        self.status = 200
        self.delay_s = 0.0
        self.location: str | None = None
        self.gets: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def url(self, path: str = "/hook") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def start(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's name
                receiver.arrived += 1
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if receiver.delay_s:
                    time.sleep(receiver.delay_s)
                receiver.requests.append({"path": self.path, "headers": dict(self.headers),
                                          "json": json.loads(body)})
                self.send_response(receiver.status)
                if receiver.location:
                    self.send_header("Location", receiver.location)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def do_GET(self) -> None:  # http.server's name
                receiver.gets.append(self.path)
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            assert self._thread is not None
            self._thread.join(5)
            self._server = None


class Smtp:
    """An SMTP receiver (aiosmtpd): ``mails`` holds (from, to, parsed message) per mail."""

    def __init__(self) -> None:
        self.port = free_port()
        self.mails: list[tuple[str, list[str], Any]] = []
        self._controller: Any = None

    def start(self) -> None:
        from email import message_from_bytes
        from email.policy import default

        from aiosmtpd.controller import Controller

        receiver = self

        class Handler:
            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                receiver.mails.append((envelope.mail_from, list(envelope.rcpt_tos),
                                       message_from_bytes(envelope.content, policy=default)))
                return "250 OK"

        self._controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self._controller.start()

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    hook.start()
    yield hook
    hook.stop()


@pytest.fixture
def smtp() -> Iterator[Smtp]:
    server = Smtp()
    server.start()
    yield server
    server.stop()
