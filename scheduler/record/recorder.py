"""The recorder: copies the Redis event stream into SQL, in batches, losing and doubling nothing.

A ``Recorder`` is one consumer of the consumer group ``recorder`` on one events stream
(``{P}:events``; a queue of N shards has one stream per shard, each read by a ``Recorder`` of
its own: ``scheduler.record.sharded``). Several may run at once (``fleetsched recorder`` and one inside every worker node): the group hands
each entry to one of them. Each ``run_once``:

1. reads a batch: first this consumer's own pending entries (delivered before but not yet
   acknowledged: the database was down, or the process restarted under the same name), then,
   now and then, the entries of a node's recorder whose node is gone (its heartbeat stale or
   removed: at once), or of any consumer idle for ``claim_idle_ms`` (XAUTOCLAIM), else new
   entries (``>``), blocking up to ``block_ms``; when a blocking read returns less than a full
   batch (on a quiet stream: woken by a claim, whose job is about to start), it lingers
   ``linger_ms`` and reads what came meanwhile into the same batch, so its SQL work does not
   compete with that job's start for the CPU (on 2 cores it made a due job start 2 ms later at
   the median: docs/benchmarks.md, "Peers", W3); a full batch (a backlog) is written at once;
2. writes the batch in one SQL transaction (a ``Stream`` change of ``scheduler.record.state``):
   events keyed by stream id with ON CONFLICT DO NOTHING, then job and task rows;
3. acknowledges the batch (XACK) only after the commit;
4. trims the stream (XTRIM MINID, approximate) below the oldest entry any consumer group still
   has pending, or its last delivered entry when nothing is pending: never what is unread or
   unacknowledged.

An ``on_batch`` hook (``scheduler.notify.detect.Detector``, handed in by whoever starts the
recorder) runs in step 2's transaction after the fold, so what it writes (notices in the outbox)
commits with the rows, or not at all, and is written again by a replay only where it is missing.

A crash between 2 and 3 re-delivers the batch; the second write inserts nothing and moves no
row (``last_event_pos``). ``run`` loops until stopped and, when SQL or Redis fails, keeps the
events in Redis and retries with exponential backoff (0.1 s doubling to 5 s).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from scheduler.queue.keys import Keys
from scheduler.queue.presence import read_workers
from scheduler.record.fold import BatchResult, StreamEvent, stream_shard
from scheduler.record.state import Stream, apply
from scheduler.redisdb.connect import REDIS_ERRORS

log = logging.getLogger(__name__)

GROUP = "recorder"
NODE_CONSUMER_PREFIX = "worker:"  # a node's recorder is consumer "worker:<worker id>"
DEAD_NODE_IDLE_MS = 1_000  # a dead node's entries are taken once idle this long
FORGET_CONSUMER_IDLE_MS = 600_000  # a gone node's empty consumer is deleted once idle this long
BACKOFF_MIN_S = 0.1
BACKOFF_MAX_S = 5.0
LINGER_MS = 20  # after a wake by a few events, before reading the rest and writing (step 1)
LAG_PAGE = 500  # entries read per side and round trip to count the unread ones (``unread``)
LAG_COUNT_MAX = 100_000  # entries read at most by one count (past it: XLEN less the read side)
# Called in the batch's transaction after the fold (see the module docstring).
OnBatch = Callable[[sa.Connection, list[StreamEvent], BatchResult], object]


def default_consumer_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass
class RecorderStats:
    batches: int = 0
    events: int = 0
    inserted: int = 0
    failures: int = 0
    trimmed: int = 0


class Recorder:
    """One consumer of one shard's event stream writing into SQL (see the module docstring).
    ``presence``: the keys holding the nodes' presence (shard 0 of a sharded queue; default
    ``keys``)."""

    def __init__(self, client: redis.Redis, engine: Engine, keys: Keys = Keys(),
                 consumer_name: str | None = None, *, batch: int = 1000, block_ms: int = 1000,
                 claim_idle_ms: int = 60_000, claim_every_s: float = 10.0,
                 trim_every_s: float = 1.0, on_batch: OnBatch | None = None,
                 presence: Keys | None = None, linger_ms: int = LINGER_MS) -> None:
        self.client = client
        self.engine = engine
        self.keys = keys
        self.presence = presence or keys
        self.stream = keys.events
        self.shard = stream_shard(self.stream)
        self.consumer = consumer_name or default_consumer_name()
        # How the logs name it: the consumer, and the shard when there are several streams.
        self.label = f"{self.consumer} (shard {self.shard})" if self.shard else self.consumer
        self.batch = batch
        self.block_ms = block_ms
        self.linger_s = linger_ms / 1000
        self.claim_idle_ms = claim_idle_ms
        self.claim_every_s = claim_every_s
        self.trim_every_s = trim_every_s
        self.on_batch = on_batch
        self.stats = RecorderStats()
        self._group_ready = False
        self._own_pending = True  # re-read our own unacknowledged entries first
        self._claim_cursor = "0-0"
        self._next_claim = 0.0
        self._next_trim = 0.0

    # ---------------------------------------------------------------------------- reading

    def ensure_group(self) -> None:
        if self._group_ready:
            return
        try:
            self.client.xgroup_create(self.stream, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
        self._group_ready = True

    def _read(self, count: int, block_ms: int | None) -> list[StreamEvent]:
        if self._own_pending:
            entries = self._xreadgroup("0", count, None)
            if entries:
                return entries
            self._own_pending = False
        now = time.monotonic()
        if now >= self._next_claim:
            entries = self._claim_from_dead_nodes(count) or self._autoclaim(count)
            if entries:
                return entries
            self._next_claim = now + self.claim_every_s
        entries = self._xreadgroup(">", count, block_ms)
        if block_ms and self.linger_s and 0 < len(entries) < count:
            time.sleep(self.linger_s)  # see the module docstring, step 1
            try:
                entries += self._xreadgroup(">", count - len(entries), None)
            except REDIS_ERRORS as exc:  # record what was read (it is pending for us now)
                log.warning("recorder %s: reading after the linger failed (%s); recording "
                            "the %d events read before it", self.label, _one_line(exc),
                            len(entries))
        return entries

    def _xreadgroup(self, start: str, count: int, block_ms: int | None) -> list[StreamEvent]:
        reply = self.client.xreadgroup(GROUP, self.consumer, {self.stream: start},
                                       count=count, block=block_ms)
        if not reply:
            return []
        items = reply[0][1] if isinstance(reply, list) else next(iter(reply.values()))[0]
        return self._events(items)

    def _claim_from_dead_nodes(self, count: int) -> list[StreamEvent]:
        """The pending entries of a node's recorder (consumer ``worker:<id>``) whose node's
        presence is gone or stale (no heartbeat for two leases), without waiting
        ``claim_idle_ms``: a killed node's batch reaches SQL seconds after its death. Taking
        entries from a node that was only slow is safe: the fold applies an entry once."""
        alive = {row["worker"] for row in read_workers(self.client, self.presence.prefix)
                 if not row["stale"]}
        for consumer in self.client.xinfo_consumers(self.stream, GROUP):
            name, pending = _s(consumer["name"]), int(consumer["pending"])
            worker = name.removeprefix(NODE_CONSUMER_PREFIX)
            if name == self.consumer or not name.startswith(NODE_CONSUMER_PREFIX) or worker in alive:
                continue
            if not pending:
                # A gone node's consumer, empty and silent for long: forget it, or every node
                # restart would leave one behind for good. Never one holding entries (deleting
                # it would drop them from the group's pending list).
                if int(consumer.get("idle") or 0) >= FORGET_CONSUMER_IDLE_MS:
                    self.client.xgroup_delconsumer(self.stream, GROUP, name)
                continue
            ids = [_s(p["message_id"]) for p in self.client.xpending_range(
                self.stream, GROUP, "-", "+", count, consumername=name)]
            if not ids:
                continue
            # min_idle_time: never an entry another recorder took over a moment ago
            items = self.client.xclaim(self.stream, GROUP, self.consumer, DEAD_NODE_IDLE_MS, ids)
            events = self._events(items)
            if events:
                log.warning("recorder %s: took over %d events from %s, whose node is gone",
                            self.label, len(events), name)
                self._own_pending = True
                return events
        return []

    def _autoclaim(self, count: int) -> list[StreamEvent]:
        reply = self.client.xautoclaim(self.stream, GROUP, self.consumer, self.claim_idle_ms,
                                       start_id=self._claim_cursor, count=count)
        cursor, items = reply[0], reply[1]
        self._claim_cursor = _s(cursor)
        events = self._events(items)
        if events:
            self._own_pending = True  # they are ours now; keep reading them until done
        return events

    def _events(self, items: Sequence[Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        gone: list[str] = []
        for entry_id, fields in items:
            eid = _s(entry_id)
            if not fields:  # trimmed away while pending: nothing left to record
                gone.append(eid)
                continue
            events.append(StreamEvent(eid, _decode(fields), self.shard))
        if gone:
            self.client.xack(self.stream, GROUP, *gone)
        return events

    # ---------------------------------------------------------------------------- writing

    def run_once(self, max_events: int | None = None, block_ms: int | None = None) -> int:
        """Record one batch; returns how many events it held (0: nothing to do)."""
        self.ensure_group()
        events = self._read(max_events or self.batch, block_ms)
        if events:
            self._write(events)
            self.client.xack(self.stream, GROUP, *[e.entry for e in events])
        if time.monotonic() >= self._next_trim or not events:
            self.trim()
        return len(events)

    def _write(self, events: list[StreamEvent]) -> BatchResult:
        try:
            with self.engine.begin() as conn:
                # Operator events were normally folded by their command already (record_now);
                # if it died between its Redis script and its SQL step, SQL catches up here.
                result = self._fold(conn, events)
        except (sa.exc.IntegrityError, sa.exc.DataError) as exc:
            # Not an outage: some entry cannot be stored as it is. Retrying would stall the
            # stream forever, so record the batch entry by entry and quarantine the bad ones.
            log.error("recorder %s: batch refused (%s); recording one by one",
                      self.label, _one_line(exc))
            result = self._write_singly(events)
        except BaseException:
            self._own_pending = True  # the batch stays pending: read it again first
            raise
        self.stats.batches += 1
        self.stats.events += result.events
        self.stats.inserted += result.inserted
        return result

    def _fold(self, conn: sa.Connection, events: list[StreamEvent]) -> BatchResult:
        result = apply(conn, Stream(events))
        if self.on_batch is not None:
            self.on_batch(conn, events, result)
        return result

    def _write_singly(self, events: list[StreamEvent]) -> BatchResult:
        total = BatchResult(events=len(events))
        for ev in events:
            try:
                with self.engine.begin() as conn:
                    total.inserted += self._fold(conn, [ev]).inserted
            except (sa.exc.IntegrityError, sa.exc.DataError) as exc:
                with self.engine.begin() as conn:
                    total.inserted += apply(conn, Stream([quarantined(ev, exc)])).inserted
        return total

    def trim(self) -> int:
        """Trim entries every group has read and acknowledged; returns entries removed."""
        self._next_trim = time.monotonic() + self.trim_every_s
        floor = self.safe_trim_id()
        if floor is None:
            return 0
        removed = int(self.client.xtrim(self.stream, minid=floor, approximate=True))
        self.stats.trimmed += removed
        return removed

    def safe_trim_id(self) -> str | None:
        """The lowest stream id any consumer group may still need (MINID keeps it and above)."""
        try:
            groups = self.client.xinfo_groups(self.stream)
        except redis.ResponseError:
            return None  # no stream yet
        floor: tuple[int, int] | None = None
        for g in groups:
            name = _s(g["name"])
            # XINFO's pending count may be stale by the time XPENDING answers (another consumer
            # acknowledged meanwhile): no oldest pending entry means none is pending.
            oldest = self.client.xpending(self.stream, name)["min"] if int(g["pending"]) else None
            if oldest is not None:
                need = _s(oldest)
            else:
                ms, seq = _split(_s(g["last-delivered-id"]))
                need = f"{ms}-{seq + 1}"
            key = _split(need)
            if floor is None or key < floor:
                floor = key
        return None if floor is None else f"{floor[0]}-{floor[1]}"

    # ---------------------------------------------------------------------------- looping

    def run(self, stop_event: threading.Event) -> None:
        """Record until ``stop_event`` is set; SQL or Redis outages are waited out."""
        delay = BACKOFF_MIN_S
        while not stop_event.is_set():
            try:
                self.run_once(block_ms=self.block_ms)
                delay = BACKOFF_MIN_S
            except (sa.exc.SQLAlchemyError, *REDIS_ERRORS, OSError) as exc:
                self.stats.failures += 1
                if isinstance(exc, REDIS_ERRORS):
                    self._group_ready = False  # Redis may have restarted empty
                log.warning("recorder %s: %s; retrying in %.1fs", self.label,
                            _one_line(exc), delay)
                stop_event.wait(delay)
                delay = min(delay * 2, BACKOFF_MAX_S)

    def pending(self) -> int:
        """Entries delivered to some consumer of the group but not yet acknowledged."""
        return backlog(self.client, self.stream)[1]

    def lag(self) -> int:
        """Entries in the stream not yet recorded (unread plus pending)."""
        return backlog(self.client, self.stream)[0]


def backlog(client: redis.Redis, stream: str) -> tuple[int, int]:
    """(lag, pending) of the recorders' group on ``stream``: lag is every entry not yet
    recorded in SQL (unread plus pending), pending those read but not yet committed. The one
    count ``status``, ``doctor``, ``top``, the exporter and ``recorder status`` all print.
    Before any recorder made the group, every entry of the stream is lag.

    Unread is what the stream holds after the group's last-delivered id, counted
    (:func:`unread`), never the ``lag`` XINFO GROUPS reports: Redis computes that from the
    group's entries-read counter, which a failover, ``XGROUP SETID`` or ``XGROUP CREATE ...
    ENTRIESREAD`` can leave wrong, and a wrong one stays wrong for good (the stream empty,
    nothing pending, a lag of 148 forever). Pending is the group's pending entries list."""
    try:
        groups = client.xinfo_groups(stream)
    except redis.ResponseError:  # no stream yet
        return 0, 0
    for g in groups:
        if _s(g["name"]) == GROUP:
            pending = int(g["pending"])
            return unread(client, stream, _s(g["last-delivered-id"])) + pending, pending
    return int(client.xlen(stream)), 0


