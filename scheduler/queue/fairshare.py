"""Fair share under overload (seed 002): the reorder of overdue jobs, and the overload check.

Owns:
1. the overload check a worker runs after each claim (:func:`maybe_reorder`): free of Redis
   calls while the claim shows no overload; otherwise at most one cheap script call
   (``overload.lua`` begin) per :data:`CHECK_INTERVAL_S` per worker;
2. the overload-handling lock (``{P}:lock:overload``: SET NX PX with a TTL, renewed by every
   chunk, released only by its owner) and the rule that avoids pointless reorders (see
   ``scheduler/queue/lua/overload.lua`` and docs/concepts/fair-share.md);
3. the reorder itself (:func:`run_reorder`), in a thread of its own so the claim loop goes on:
   per overloaded class, read the overdue range in pages, group it by share key, compute the
   interleaved order (:func:`interleave`), and apply it in chunks of :data:`CHUNK` moves with
   compare-and-set (``Queue.reorder_chunk``), every new score below the head of the set;
4. recording it: one ``reorder`` event and the ``reorder_*`` summary in ``{P}:stats``.

Priority classes are reordered separately: fair share works inside a class.
"""

from __future__ import annotations

import json
import logging
import math
import os
import socket
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import redis

from scheduler.config import Settings
from scheduler.queue.client import Claim, Queue
from scheduler.queue.types import text
from scheduler.redisdb.connect import REDIS_ERRORS

__all__ = ["CHUNK", "PAGE", "ReorderStart", "ReorderSummary", "begin", "interleave",
           "maybe_reorder", "read_overdue", "reorder_now", "run_reorder", "share_keys"]

log = logging.getLogger(__name__)

PAGE = 2_000  # overdue entries read per ZRANGE (by rank): about a millisecond of Redis time
OVERLAP = 500  # entries re-read at each page boundary, so claims in between shift no entry past us
CHUNK = 200  # moves per reorder.lua call: about a millisecond of Redis time
CHECK_INTERVAL_S = 0.2  # an overloaded worker asks "reorder now?" at most this often
GAP_FACTOR = 4  # the next reorder waits at least this many times the last one's duration


@dataclass(frozen=True)
class ReorderStart:
    """A reorder this worker may run: it holds the lock under ``token``."""

    token: str
    now_ms: int  # the cut: jobs due at or before it are the overdue range
    classes: list[str]  # the overloaded classes (all classes with jobs when forced)
    worker: str


@dataclass
class ReorderSummary:
    """What one reorder did (also the ``detail`` of its ``reorder`` event)."""

    jobs: int = 0  # jobs given a new score
    tasks: int = 0  # share keys (tasks, or operators) met in the overdue ranges
    overdue: int = 0  # overdue entries read
    duration_ms: int = 0
    chunks: int = 0  # reorder.lua calls
    longest_call_ms: float = 0.0  # the longest single Redis call (read page or chunk), client side
    classes: list[str] = field(default_factory=list)
    cut_ms: int = 0  # the Redis clock when it began: entries due at or before it were overdue
    complete: bool = True  # False: the lock was lost (expired) before the end
    calls_ms: list[float] = field(default_factory=list, repr=False)  # every call, for benchmarks

    def detail(self) -> str:
        fields = {k: v for k, v in asdict(self).items() if k != "calls_ms"}
        fields["longest_call_ms"] = round(self.longest_call_ms, 3)
        return json.dumps(fields, sort_keys=True)


# ------------------------------------------------------------------------- the overload lock

def _overload(queue: Queue, args: Sequence[object]) -> list:
    """Call overload.lua."""
    keys = [*queue.keys.all_due(), queue.keys.overload_lock, queue.keys.stats, queue.keys.events]
    return queue.call("overload", keys, list(args))


def default_worker() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


def begin(queue: Queue, settings: Settings, *, force: bool = False,
          worker: str | None = None) -> ReorderStart | None:
    """Take the overload lock if a reorder is due now (overload.lua ``begin``); None if not."""
    worker = worker or default_worker()
    token = f"{worker}:{uuid.uuid4().hex}"
    reply = _overload(queue, ["begin", token, settings.overload_lock_ms,
                              settings.overload_threshold_ms, 1 if force else 0])
    if int(reply[0]) != 1:
        log.debug("no reorder: %s", text(reply[2]))
        return None
    return ReorderStart(token, int(reply[1]), text(reply[2]).split(), worker)


