"""Live output: each job's lines published to its task's Redis stream as the command prints
them, for ``tasks output --follow`` (``scheduler.verbs.liveoutput`` reads them).

1. The runner gives each job a :class:`JobLines` (the executors' ``tasks.executors.live``
   sink): every line is masked with the job's own redactor, the one that masks its recorded
   output, before it is queued, so no secret the job resolved reaches Redis. A piece of a line
   (a long line's, or a partial line's sent after ``PARTIAL_S``) goes out only up to where a
   secret may have begun (``Redactor.safe_cut``); the rest waits, raw, for the next piece, so
   a secret printed slowly or across a cut is masked whole, never a fragment at a time.
2. One :class:`Publisher` per child process, one thread: every ``FLUSH_S`` (or sooner when
   ``BATCH`` lines wait) it sends what is queued in one pipeline, ``XADD`` to the task's stream
   ``Keys.output`` (``MAXLEN ~ MAXLEN``: a follower who comes late sees the last lines) and an
   ``EXPIRE`` of ``TTL_S``, so a stream nobody ends goes away an hour after its last line.
3. Never in a job's way: the queue holds at most ``PENDING_MAX`` lines and ``PENDING_BYTES``
   (beyond, lines are dropped and counted, and the follower is told how many); a Redis that
   does not answer costs one failed send, then ``DOWN_S`` of dropping; the job runs and
   records its output as before.
   A job's end adds an ``end`` entry and sends what is queued before the job's outcome goes
   to the master (one round trip, only for a job that printed).
4. Its task's end: the node's finisher, having acked or failed jobs (whether they printed or
   not: the task's last job may print nothing), reads their tasks' counters in one pipeline
   and gives the stream of each task that ended ``ENDED_TTL_S`` more (``scheduler.queue.livestream.end_streams``),
   enough for its followers to read the last lines; then ``tasks output --follow`` reads the
   recorded output instead. A task that a cancel ends (none of its jobs running) has no job
   ending on a node: the cancel gives its stream the same (``scheduler.queue.livestream.end_task_stream``).

An entry's fields: ``h`` host, ``j`` job, ``a`` attempt, and either ``d``, the job's lines of
one flush as JSON ``[[stream, line], ...]`` (stream ``out`` or ``err``; one entry for up to
``ENTRY_LINES`` lines and ``ENTRY_BYTES`` of JSON: a pipeline of 10,000 one-line entries would
cost the job's end 0.2 s), or ``k``, a mark: ``end``, or ``gap`` with ``n`` lines dropped.
"""

from __future__ import annotations

import collections
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from scheduler.config import Settings
from scheduler.queue.livestream import ENDED_TTL_S, end_streams, end_task_stream, ended_tasks
from scheduler.redact import Redactor

if TYPE_CHECKING:
    from tasks.executors.live import Lines
    from workers.protocol import Order

__all__ = ["BATCH", "ENDED_TTL_S", "ENTRY_BYTES", "ENTRY_LINES", "FLUSH_S", "MAXLEN",
           "PENDING_BYTES", "PENDING_MAX", "TTL_S", "JobLines", "Publisher", "end_streams",
           "end_task_stream", "ended_tasks", "pack"]

log = logging.getLogger(__name__)

FLUSH_S = 0.1  # lines wait at most this long in the child
BATCH = 500  # ... or until this many wait
PENDING_MAX = 20_000  # lines queued in the child at most; beyond, dropped and counted ...
PENDING_BYTES = 4 * 1024 * 1024  # ... and this many bytes of them (4 KiB lines: about 1,000)
ENTRY_OVERHEAD = 64  # what a queued line costs beyond its bytes (counted against the above)
MAXLEN = 1_000  # entries a task's stream keeps (approximately: MAXLEN ~) ...
ENTRY_LINES = 200  # ... each of one job's lines, at most this many
ENTRY_BYTES = 32 * 1024  # ... and this many bytes as XADDed (the JSON), unless one line alone is
# more (a 4 KiB piece of control characters, each \u00XX: 24 KiB), so a stream holds about
# 32 MiB at most: the queue shares this Redis, and a chatty fleet-wide task must not crowd it out
TTL_S = 3600  # a stream expires this long after its last line
DOWN_S = 5.0  # after a failed send, lines are dropped (counted) this long before trying again