def unread(client: redis.Redis, stream: str, last: str) -> int:
    """How many entries of ``stream`` come after id ``last``, exactly, reading the shorter
    side of ``last``: one transaction (one slot, so a cluster takes it too) holds XLEN and up
    to ``LAG_PAGE`` entries each side; a side that ends within its page is counted, the other
    is XLEN less it. The side before ``last`` is short where a recorder runs (it trims what it
    acknowledged), the side after it where a recorder keeps up: the usual cost is one round
    trip of a few entries. Both sides longer than a page (a backlog, and a stream nobody
    trims): further pages, up to ``LAG_COUNT_MAX`` entries read in all."""
    after, before = "(" + last, last
    n_after = n_before = 0
    while True:
        pipe = client.pipeline(transaction=True)
        pipe.xlen(stream)
        pipe.xrange(stream, after, "+", count=LAG_PAGE)
        pipe.xrevrange(stream, before, "-", count=LAG_PAGE)
        length, later, earlier = pipe.execute()
        n_after, n_before = n_after + len(later), n_before + len(earlier)
        if len(later) < LAG_PAGE:
            return n_after
        if len(earlier) < LAG_PAGE or n_after + n_before >= LAG_COUNT_MAX:
            return max(int(length) - n_before, n_after)
        after, before = "(" + _s(later[-1][0]), "(" + _s(earlier[-1][0])


def quarantined(ev: StreamEvent, exc: BaseException) -> StreamEvent:
    """A stand-in for an entry SQL refused: its id and kind kept, the reason recorded."""
    out = StreamEvent(ev.entry, {"kind": "invalid", "ts": ev.fields.get("ts", ""),
                                 "error": _one_line(exc)[:500],
                                 "original_kind": ev.fields.get("kind", "")[:24]})
    out.id = ev.id
    return out


def _decode(fields: dict[Any, Any]) -> dict[str, str]:
    """The entry's fields as text, NUL replaced (PostgreSQL text cannot hold NUL; a host's
    output might). A client with ``decode_responses`` already gives text: checked in one
    join instead of field by field."""
    try:
        joined = "".join(fields.values())
    except TypeError:  # bytes: decode every key and value
        fields = {_s(k): _s(v) for k, v in fields.items()}
        joined = "".join(fields.values())
    if "\x00" in joined:
        fields = {_s(k): v.replace("\x00", "\ufffd") for k, v in fields.items()}
    return fields


def _split(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"


__all__ = ["GROUP", "Recorder", "RecorderStats", "backlog", "default_consumer_name",
           "unread"]
