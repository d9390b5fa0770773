"""Recording at once what an operator command wrote to the stream.

:func:`record_now` (used by ``scheduler.submission.control`` and
``scheduler.submission.reconcile``) reads the entries of the given tasks appended after a
stream id (:func:`stream_tail`, taken before the command) and applies them in one transaction
through the record's one writer (``scheduler.record.state.apply`` of a ``Stream``), so the command's
effect is in SQL when it returns, not when a recorder next runs. Keyed by stream id: the
recorders' later pass, through the same ``Stream`` change, inserts nothing twice and still
applies an operator event whose command died before its SQL step.
"""

from __future__ import annotations

from collections.abc import Collection

import redis
from sqlalchemy.engine import Engine

from scheduler.queue.types import text
from scheduler.record.fold import StreamEvent, stream_shard
from scheduler.record.state import Stream, apply

__all__ = ["record_now", "stream_tail"]

READ_CHUNK = 1_000  # stream entries per XRANGE while recording


def stream_tail(client: redis.Redis, stream: str) -> str:
    """The id of the stream's last entry ("0-0" if empty): take it before the command."""
    last = client.xrevrange(stream, count=1)
    return text(last[0][0]) if last else "0-0"


def record_now(client: redis.Redis, engine: Engine, stream: str, since: str,
               task_ids: Collection[str]) -> list[StreamEvent]:
    """Apply the entries of ``task_ids`` appended to ``stream`` after ``since`` to SQL now,
    in one transaction (a ``Stream`` change); returns them."""
    mine: list[StreamEvent] = []
    wanted = set(task_ids)
    shard = stream_shard(stream)  # the events-table keys the recorders give this stream's entries
    start = "(" + since
    while wanted:
        batch = client.xrange(stream, min=start, count=READ_CHUNK)
        for entry_id, fields in batch:
            f = {text(k): text(v) for k, v in fields.items()}
            if f.get("task") in wanted:
                mine.append(StreamEvent(text(entry_id), f, shard))
        if len(batch) < READ_CHUNK:
            break
        start = "(" + text(batch[-1][0])
    if mine:
        with engine.begin() as conn:
            apply(conn, Stream(mine))
    return mine