class JobLines:
    """One job's sink: masks each line with the job's redactor and queues it on the publisher."""

    def __init__(self, publisher: Publisher, key: str, order: Order, redactor: Redactor) -> None:
        self.publisher = publisher
        self.key = key
        self.redactor = redactor
        self.base = {"h": order.host, "j": order.job_id, "a": str(order.attempt)}
        self.dropped = 0
        self.published = False  # a line (or a gap) was queued
        self.watched: list[Lines] = []
        self.held: dict[str, str] = {}  # per stream: the raw end not sent yet (see line)

    def line(self, stream: str, text: str, *, partial: bool, cont: bool) -> None:
        # A piece of a line (cut at MAX_LINE, or waiting PARTIAL_S) goes out only up to where
        # no secret may have begun unfinished (Redactor.safe_cut): the rest is held, raw, and
        # goes with the next piece, so a secret is always masked whole, however it is printed
        raw = self.held.pop(stream, "") + text
        if partial:
            cut = self.redactor.safe_cut(raw)
            if cut < len(raw):
                self.held[stream] = raw[cut:]
            if not cut:
                return
            raw = raw[:cut]
        elif not raw and cont:
            return  # the line's end, all of it sent already
        self._send(stream, self.redactor.redact(raw))

    def _send(self, stream: str, masked: str) -> None:
        if self.dropped and self.publisher.room():
            self._put({"k": "gap", "n": str(self.dropped)})
            self.dropped = 0
        if not self._put({"s": stream, "l": masked}):
            self.dropped += 1

    def watch(self, lines: Lines) -> None:
        self.publisher.watch(self, lines)

    def end(self) -> None:
        """The job ended: what was dropped, then its ``end`` entry (only after a line)."""
        self.publisher.unwatch(self)
        for stream in list(self.held):  # a piece held when the output ended goes out now
            self._send(stream, self.redactor.redact(self.held.pop(stream)))
        if not self.published and not self.dropped:
            return
        if self.dropped:
            self._put({"k": "gap", "n": str(self.dropped)})
        self._put({"k": "end"})
        # Sent before the job's outcome goes to the master: its task's end (the finisher's
        # shorter expiry) then always comes after the job's last lines
        self.publisher.flush()

    def _put(self, fields: dict[str, str]) -> bool:
        if self.publisher.put(self.key, {**self.base, **fields}):
            self.published = True
            return True
        return False


