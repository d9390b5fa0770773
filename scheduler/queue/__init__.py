"""The queue core: the Python face of the Lua verbs and what they exchange.

- ``client``: ``Queue``, one method per Lua verb (``lua/<verb>.lua``), argument checks first;
- ``scripts``: the script registry, every script loaded once per Redis client;
- ``types``: the records the verbs take and return (``TaskSpec``, ``JobSpec``, ``Claim`` ...);
- ``keys``: every Redis key name (``Keys``), all under one hash tag;
- ``presence``: the worker presence hashes the heartbeats write, read by status and views;
- ``fairshare``: the overload check and the fair-share reorder of overdue jobs;
- ``waves``: the verbs of a rollout in waves (stage, release_wave, a wave state change).
"""

__all__ = ["client", "fairshare", "keys", "presence", "scripts", "types", "waves"]
