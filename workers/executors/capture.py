"""Bounded output capture: the head and the tail of a stream, and its total size.

A command may print gigabytes; a job keeps only the first ``head_cap`` and the last
``tail_cap`` bytes of each stream (8 KiB each by default) plus the byte count, so memory stays
flat however much arrives. Head and tail never overlap: a stream shorter than
``head_cap + tail_cap`` is kept whole, as ``head + tail``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tasks.executor_options import CAP_BYTES


@dataclass
class Capture:
    """Keeps the head and the tail of one byte stream fed in chunks."""

    head_cap: int = CAP_BYTES
    tail_cap: int = CAP_BYTES
    total: int = 0
    _head: bytearray = field(default_factory=bytearray)
    _tail: bytearray = field(default_factory=bytearray)

    def feed(self, data: bytes) -> None:
        if not data:
            return
        self.total += len(data)
        room = self.head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data and self.tail_cap:
            if len(data) >= self.tail_cap:
                self._tail[:] = data[-self.tail_cap:]
            else:
                self._tail += data
                excess = len(self._tail) - self.tail_cap
                if excess > 0:
                    del self._tail[:excess]

    @property
    def head(self) -> str:
        return bytes(self._head).decode("utf-8", errors="replace")

    @property
    def tail(self) -> str:
        return bytes(self._tail).decode("utf-8", errors="replace")

    @property
    def truncated(self) -> bool:
        """True when bytes between head and tail were dropped."""
        return self.total > len(self._head) + len(self._tail)


__all__ = ["CAP_BYTES", "Capture"]