class Publisher:
    """The child's one publishing thread (see the module docstring), started on first use."""

    def __init__(self, settings: Settings, client: Any = None) -> None:
        self.settings = settings
        self._client = client
        self._pending: collections.deque[tuple[str, dict[str, str], int]] = collections.deque()
        self._pending_bytes = 0  # what the queued lines hold (their UTF-8 bytes, and a little)
        self._lock = threading.Lock()
        self._sending = threading.Lock()  # one send at a time: the stream keeps the order
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._watched: dict[int, tuple[JobLines, list[Lines]]] = {}
        self._down_until = 0.0
        self.sent = self.dropped = self.failed_sends = 0  # for the tests and the log
        from scheduler.queue.shards import shards_of

        self.shards = shards_of(settings)

    def job(self, order: Order, redactor: Redactor) -> JobLines:
        return JobLines(self, self.shards.of_task(order.task_id).output(order.task_id), order,
                        redactor)

    def room(self) -> bool:
        return (len(self._pending) < PENDING_MAX and self._pending_bytes < PENDING_BYTES
                and time.monotonic() >= self._down_until)

    def put(self, key: str, fields: dict[str, str]) -> bool:
        """Queue one entry; False (dropped) when the queue is full or Redis is down."""
        if not self.room():
            self.dropped += 1
            return False
        size = ENTRY_OVERHEAD + len(fields.get("l", "").encode("utf-8", "surrogatepass"))
        with self._lock:
            self._pending_bytes += size
        self._pending.append((key, fields, size))
        if self._thread is None:
            self._start()
        if len(self._pending) >= BATCH and not self._wake.is_set():
            self._wake.set()
        return True

    def watch(self, job: JobLines, lines: Lines) -> None:
        with self._lock:
            self._watched.setdefault(id(job), (job, []))[1].append(lines)
        if self._thread is None:
            self._start()

    def unwatch(self, job: JobLines) -> None:
        with self._lock:
            self._watched.pop(id(job), None)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="live-output",
                                                daemon=True)
                self._thread.start()

    def _loop(self) -> None:
        while True:
            self._wake.wait(FLUSH_S)
            self._wake.clear()
            try:
                self._tick()
                self.flush()
            except Exception as exc:  # noqa: BLE001 - never let the thread die
                log.warning("live output: %s", type(exc).__name__)

    def _tick(self) -> None:
        """Hand on the partial lines that waited long enough (a prompt, progress dots)."""
        now = time.monotonic()
        with self._lock:
            watched = [lines for _, all_lines in self._watched.values() for lines in all_lines]
        for lines in watched:
            if not lines.closed:
                lines.stale(now)

    def flush(self) -> int:
        """Send what is queued, in one pipeline; the entries sent (0 when Redis failed)."""
        with self._sending:
            return self._send()

    def _send(self) -> int:
        batch: list[tuple[str, dict[str, str]]] = []
        taken = 0
        while self._pending:
            try:
                key, fields, size = self._pending.popleft()
            except IndexError:
                break
            batch.append((key, fields))
            taken += size
        if not batch:
            return 0
        with self._lock:
            self._pending_bytes -= taken
        try:
            client = self._connect()
            pipe = client.pipeline(transaction=False)
            keys: dict[str, None] = {}
            for key, fields in pack(batch):
                pipe.xadd(key, fields, maxlen=MAXLEN, approximate=True)
                keys[key] = None
            for key in keys:
                pipe.expire(key, TTL_S)
            pipe.execute()
        except Exception as exc:  # noqa: BLE001 - Redis away: the jobs go on without us
            self.failed_sends += 1
            self.dropped += len(batch)
            self._down_until = time.monotonic() + DOWN_S
            self._drop_client()
            log.warning("live output: %d lines not published (%s); the jobs' recorded output "
                        "is complete", len(batch), type(exc).__name__)
            return 0
        self.sent += len(batch)
        return len(batch)

    def _connect(self) -> Any:
        if self._client is None:
            from scheduler.redisdb.connect import connect

            self._client = connect(self.settings, socket_timeout=2.0, check=False)
        return self._client

    def _drop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001
                pass


def pack(batch: list[tuple[str, dict[str, str]]]) -> list[tuple[str, dict[str, str]]]:
    """The stream entries of a batch of queued lines and marks: each job's lines in entries of
    ``ENTRY_LINES`` lines or ``ENTRY_BYTES`` at most (``d``: JSON ``[[stream, line], ...]``),
    its marks between them where they came; the jobs in the order they first came."""
    by_job: dict[tuple[str, str], list[dict[str, str]]] = {}
    for key, fields in batch:
        by_job.setdefault((key, fields["j"]), []).append(fields)
    out: list[tuple[str, dict[str, str]]] = []
    for (key, _job), items in by_job.items():
        run: list[str] = []  # each line as encoded: the bytes XADDed are what is measured
        size = 2
        base = {k: items[0][k] for k in ("h", "j", "a")}
        for fields in items:
            line = fields.get("l")
            item = None if line is None else json.dumps([fields["s"], line], ensure_ascii=False,
                                                        separators=(",", ":"))
            cost = 0 if item is None else len(item.encode("utf-8", "surrogatepass")) + 1
            if item is not None and run and (len(run) < ENTRY_LINES
                                             and size + cost <= ENTRY_BYTES):
                run.append(item)
                size += cost
                continue
            if run:
                out.append((key, {**base, "d": "[" + ",".join(run) + "]"}))
                run, size = [], 2
            if item is not None:
                run, size = [item], 2 + cost
            else:
                out.append((key, fields))
        if run:
            out.append((key, {**base, "d": "[" + ",".join(run) + "]"}))
    return out
