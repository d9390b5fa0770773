"""How the system is now: ``status`` (the health checks) and ``snapshot`` (one frame of the
queue, what ``top`` shows; ``frames``: one after another, as ``top`` redraws them); for a
customer, ``tenant_status`` (its own counts).

1. ``status`` runs ``scheduler.health.checks.status``: every check is a finding (ok, warn or
   fail), a Redis or database that does not answer among them, never an exception.
2. ``snapshot`` reads every shard through :func:`queue_view`; a shard that does not answer (its
   master failing over) is a line of the frame, not an error. So on a cluster the connection
   skips the eviction check of every master (``status`` makes it), and the shard count is
   checked only while shard 0 answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from scheduler.verbs.stores import Stores

if TYPE_CHECKING:
    import redis

    from scheduler.health.checks import Finding
    from scheduler.queue.shards import Shards
    from scheduler.views import QueueSnapshot

__all__ = ["frames", "queue_view", "snapshot", "status", "tenant_status"]


def status(stores: Stores) -> list[Finding]:
    """The health of Redis, the queue's identity, the database, workers, recorder lag, overdue
    jobs and stuck tasks (``health.checks.healthy`` says whether any failed)."""
    from scheduler.health.checks import status as run_status

    return run_status(stores.settings)


def tenant_status(stores: Stores, tenant: str) -> dict[str, Any]:
    """What ``status`` answers a customer: its hosts, tasks and jobs by state, counted in SQL
    (``record.tenancy.tenant_counts``). The health findings are the team's: they count every
    customer's jobs and name the team's machines."""
    from scheduler.record.tenancy import tenant_counts

    with stores.reading() as session:
        return tenant_counts(session, tenant)


@contextmanager
def queue_view(stores: Stores) -> Iterator[tuple[redis.Redis, Shards]]:
    """A Redis client and the queue's shards to read frames from (``views.live.top`` redraws
    them); a shard count other than the queue's is refused, in one line, while shard 0
    answers. The client is closed afterwards."""
    from scheduler.queue.sharded import check_shard_count
    from scheduler.redisdb.cluster import is_cluster_url
    from scheduler.redisdb.connect import REDIS_ERRORS, connect

    settings = stores.settings
    client = connect(settings, check=not is_cluster_url(settings.redis_url))
    shards = stores.shards  # every shard's tasks and counts, summed
    try:
        try:
            check_shard_count(client, shards)
        except REDIS_ERRORS:
            pass  # shard 0 does not answer: the frame says so
        yield client, shards
    finally:
        client.close()


def snapshot(stores: Stores) -> QueueSnapshot:
    """One frame of the whole queue: due, overdue, running, parked, deferred, held and dead
    jobs, the tasks and the workers (``views.take_snapshot``)."""
    with frames(stores) as take:
        return take()


@contextmanager
def frames(stores: Stores) -> Iterator[Callable[[], QueueSnapshot]]:
    """``take()``: a frame of the queue each time it is called, read on one client (closed
    afterwards) through :func:`queue_view`."""
    from scheduler.views import take_snapshot

    threshold = stores.settings.overload_threshold_ms
    with queue_view(stores) as (client, shards):
        yield lambda: take_snapshot(client, shards, overload_threshold_ms=threshold)