def _finish(queue: Queue, start: ReorderStart, summary: ReorderSummary, gap_ms: int) -> None:
    _overload(queue, ["finish", start.token, start.worker, gap_ms, summary.detail(), summary.jobs,
                      summary.tasks, summary.duration_ms, summary.chunks,
                      math.ceil(summary.longest_call_ms)])


def _unlock(queue: Queue, token: str) -> None:
    _overload(queue, ["unlock", token])


# ------------------------------------------------------------------------- the reorder

def read_overdue(client: redis.Redis, key: str, cut_ms: int,
                 timed: Callable[[float], None] | None = None) -> list[tuple[str, float]]:
    """Entries of ``key`` scored at or before ``cut_ms``, in set order, read in pages by rank.

    Pages overlap by :data:`OVERLAP` entries and duplicates are dropped, so claims taking
    entries off the front between two pages make no entry slip past unread (unless more than
    OVERLAP of them happen in between: such an entry is merely left out of this reorder).
    """
    seen: set[str] = set()
    out: list[tuple[str, float]] = []
    start = 0
    while True:
        t0 = time.perf_counter()
        page = client.zrange(key, start, start + PAGE - 1, withscores=True)
        if timed:
            timed((time.perf_counter() - t0) * 1000)
        for member, score in page:
            member = member.decode() if isinstance(member, bytes) else member
            if score > cut_ms:
                out.sort(key=lambda e: (e[1], e[0]))
                return out
            if member not in seen:
                seen.add(member)
                out.append((member, score))
        if len(page) < PAGE:
            break
        start += PAGE - OVERLAP
    out.sort(key=lambda e: (e[1], e[0]))
    return out


def share_keys(queue: Queue, task_ids: Sequence[str], by: str) -> dict[str, str]:
    """Task id -> share key. ``task``: the task itself. ``operator``: the task hash's ``share``
    field when set to something other than the task id, else its ``operator``, else the task."""
    if by != "operator":
        return {t: t for t in task_ids}
    pipe = queue.client.pipeline(transaction=False)
    for t in task_ids:
        pipe.hmget(queue.keys.task(t), "share", "operator")
    out: dict[str, str] = {}
    for t, (share, operator) in zip(task_ids, pipe.execute()):
        share = share.decode() if isinstance(share, bytes) else share
        operator = operator.decode() if isinstance(operator, bytes) else operator
        out[t] = ("share:" + share if share and share != t
                  else "operator:" + operator if operator else "task:" + t)
    return out


def interleave(entries: Sequence[tuple[str, float]],
               share_of: Callable[[str], str]) -> list[tuple[str, float]]:
    """Round robin over share keys: the first entry of each key (keys in order of their first
    entry), then the second of each, and so on; each key keeps its own order."""
    rank: dict[str, int] = {}
    first: dict[str, int] = {}
    keyed = []
    for i, (job_id, _score) in enumerate(entries):
        key = share_of(job_id)
        r = rank.get(key, 0)
        rank[key] = r + 1
        keyed.append((r, first.setdefault(key, len(first)), i))
    keyed.sort()
    return [entries[i] for _, _, i in keyed]


def run_reorder(queue: Queue, settings: Settings, start: ReorderStart, *,
                on_chunk: Callable[[int], None] | None = None) -> ReorderSummary:
    """Reorder the overdue pending jobs of ``start.classes``, record it, release the lock.

    ``on_chunk(i)`` is called after chunk ``i`` (tests use it to claim in between, or to be
    killed between chunks). Raises what Redis raises; the lock is then released (or expires).
    """
    summary = ReorderSummary(classes=list(start.classes), cut_ms=start.now_ms)
    t_start = time.perf_counter()
    lock_ms = settings.overload_lock_ms

    def timed(ms: float) -> None:
        summary.calls_ms.append(ms)
        summary.longest_call_ms = max(summary.longest_call_ms, ms)

    try:
        for prio in start.classes:
            if not _reorder_class(queue, settings, start, prio, summary, timed, lock_ms, on_chunk):
                summary.complete = False
                break
        summary.duration_ms = round((time.perf_counter() - t_start) * 1000)
        gap = max(settings.overload_threshold_ms, GAP_FACTOR * summary.duration_ms)
        _finish(queue, start, summary, gap)
    except BaseException:
        try:
            _unlock(queue, start.token)
        except REDIS_ERRORS:
            pass  # the lock expires after its TTL
        raise
    log.info("fair-share reorder: %d jobs of %d tasks moved in %d ms (%d chunks, longest call "
             "%.1f ms)%s", summary.jobs, summary.tasks, summary.duration_ms, summary.chunks,
             summary.longest_call_ms, "" if summary.complete else "; lock lost, stopped")
    return summary


