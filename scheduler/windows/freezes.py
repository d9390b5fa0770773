"""Each host's freezes in Redis: how a freeze declared after a job was queued still holds it.

A job carries the freezes that applied to its host when it was submitted (its ``window``
field). A freeze assigned later reaches the claim through the host's hash (``Keys.host``),
which the claim reads in its own call: its ``freezes`` field
(``scheduler.windows.wire.HOST_FREEZES``) names the freezes assigned to the host now that are
not over. The master hands a job whose host has one to ``workers.deferral``; a host no freeze
covers costs nothing at the claim.

1. :func:`host_freezes`: from SQL, each host's freezes (its own, its groups', fleet-wide; as
   ``scheduler.windows.assignment.effective`` adds them up) that are not over;
2. :func:`push`: make the host hashes Redis holds, in every shard, carry exactly that field,
   changing only what differs. Called after ``windows assign``, ``unassign``, ``remove`` and
   ``sync``, and after an inventory change (a host that joined a frozen group). Only hosts
   Redis knows get the field, as with the ``limits`` field (``scheduler.submission.
   group_limits``): the others have no queued job, and the jobs of their next task carry
   their freezes;
3. :func:`push_or_warn`: the same, with Redis trouble as one warning line (the SQL change
   stands; ``fleetsched windows sync`` pushes again).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import redis
import sqlalchemy as sa
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session

from scheduler.calendar.windows import upcoming
from scheduler.errors import FleetschedError
from scheduler.queue.keys import Keys
from scheduler.queue.route import Where, every_shard
from scheduler.queue.types import text
from scheduler.record.models import Host, Window
from scheduler.record.types import utcnow
from scheduler.windows.assignment import effective
from scheduler.windows.wire import HOST_FREEZES

__all__ = ["host_freezes", "push", "push_or_warn"]

BATCH = 1_000  # hosts per pipeline round trip


def host_freezes(session: Session, now: datetime) -> dict[str, str]:
    """Every stored host's freezes that are not over at ``now``, as the field's text ('' none)."""
    names = list(session.scalars(sa.select(Host.name)))
    eff = effective(session, names)
    ahead: dict[str, bool] = {}
    out = {}
    for host in names:
        for f in eff[host].freezes:
            if f.name not in ahead:
                ahead[f.name] = bool(upcoming(f, now, 1))
        out[host] = " ".join(f.name for f in eff[host].freezes if ahead[f.name])
    return out


def push(engine: Engine, client: redis.Redis, keys: Where = Keys(),
         now: datetime | None = None) -> int:
    """Write each known host hash's ``freezes`` field where it differs from SQL; how many."""
    with Session(engine) as session:
        want = host_freezes(session, now or utcnow())
    copies = [(shard, host) for shard in every_shard(keys) for host in sorted(want)]
    changed = 0
    for start in range(0, len(copies), BATCH):
        chunk = copies[start:start + BATCH]
        pipe = client.pipeline(transaction=False)
        for shard, host in chunk:
            pipe.hget(shard.host(host), HOST_FREEZES)
            pipe.exists(shard.host(host))
        replies = pipe.execute()
        pipe = client.pipeline(transaction=False)
        for i, (shard, host) in enumerate(chunk):
            have, known = replies[2 * i], replies[2 * i + 1]
            should = want[host]
            if not known or text(have or "") == should:
                continue
            changed += 1
            if should:
                pipe.hset(shard.host(host), HOST_FREEZES, should)
            else:
                pipe.hdel(shard.host(host), HOST_FREEZES)
        pipe.execute()
    return changed


def push_or_warn(engine: Engine, connect: Any, keys: Where = Keys(), *,
                 if_any: bool = False) -> str | None:
    """:func:`push` through a new connection; a warning line when Redis fails, else None.
    ``if_any``: do nothing (no connection) unless SQL holds a freeze (an inventory change)."""
    if if_any:
        with Session(engine) as session:
            if session.scalars(sa.select(Window.id).where(Window.kind == "freeze")
                               .limit(1)).first() is None:
                return None
    try:
        client = connect()
        try:
            push(engine, client, keys)
        finally:
            client.close()
    except (FleetschedError, redis.RedisError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return (f"recorded, but Redis did not take the hosts' freezes ({first}); run "
                "`fleetsched windows sync`")
    return None
