"""Reaching Redis: the connection every part uses, and the embedded private server.

- ``connect``: ``connect(settings)``, refusing a Redis that could evict queued jobs;
- ``embedded``: the private ``redis-server`` under the state directory (the default).
"""

__all__ = ["connect", "embedded"]
