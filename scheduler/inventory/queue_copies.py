"""The queue's copies of a host's connection data, dropped when the host leaves the inventory.

A host's hash (``Keys.host``) is written into the shard of each task submitted to it; after
``hosts remove`` none may stay, so a job of it still queued fails at its claim (the host is
unknown) instead of reaching a machine that is no longer the fleet's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from scheduler.queue.route import every_shard

if TYPE_CHECKING:
    import redis

    from scheduler.queue.keys import Keys
    from scheduler.queue.shards import Shards

__all__ = ["drop_host"]


def drop_host(client: redis.Redis, where: Keys | Shards, name: str) -> None:
    """Delete host ``name``'s hash in every shard of the queue."""
    for keys in every_shard(where):
        client.delete(keys.host(name))
