"""The live-output stream's lifetime once its task ended: ``{P}:output:<task>`` gets
``ENDED_TTL_S`` more, enough for its followers to read the last lines (then ``tasks output
--follow`` reads the recorded output). Here, below the workers and the operator verbs, because
both end tasks: a node's finisher after its jobs' acks and failures (``end_streams``), a cancel
that ends a task none of whose jobs runs (``end_task_stream``). What the stream holds and who
writes it is ``workers.liveout``'s.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

__all__ = ["ENDED_TTL_S", "END_FIELDS", "end_streams", "end_task_stream", "ended_tasks"]

log = logging.getLogger(__name__)

ENDED_TTL_S = 60  # a task's stream lives this long after its task ended
END_FIELDS = ("total", "succeeded", "failed", "cancelled", "running", "state", "wave_state")


def ended_tasks(client: Any, shards: Any, task_ids: Iterable[str]) -> list[str]:
    """Of these tasks, those whose live counters say they ended (one pipelined read)."""
    from scheduler.progress import from_task_hash

    ids = list(dict.fromkeys(task_ids))
    if not ids:
        return []
    pipe = client.pipeline(transaction=False)
    for tid in ids:
        pipe.hmget(shards.of_task(tid).task(tid), END_FIELDS)
    replies = pipe.execute()
    return [tid for tid, reply in zip(ids, replies)
            if any(v is not None for v in reply)
            and from_task_hash(dict(zip(END_FIELDS, reply))).ended]


def end_streams(client: Any, shards: Any, task_ids: Iterable[str]) -> list[str]:
    """Give the output stream of each of these tasks that ended ``ENDED_TTL_S`` to live (its
    followers read the last lines meanwhile); the tasks that ended."""
    ended = ended_tasks(client, shards, task_ids)
    if ended:
        pipe = client.pipeline(transaction=False)
        for tid in ended:
            pipe.expire(shards.of_task(tid).output(tid), ENDED_TTL_S)
        pipe.execute()
    return ended


def end_task_stream(queue: Any, task_id: str) -> bool:
    """After an operator's verb that may end a task without a job ending on a node (a cancel
    while none of its jobs runs): its stream gets ``ENDED_TTL_S`` if the task ended. ``queue``:
    a ``Queue`` or a sharded one. Best effort (the stream expires an hour after its last line
    anyway): never raises; True when the task had ended."""
    from scheduler.queue.depth import as_shards
    from scheduler.redisdb.connect import REDIS_ERRORS

    shards = as_shards(getattr(queue, "shards", None) or queue.keys)
    try:
        return bool(end_streams(queue.client, shards, [str(task_id)]))
    except REDIS_ERRORS as exc:
        log.debug("live output: task %s's stream keeps its hour (%s)", task_id,
                  type(exc).__name__)
        return False
