"""The queue core: the Python face of the Lua verbs and what they exchange.

- ``client``: ``Queue``, one method per Lua verb (``lua/<verb>.lua``), argument checks first;
- ``scripts``: the script registry, every script loaded once per Redis client;
- ``types``: the records the verbs take and return (``TaskSpec``, ``JobSpec``, ``Claim`` ...);
- ``keys``: every Redis key name (``Keys``), all under one hash tag;
- ``presence``: the worker presence hashes the heartbeats write, read by status and views;
- ``fairshare``: the overload check and the fair-share reorder of overdue jobs;
- ``waves``: the verbs of a rollout in waves (stage, release_wave, a wave state change);
- ``hosts``: the host hashes workers read at claim time (``write_hosts``);
- ``schedules``: a schedule's entry in the urgent due set (arm, disarm, fire).

No module outside this package packs a script's arguments.
"""

__all__ = ["client", "fairshare", "hosts", "keys", "presence", "schedules", "scripts", "types",
           "waves"]
