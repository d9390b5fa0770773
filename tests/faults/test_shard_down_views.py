"""``top --once`` and ``status`` while a shard's master is down or failing over: the shard is
one line, down, and the other shards' figures are shown, instead of the command failing
(issue 26 section 6). ``scheduler.queue.depth.answering`` asks each shard on its own.

A queue of 3 shards on the real 3-master test cluster, each shard on its own master: task 3 in
shard 0, task 1 in shard 1, task 2 in shard 2, two jobs due in each. The master of shard 2 is
killed -9, and either left down (``RedisCluster.down_for_good``: the other masters serve their
slots meanwhile) or replaced by its replica about 2.5 s later (the commands run at once,
within the failover). The cluster fixture heals the cluster after each test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.queue.client import JobSpec, Queue, TaskSpec
from scheduler.queue.shards import Shards
from tests.cli_support import isolated_env, run_cli
from tests.conftest import cluster_client

SHARDS = Shards("fs", 3)
TASKS = {0: "3", 1: "1", 2: "2"}  # shard -> task id (id mod 3)


@pytest.fixture
def queue_on_cluster(cluster_url: str, tmp_path: Path) -> dict[str, str | None]:
    """Two due jobs of a task in each shard, a live node's presence in shard 0; the CLI
    environment (3 shards, a SQLite record)."""
    from scheduler.queue.presence import redis_now_ms
    from scheduler.queue.sharded import check_shard_count
    from scheduler.record.migrate import upgrade

    client = cluster_client(cluster_url)
    try:
        check_shard_count(client, SHARDS)
        masters = {client.get_node_from_key(k.tag).name for k in SHARDS.all}
        assert len(masters) == 3  # each shard on its own master
        for shard, tid in TASKS.items():
            assert SHARDS.index_of_task(tid) == shard
            q = Queue(client, SHARDS.of_task(tid), lease_ms=60_000)
            q.create_task(TaskSpec(tid))
            q.enqueue(tid, [JobSpec(f"{tid}.{n}", f"h{tid}{n}") for n in range(2)])
        client.hset(SHARDS.coord.workers, "w1", json.dumps(
            {"node": "n1", "pid": 1, "slots": 4, "busy": 0, "lease_ms": 60_000,
             "ms": redis_now_ms(client, SHARDS.coord)}))
    finally:
        client.close()
    url = f"sqlite:///{tmp_path / 'record.db'}"
    upgrade(url)
    return isolated_env(tmp_path, FLEETSCHED_REDIS_URL=cluster_url, FLEETSCHED_DATABASE_URL=url,
                        FLEETSCHED_QUEUE_SHARDS="3", NO_COLOR="1", COLUMNS="200")


def top_json(env: dict[str, str | None]) -> dict:
    code, out, err = run_cli(["top", "--once", "--output", "json"], env)
    assert code == 0 and "Traceback" not in err, err
    return json.loads(out)


def test_top_once_shows_a_shard_that_does_not_answer_as_one_line_and_the_others_figures(
        queue_on_cluster: dict[str, str | None], redis_cluster) -> None:
    # Given every shard answering: 6 jobs due, 3 tasks
    frame = top_json(queue_on_cluster)
    assert (frame["due_now"], len(frame["tasks"]), frame["shards_down"]) == (6, 3, [])
    # When shard 2's master is down
    with redis_cluster.down_for_good(SHARDS.all[2].tag):
        # Then top --once answers, shard 2 down, the figures those of shards 0 and 1
        frame = top_json(queue_on_cluster)
        assert [(d["shard"], d["tag"]) for d in frame["shards_down"]] == [
            (2, SHARDS.all[2].tag)]
        assert "ConnectionError" in frame["shards_down"][0]["error"]
        assert frame["due_now"] == 4
        assert sorted(t["task_id"] for t in frame["tasks"]) == ["1", "3"]
        # and the table has one line saying so
        code, out, err = run_cli(["top", "--once"], queue_on_cluster)
        assert code == 0 and "Traceback" not in err, err
        lines = [ln for ln in out.splitlines() if "down" in ln]
        assert len(lines) == 1
        assert lines[0].startswith(f"shard 2 {SHARDS.all[2].tag} down, left out of these "
                                   "figures: ConnectionError")


def test_top_once_during_a_shard_s_failover_shows_the_shard_down_instead_of_failing(
        queue_on_cluster: dict[str, str | None], redis_cluster) -> None:
    # Given shard 2's master killed -9, its replica not yet promoted (1 s node timeout)
    master = redis_cluster.master_of(SHARDS.all[2].tag)
    replica = redis_cluster.replica_of(master)
    master.kill()
    # When top --once runs at once, within the failover
    frame = top_json(queue_on_cluster)
    # Then it shows shard 2 down (the others too, if the cluster already said CLUSTERDOWN)
    assert 2 in [d["shard"] for d in frame["shards_down"]]
    assert frame["due_now"] == 2 * (3 - len(frame["shards_down"]))
    # and once the replica serves, every shard is back in the frame
    redis_cluster.await_master(replica)
    frame = top_json(queue_on_cluster)
    assert (frame["due_now"], len(frame["tasks"]), frame["shards_down"]) == (6, 3, [])


def test_status_shows_a_shard_that_does_not_answer_in_one_failed_line_and_reads_the_others(
        queue_on_cluster: dict[str, str | None], redis_cluster) -> None:
    with redis_cluster.down_for_good(SHARDS.all[2].tag):
        # When status runs while shard 2's master is down
        code, out, err = run_cli(["status", "--output", "json"], queue_on_cluster)
        assert "Traceback" not in err, err
        checks = json.loads(out)["checks"]
        # Then it fails, with one line for the shard
        assert code == 1
        down = [c for c in checks if c["check"] == "shards" and c["level"] == "fail"]
        assert len(down) == 1
        assert down[0]["message"].startswith(
            f"queue shard 2 {SHARDS.all[2].tag} does not answer: ConnectionError")
        assert "fleetsched redis status" in down[0]["hint"]
        # and the queue and the recorder are read in shards 0 and 1, shard 2 shown down
        by = {c["check"]: c for c in checks}
        assert by["queue"]["level"] == "ok" and by["workers"]["level"] == "ok"
        assert by["queue"]["data"]["due_by_shard"] == [2, 2, None]
        assert by["queue"]["message"].startswith("4 job(s) due (by shard: 2, 2, down)")
        assert by["recorder"]["data"]["shards"][2] is None
        assert by["recorder"]["message"].endswith(", down)")
        # and nothing else fails on the silent shard's account (the epoch is not judged)
        assert "epoch" not in by
        failed = {c["check"] for c in checks if c["level"] == "fail"}
        assert failed <= {"shards", "redis", "cluster"}

