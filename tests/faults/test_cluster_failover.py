"""A worker node drains jobs while the master serving the queue's slot is killed with kill -9:
its replica is promoted, the node carries on, and the history checker judges what happened. And
a node outlives the whole cluster going down (its cluster client then raises an error that is
no RedisError) and coming back.

Each job is a local command that appends one line to a file named after its host, so a job
that ran twice shows up as two lines even where the record lost the first run. The cluster
replicates asynchronously: a write the dead master acknowledged but had not yet sent to its
replica is gone after the failover (``appendfsync always`` only guards a restart of the same
node). What that costs is measured here and printed; see docs/architecture.md, "Redis Cluster".
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from scheduler.config import load_settings
from scheduler.redisdb.connect import connect
from tests.cluster import RedisCluster
from tests.faults.history import judge, read_stream
from tests.worker_support import WorkerProcess, final_outcomes, submit, wait_until, worker_args

JOBS = 60


def runs(folder: Path) -> Counter[str]:
    """How many times each host's job ran: the lines its command appended."""
    return Counter({p.name: len(p.read_text().splitlines()) for p in folder.iterdir()})


def test_a_node_drains_its_jobs_through_the_failover_of_the_queues_master(
        cluster_url: str, redis_cluster: RedisCluster, tmp_path: Path) -> None:
    client = connect(load_settings({"redis_url": cluster_url}, environ={}, config_path=None))
    ran = tmp_path / "ran"
    ran.mkdir()
    # Given 60 jobs of 0.1 s, each appending a line per run, and a node running 4 at a time
    script = f"echo run >> {ran}/{{host.name}}; sleep 0.1"
    jobs = submit(client, "51", JOBS, params={"cmd": ["sh", "-c", script]}, executor="local",
                  max_attempts=5, backoff_ms=100)
    node = WorkerProcess(cluster_url, tmp_path, worker_args("fo-1", slots=4, processes=1,
                                                            lease="3s")).start()
    try:
        wait_until(lambda: len(list(ran.iterdir())) >= JOBS // 4, 30, "a quarter of the jobs",
                   node.tail, [node])
        # When the master of {fs}'s slot is killed -9 and its replica takes over
        started = time.monotonic()
        killed, promoted = redis_cluster.kill_master_of("{fs}")
        took = time.monotonic() - started
        # Then the node carries on by itself, and every job ends
        wait_until(lambda: set(final_outcomes(client, jobs).values()) == {"acked"}, 90,
                   "every job acked after the failover", node.tail, [node])
        assert node.proc.poll() is None
    finally:
        node.stop()
    counted = runs(ran)
    verdict = judge(read_stream(client), require_end=True)
    client.close()
    twice = {host: n for host, n in counted.items() if n > 1}
    print(f"failover of {killed.address} to {promoted.address} in {took:.1f}s; "
          f"{len(counted)} jobs ran, {len(twice)} more than once {twice}; "
          f"history: {verdict.report()}")
    assert len(counted) == JOBS  # nothing was lost for good: every job ran at least once
    assert verdict.ok, verdict.report()
    # and every run the files show is a claim the record shows (none vanished in the failover)
    assert sum(counted.values()) == verdict.counts["claims"]


def test_a_node_outlives_the_whole_cluster_going_down_and_coming_back(
        cluster_url: str, redis_cluster: RedisCluster, tmp_path: Path) -> None:
    settings = load_settings({"redis_url": cluster_url}, environ={}, config_path=None)
    client = connect(settings)
    before = submit(client, "61", 6, options={"duration_ms": 100})
    client.close()
    node = WorkerProcess(cluster_url, tmp_path, worker_args("fo-2", slots=2, processes=1,
                                                            lease="3s")).start()
    try:
        node.wait_registered(connect(settings))
        # When every node of the cluster is killed -9 and started again a second later
        for server in redis_cluster.nodes:
            server.kill()
        time.sleep(1)
        redis_cluster.heal()
        # Then the node (whose cluster client found no node for a while) carries on
        client = connect(settings)
        after = submit(client, "62", 4)
        wait_until(lambda: set(final_outcomes(client, before + after).values()) == {"acked"},
                   60, "every job acked after the outage", node.tail, [node])
        assert node.proc.poll() is None
        verdict = judge(read_stream(client), require_end=True)
        assert verdict.ok, verdict.report()
        client.close()
    finally:
        node.stop()
