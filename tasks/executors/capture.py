"""Bounded output capture: the head and the tail of a stream, and its total size.

A command may print gigabytes; a job keeps only the first ``head_cap`` and the last
``tail_cap`` bytes of each stream (8 KiB each by default) plus the byte count, so memory stays
flat however much arrives. Head and tail never overlap: a stream shorter than
``head_cap + tail_cap`` is kept whole, all of it as the head (the tail is empty).

The text is cut on character boundaries: a head never ends inside a UTF-8 sequence, a tail
never starts inside one (the bytes of a split character are counted as cut, not shown as
``\ufffd``). Output that is not UTF-8 at all still decodes, with replacement characters.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tasks.executors.options import CAP_BYTES


@dataclass
class Capture:
    """Keeps the head and the tail of one byte stream fed in chunks."""

    head_cap: int = CAP_BYTES
    tail_cap: int = CAP_BYTES
    total: int = 0
    _head: bytearray = field(default_factory=bytearray)
    _tail: bytearray = field(default_factory=bytearray)
    # Also handed every chunk as it arrives (``tasks.executors.live``: lines followed live)
    tap: Callable[[bytes], None] | None = None

    def feed(self, data: bytes) -> None:
        if not data:
            return
        if self.tap is not None:
            self.tap(data)
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
    def truncated(self) -> bool:
        """True when bytes between head and tail were dropped."""
        return self.total > len(self._head) + len(self._tail)

    def _kept(self) -> tuple[bytes, bytes]:
        """The raw bytes of head and tail: a whole stream is all head (so nothing, not even a
        character or a secret, is split between the two); a cut one loses the pieces of the
        characters split at the cut."""
        if not self.truncated:
            return bytes(self._head) + bytes(self._tail), b""
        head, tail = bytes(self._head), bytes(self._tail)
        return head[:utf8_end(head)], tail[utf8_start(tail):]

    @property
    def head(self) -> str:
        return self._kept()[0].decode("utf-8", errors="replace")

    @property
    def tail(self) -> str:
        return self._kept()[1].decode("utf-8", errors="replace")

    @property
    def cut(self) -> int:
        """Bytes of the stream that neither the head nor the tail holds, counted on the raw
        bytes (what a replacement character or a masked secret shows does not change it)."""
        head, tail = self._kept()
        return self.total - len(head) - len(tail)


def utf8_end(data: bytes) -> int:
    """Where ``data`` may be cut so that no UTF-8 sequence is split: its length, or the start
    of a sequence left incomplete at its end."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte < 0x80:
            return len(data)
        if byte >= 0xF8:  # never part of UTF-8: not text, nothing to keep whole
            return len(data)
        if byte >= 0xC0:  # a lead byte: is its sequence complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return len(data) if back >= need else len(data) - back
    return len(data)


def utf8_start(data: bytes) -> int:
    """Where the first whole character of ``data`` starts (skipping continuation bytes)."""
    for i, byte in enumerate(data[:4]):
        if byte & 0xC0 != 0x80:
            return i
    return len(data) if len(data) < 4 else 0  # 4 continuation bytes: not UTF-8, keep it all


__all__ = ["CAP_BYTES", "Capture", "utf8_end", "utf8_start"]
