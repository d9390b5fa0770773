"""Reaching Redis: the connection every part uses, and the embedded private server.

- ``connect``: ``connect(settings)``, refusing a Redis that could evict queued jobs;
- ``cluster``: the ``redis+cluster://`` URL, its ``RedisCluster`` client, and per-node commands;
- ``embedded``: the private ``redis-server`` under the state directory (the default);
- ``datadir``: the embedded server's data on disk, and the ``redis-server`` pinned to it.
"""

__all__ = ["cluster", "connect", "datadir", "embedded"]
