"""Group limits from SQL to Redis, so what claim enforces is what the inventory says.

SQL keeps each group's limit as the operator gave it (``groups.max_busy``: N or P% of the
group's hosts). Redis keeps what ``claim.lua`` reads: ``{P}:glimit`` (group -> jobs at once)
and each host hash's ``limits`` field (the limited groups it is in). :func:`push` writes both
from SQL, changing only what differs: after ``groups limit``; after an inventory import (a P%
limit follows the group's size, and a host that joined or left a limited group counts right);
and at ``reconcile`` (a limit Redis lost would not be enforced). Only hosts Redis knows get a
``limits`` field: the others get theirs when a task is submitted to them (``write_hosts``).

A queue of several shards keeps ``glimit`` in shard 0 (the queue passed in: ``shards.coord``)
and a copy of a host's hash in the shard of each task submitted to it: every shard's copy of a
host gets the ``limits`` field (``shards``).
"""

from __future__ import annotations

from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from scheduler.inventory.store import group_limits, group_member_map, limit_count, limited_groups_of
from scheduler.queue.client import Queue
from scheduler.queue.shards import Shards
from scheduler.queue.types import text

__all__ = ["push"]


def push(engine: Engine, queue: Queue, operator: str, *, dry_run: bool = False,
         shards: Shards | None = None) -> int:
    """Make Redis's group limits and hosts' ``limits`` fields what SQL says; how many groups'
    limits were wrong (hosts' fields are fixed silently: they follow the groups).

    ``queue``: the queue of shard 0, which holds the limits; ``shards``: every shard whose
    host copies get the ``limits`` field (None: the queue's own shard only)."""
    client, keys = queue.client, queue.keys
    copies = shards.all if shards is not None else (keys,)
    have = {text(g): text(n) for g, n in client.hgetall(keys.glimit).items()}
    with Session(engine) as session:
        specs = group_limits(session)
        if not specs and not have:
            return 0  # no limit anywhere: nothing to read, nothing to fix
        members = group_member_map(session)
        want = {g: limit_count(spec, len(members.get(g, ()))) for g, spec in specs.items()}
        hosts = sorted(members.get("all", set()))
        host_limits = limited_groups_of(session, hosts, members)
    wrong = sorted(g for g in set(want) | set(have) if str(want.get(g, "")) != have.get(g, ""))
    if dry_run:
        return len(wrong)
    # Hosts first, then the limits: a host may still name a group that is no longer limited.
    copied = [(shard, host) for shard in copies for host in hosts]
    pipe = client.pipeline(transaction=False)
    for shard, host in copied:
        pipe.hget(shard.host(host), "limits")
        pipe.exists(shard.host(host))
    replies = pipe.execute()
    pipe = client.pipeline(transaction=False)
    for i, (shard, host) in enumerate(copied):
        now, known = replies[2 * i], replies[2 * i + 1]
        should = ",".join(host_limits.get(host, ()))
        if known and text(now or "") != should:
            pipe.hset(shard.host(host), "limits", should)
    pipe.execute()
    for group in wrong:
        queue.set_group_limit(group, want.get(group), operator)
    return len(wrong)