def _reorder_class(queue: Queue, settings: Settings, start: ReorderStart, prio: str,
                   summary: ReorderSummary, timed: Callable[[float], None], lock_ms: int,
                   on_chunk: Callable[[int], None] | None) -> bool:
    """One class's reorder; False when the lock was lost."""
    entries = read_overdue(queue.client, queue.keys.due(prio), start.now_ms, timed)
    summary.overdue += len(entries)
    tasks = sorted({job_id.rpartition(".")[0] for job_id, _ in entries})
    keys = share_keys(queue, tasks, settings.fair_share_by)
    shares = len(set(keys.values()))
    summary.tasks += shares
    if shares < 2:
        return _renew(queue, prio, start, lock_ms, timed)  # one share: due order is fair already
    order = interleave(entries, lambda job_id: keys[job_id.rpartition(".")[0]])
    base = math.floor(entries[0][1]) - len(order)  # every new score below the head
    for first in range(0, len(order), CHUNK):
        moves = [(job_id, score, base + first + k)
                 for k, (job_id, score) in enumerate(order[first:first + CHUNK])]
        t0 = time.perf_counter()
        moved = queue.reorder_chunk(prio, start.token, lock_ms, moves)
        timed((time.perf_counter() - t0) * 1000)
        summary.chunks += 1
        if moved is None:
            return False
        summary.jobs += moved
        if on_chunk is not None:
            on_chunk(summary.chunks)
    return True


def _renew(queue: Queue, prio: str, start: ReorderStart, lock_ms: int,
           timed: Callable[[float], None]) -> bool:
    t0 = time.perf_counter()
    owned = queue.reorder_chunk(prio, start.token, lock_ms, []) is not None
    timed((time.perf_counter() - t0) * 1000)
    return owned


def reorder_now(queue: Queue, settings: Settings, *, force: bool = False, worker: str | None = None,
                on_chunk: Callable[[int], None] | None = None) -> ReorderSummary | None:
    """Run a reorder in this thread if one is due (or ``force``); None if none was started."""
    start = begin(queue, settings, force=force, worker=worker)
    if start is None:
        return None
    return run_reorder(queue, settings, start, on_chunk=on_chunk)


# ------------------------------------------------------------------------- the worker's hook

@dataclass
class _Watch:
    last_check: float = -math.inf
    thread: threading.Thread | None = None


_watches: weakref.WeakKeyDictionary[Queue, _Watch] = weakref.WeakKeyDictionary()


def maybe_reorder(queue: Queue, claim: Claim, settings: Settings, *,
                  worker: str | None = None) -> threading.Thread | None:
    """The worker's overload check, called after every claim; returns the reorder thread started.

    No Redis call unless the claim shows the earliest due entry late by more than
    ``overload_threshold_ms``; then, at most every :data:`CHECK_INTERVAL_S` and while no
    reorder of this worker runs, ``begin`` decides; a reorder runs in a daemon thread with a
    Queue of its own, so the claim loop never waits for it.
    """
    if settings.fair_share_by == "off" or claim.next_due_ms is None:
        return None
    if claim.now_ms - claim.next_due_ms <= settings.overload_threshold_ms:
        return None
    watch = _watches.setdefault(queue, _Watch())
    if watch.thread is not None and watch.thread.is_alive():
        return None
    now = time.monotonic()
    if now - watch.last_check < CHECK_INTERVAL_S:
        return None
    watch.last_check = now
    try:
        start = begin(queue, settings, worker=worker)
    except REDIS_ERRORS as exc:
        log.warning("overload check failed (%s); the next claim tries again", exc)
        return None
    if start is None:
        return None
    own = Queue(queue.client, queue.keys, lease_ms=queue.lease_ms)
    watch.thread = threading.Thread(target=_run_logged, args=(own, settings, start),
                                    name="fair-share reorder", daemon=True)
    watch.thread.start()
    return watch.thread


def _run_logged(queue: Queue, settings: Settings, start: ReorderStart) -> None:
    try:
        run_reorder(queue, settings, start)
    except Exception as exc:  # noqa: BLE001 - a failed reorder loses nothing (scores only move)
        log.warning("fair-share reorder stopped (%s); its lock was released or expires", exc)
