"""Worker presence is judged on the Redis clock (issue 12, defect 12): a node whose own clock is
an hour off is alive while it beats and stale once it is dead, for ``status``, ``top`` and
``worker list`` alike.

The node runs under libfaketime (a real clock offset for that process only, Debian package
``faketime``), against a real redis-server whose clock is right."""

from __future__ import annotations

import glob
from pathlib import Path

import redis

from scheduler.queue.presence import read_workers
from tests.servers import missing
from tests.worker_support import KEYS, started_workers, wait_until


def libfaketime() -> str:
    found = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))
    if not found:
        missing("libfaketime", "apt-get install faketime")
    return found[0]


def test_a_node_whose_clock_is_an_hour_ahead_is_alive_while_it_beats_and_stale_when_dead(
        redis_url: str, redis_client: redis.Redis, tmp_path: Path) -> None:
    skew = {"LD_PRELOAD": libfaketime(), "FAKETIME": "+1h"}
    with started_workers(redis_url, tmp_path) as start:
        w = start("skewed", env=skew, slots=2, processes=1, lease="3s")
        w.wait_registered(redis_client)
        wait_until(lambda: any(r["worker"] == "skewed" and r["age_s"] < 3
                               for r in read_workers(redis_client, KEYS.prefix)), 10,
                   "a fresh beat", w.tail, [w])
        [row] = [r for r in read_workers(redis_client, KEYS.prefix) if r["worker"] == "skewed"]
        # Its beat is stamped with the Redis clock, not its own an hour ahead
        assert not row["stale"] and row["age_s"] < 3, row
        w.kill9()
    # and once it is gone, it goes stale after two leases, as any node
    wait_until(lambda: [r["stale"] for r in read_workers(redis_client, KEYS.prefix)
                        if r["worker"] == "skewed"] == [True], 15, "the dead node to go stale")
