"""kill -9 of a node while its jobs hold hosts (one job per host at a time) and a group limit's
places: the dead node's holds end with their leases, a second node finishes every job, the
limits were never exceeded (counted from the queue's own events), nothing is left held or
waiting, and the history checker finds nothing wrong."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from scheduler.queue.client import Queue
from tests.faults.history import check_stream
from tests.worker_support import (
    KEYS,
    dump,
    events,
    final_outcomes,
    started_workers,
    submit,
    wait_until,
)

HOSTS = ["db-1", "db-2", "db-3", "web-1"]
LIMITED = {"db-1", "db-2", "db-3"}  # group db, at most 2 jobs at once


@pytest.fixture
def start_worker(redis_url: str, tmp_path: Path):
    with started_workers(redis_url, tmp_path) as start:
        yield start


def most_at_once(evs: list[dict[str, str]]) -> tuple[int, int]:
    """(most jobs running at once on one host, most at once in group db), in stream order."""
    running: dict[str, str] = {}  # job -> host
    most_host = most_group = 0
    for e in evs:
        if e["kind"] == "claim":
            running[e["job"]] = e["host"]
        elif e["kind"] in ("ack", "fail", "retry", "release", "defer", "lost"):
            running.pop(e["job"], None)
        else:
            continue
        per_host = Counter(running.values())
        most_host = max(most_host, max(per_host.values(), default=0))
        most_group = max(most_group, sum(1 for h in running.values() if h in LIMITED))
    return most_host, most_group


def test_a_killed_node_s_holds_end_with_its_leases_and_the_limits_hold_throughout(
        redis_client, start_worker) -> None:
    # Given group db limited to 2, and three tasks on the same four hosts (idempotent, 1.5 s)
    queue = Queue(redis_client, KEYS)
    queue.set_group_limit("db", 2, "ops")
    jobs = []
    for task in ("31", "32", "33"):
        jobs += submit(redis_client, task, HOSTS, options={"duration_ms": 1500},
                       host_data={"limits": "db"}, idempotent=True)
    redis_client.hset(KEYS.host("web-1"), "limits", "")  # web-1 is in no limited group
    a = start_worker("node-a", slots=12, processes=2, lease="1s")
    wait_until(lambda: len(events(redis_client, ("claim",))) >= 3, 15, "the first claims",
               a.tail, [a])
    # When the node is killed with SIGKILL while its jobs hold hosts and group places
    assert redis_client.hlen(KEYS.busy) >= 1 and redis_client.hlen(KEYS.gholds) >= 1
    a.kill9()
    # Then a second node takes everything over once the leases have run out
    b = start_worker("node-b", slots=12, processes=2, lease="1s")
    wait_until(lambda: set(final_outcomes(redis_client, jobs).values()) == {"acked"}, 60,
               "every job acked", lambda: b.tail() + dump(redis_client), [b])
    # And the limits held all along: one job per host, at most 2 in group db
    assert most_at_once(events(redis_client)) == (1, 2)
    # And nothing is left held, counted or waiting
    assert redis_client.hlen(KEYS.busy) == 0 and redis_client.hlen(KEYS.gholds) == 0
    assert not redis_client.hgetall(KEYS.gbusy)
    assert not redis_client.keys(KEYS.gq("*")) and not redis_client.keys(KEYS.hostq("*"))
    lost = events(redis_client, ("lost",))
    assert lost and {e["worker"] for e in lost} == {"node-a"}
    check_stream(redis_client)
