"""Reaching Redis: the connection every part uses, and the embedded private server.

- ``connect``: ``connect(settings)``, refusing a Redis that could evict queued jobs;
- ``cluster``: the ``redis+cluster://`` URL, its ``RedisCluster`` client, and per-node commands;
- ``embedded``: the private ``redis-server`` under the state directory (the default).
"""

__all__ = ["cluster", "connect", "embedded"]
