"""Live output: a command's lines handed on as it prints them (``tasks output --follow``).

The ``local`` and ``ssh`` executors read stdout and stderr in one loop and feed every chunk to
a :class:`~tasks.executors.capture.Capture`. While a :class:`LineSink` is set for the job's
thread (:func:`publishing`, by the worker's runner), :func:`tap` also gives each capture a
:class:`Lines` splitter that hands the sink every complete line as it arrives, a line longer
than ``MAX_LINE`` bytes in pieces, a partial line (a prompt, a progress dot) once it waited
``PARTIAL_S`` (the sink's own timer asks, :meth:`Lines.stale`) and what is left at the end.
Without a sink, nothing is attached: the executors cost what they cost before.

The sink masks and ships the lines (``workers.liveout``); nothing here knows Redis. A piece
says whether it is a line's start cut short (``partial``: a secret may go on in the next piece,
so the sink holds back the end that may begin one, ``Redactor.safe_cut``) and whether it
continues the previous piece (``cont``); a line cut short ends with a last piece, empty when
nothing was left, at the line's end or the stream's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Protocol

from tasks.executors.capture import Capture, utf8_end

__all__ = ["MAX_LINE", "PARTIAL_S", "LineSink", "Lines", "publishing", "tap"]

MAX_LINE = 4096  # bytes: a longer line goes out in pieces of this size
PARTIAL_S = 1.0  # a partial line waiting this long goes out as it is


class LineSink(Protocol):
    """Where a job's lines go (``workers.liveout.JobLines``)."""

    def line(self, stream: str, text: str, *, partial: bool, cont: bool) -> None:
        """One line (``stream``: ``out`` or ``err``), without its newline."""
        ...

    def watch(self, lines: Lines) -> None:
        """Ask ``lines`` for its stale partial line now and then (until it is closed)."""
        ...


_sink: ContextVar[LineSink | None] = ContextVar("fleetsched_live_sink", default=None)


@contextmanager
def publishing(sink: LineSink | None) -> Iterator[None]:
    """The commands run in this block (this thread) hand their lines to ``sink``."""
    token = _sink.set(sink)
    try:
        yield
    finally:
        _sink.reset(token)


def _nothing() -> None:
    pass


def tap(out: Capture, err: Capture) -> Callable[[], None]:
    """Attach line splitters to a command's two captures when a sink is set; returns what to
    call once the command's output is over (it hands on the last partial lines)."""
    sink = _sink.get()
    if sink is None:
        return _nothing
    lines = Lines(sink, "out"), Lines(sink, "err")
    out.tap, err.tap = lines[0].feed, lines[1].feed
    for one in lines:
        sink.watch(one)

    def close() -> None:
        for one in lines:
            one.close()

    return close


class Lines:
    """Splits one stream's chunks into lines for a sink (see the module docstring)."""

    def __init__(self, sink: LineSink, stream: str) -> None:
        self.sink = sink
        self.stream = stream
        self.closed = False
        self._buf = bytearray()
        self._since = 0.0  # when the partial line in the buffer began
        self._cont = False  # the next piece continues a line already handed on
        self._lock = threading.Lock()  # the job's thread feeds, the sink's timer asks

    def feed(self, data: bytes) -> None:
        with self._lock:
            if not self._buf:
                self._since = time.monotonic()
            self._buf += data
            start = 0
            while True:
                end = self._buf.find(b"\n", start)
                if end < 0:
                    break
                while end - start > MAX_LINE:  # a long line: in pieces
                    cut = start + (utf8_end(bytes(self._buf[start:start + MAX_LINE]))
                                   or MAX_LINE)
                    self._emit(bytes(self._buf[start:cut]), partial=True)
                    start = cut
                self._emit(bytes(self._buf[start:end]), partial=False)
                start = end + 1
            if start:
                del self._buf[:start]
                self._since = time.monotonic()
            while len(self._buf) > MAX_LINE:
                cut = utf8_end(bytes(self._buf[:MAX_LINE])) or MAX_LINE
                self._emit(bytes(self._buf[:cut]), partial=True)
                del self._buf[:cut]

    def stale(self, now: float | None = None) -> None:
        """Hand on a partial line that has waited ``PARTIAL_S`` (the sink's timer calls it)."""
        with self._lock:
            if self._buf and (now or time.monotonic()) - self._since >= PARTIAL_S:
                cut = utf8_end(bytes(self._buf)) or len(self._buf)
                self._emit(bytes(self._buf[:cut]), partial=True)
                del self._buf[:cut]
                self._since = time.monotonic()

    def close(self) -> None:
        """The stream ended: what is left goes out as the last line."""
        with self._lock:
            if self._buf or self._cont:  # (a line cut short: the sink may hold its end)
                self._emit(bytes(self._buf), partial=False)
                self._buf.clear()
            self.closed = True

    def _emit(self, data: bytes, *, partial: bool) -> None:
        if data.endswith(b"\r"):
            data = data[:-1]
        text = data.decode("utf-8", errors="replace")
        try:
            self.sink.line(self.stream, text, partial=partial, cont=self._cont)
        except Exception:  # noqa: BLE001 - following is best effort: never break the command
            pass
        self._cont = partial
