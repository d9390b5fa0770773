"""A queue of 3 shards, the write side: submit, the task verbs, windows, group limits,
reconcile, schedules and the wave controller each write where ``Shards`` says (a task and its
jobs and hosts in the shard of its id; windows in every shard; limits and schedule entries in
shard 0, the hosts' ``limits`` field in every copy). Real redis-server and SQLite; the CLI with
``FLEETSCHED_QUEUE_SHARDS=3``, and the Python entry points the nodes call."""

from __future__ import annotations

import json
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace

import pytest
import redis
import sqlalchemy as sa

from scheduler.queue.client import JobResult, Queue
from scheduler.queue.keys import Keys
from scheduler.queue.schedules import arm
from scheduler.queue.shards import Shards
from scheduler.record.migrate import upgrade
from scheduler.record.recorder import Recorder
from scheduler.schedules.firing import fire_claimed
from scheduler.submission.submit import TaskRequest, submit
from scheduler.windows.wire import REMOVED
from tests.submit_support import Cli, inventory, sql_rows
from workers.waver import Waver

SHARDS = Shards("fs", 3)
FLEET = "[web]\nweb-01\nweb-02\nweb-03\nweb-04\n[db]\ndb-01\ndb-02\n"
TASK = ["command", "-p", "cmd=true", "--executor", "simulate"]


@pytest.fixture
def cli(tmp_path: Path, redis_url: str) -> Cli:
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db, env={"FLEETSCHED_QUEUE_SHARDS": "3"})
    inventory(cli, tmp_path, FLEET)
    return cli


@pytest.fixture
def engine(cli: Cli):  # noqa: ANN201
    engine = sa.create_engine(cli.database_url)
    yield engine
    engine.dispose()


def holders(client: redis.Redis, key_of) -> list[int]:  # noqa: ANN001
    """The shards (by number) where ``key_of(keys)`` exists."""
    return [i for i, keys in enumerate(SHARDS.all) if client.exists(key_of(keys))]


def home(task: int) -> Keys:
    return SHARDS.of_task(str(task))


def task_state(client: redis.Redis, task: int) -> str | None:
    return client.hget(home(task).task(str(task)), "state")


def sql_task(cli: Cli, task: int):  # noqa: ANN201
    return sql_rows(cli.database_url, "SELECT state, priority FROM tasks WHERE id = :t", t=task)[0]


def record_shard(client: redis.Redis, engine: sa.Engine, keys: Keys) -> None:
    """Everything in one shard's event stream into SQL (a real Recorder, to the end)."""
    recorder = Recorder(client, engine, keys, "test-shard")
    while recorder.run_once(block_ms=None):
        pass


def test_submitted_tasks_land_whole_in_the_shard_of_their_id(
        cli: Cli, engine: sa.Engine, redis_client: redis.Redis) -> None:
    # When three tasks are submitted through the Python entry point with 3 shards
    request = TaskRequest(action="command", target="group:web", params={"cmd": "true"},
                          executor="simulate")
    ids = [submit(engine, lambda: redis_client, request, operator="tester", keys=SHARDS).task_id
           for _ in range(3)]
    # Then their ids fall in the three shards
    assert sorted(SHARDS.index_of_task(str(t)) for t in ids) == [0, 1, 2]
    for t in ids:
        me = SHARDS.index_of_task(str(t))
        keys = home(t)
        # each task hash, its jobs, its due entries and its hosts' copies are in its shard only
        assert holders(redis_client, lambda k: k.task(str(t))) == [me]
        for n in range(4):
            assert holders(redis_client, lambda k: k.job(f"{t}.{n}")) == [me]
        assert sorted(redis_client.zrange(keys.due("normal"), 0, -1)) == [f"{t}.{n}" for n in range(4)]
        assert redis_client.hget(keys.host("web-03"), "limits") == ""
        # and its shard's stream holds its events and no other task's
        tasks = {f.get("task") for _, f in redis_client.xrange(keys.events)}
        assert tasks == {str(t)}
    # and SQL says queued
    assert {sql_task(cli, t).state for t in ids} == {"active"}


def test_the_cli_task_verbs_act_in_the_shard_of_the_task(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given two tasks submitted through the CLI, in shards 1 and 2
    t1 = cli.submit(*TASK, "-t", "group:web")
    t2 = cli.submit(*TASK, "-t", "group:db")
    assert (SHARDS.index_of_task(str(t1)), SHARDS.index_of_task(str(t2))) == (1, 2)
    assert holders(redis_client, lambda k: k.task(str(t1))) == [1]
    assert holders(redis_client, lambda k: k.host("db-02")) == [2]
    k1, k2 = home(t1), home(t2)
    # When the first is paused: it is, in its shard (a claim there holds its jobs back); SQL
    # says paused, by alice
    cli.ok("tasks", "pause", str(t1), operator="alice")
    assert task_state(redis_client, t1) == "paused" and task_state(redis_client, t2) == "active"
    assert Queue(redis_client, k1).claim("w0", 10).jobs == []
    assert redis_client.zcard(k1.held(str(t1))) == 4
    [pause] = sql_rows(cli.database_url, "SELECT operator FROM events WHERE task_id = :t AND "
                                         "kind = 'pause'", t=str(t1))
    assert sql_task(cli, t1).state == "paused" and pause.operator == "alice"
    # When resumed, then moved to urgent: its jobs go back, then to its shard's urgent set
    cli.ok("tasks", "resume", str(t1))
    assert task_state(redis_client, t1) == "active" and redis_client.zcard(k1.held(str(t1))) == 0
    cli.ok("tasks", "reprioritize", str(t1), "urgent")
    assert redis_client.zcard(k1.due("urgent")) == 4 and redis_client.zcard(k1.due("normal")) == 0
    assert sql_task(cli, t1).priority == "urgent"
    # When the second is cancelled: it is, in its shard, and the first is untouched
    cli.ok("tasks", "cancel", str(t2), operator="bob")
    assert task_state(redis_client, t2) == "cancelled" and task_state(redis_client, t1) == "active"
    assert redis_client.zcard(k2.due("normal")) == 0 and sql_task(cli, t2).state == "cancelled"
    # And `tasks watch --once` reads each task's live counters in its shard: a job of t1 that
    # succeeded in Redis (not recorded in SQL yet) is counted
    queue = Queue(redis_client, k1)
    [job] = queue.claim("w1", 1).jobs
    queue.ack("w1", [(job.job_id, job.token, JobResult(exit_code=0))])
    rows = {r["task"]: r for r in json.loads(
        cli.ok("tasks", "watch", str(t1), str(t2), "--once", "-o", "json"))}
    assert (rows[str(t1)]["succeeded"], rows[str(t1)]["state"]) == (1, "active")
    assert rows[str(t2)]["state"] == "cancelled"
    shown = json.loads(cli.ok("tasks", "show", str(t1), "-o", "json"))
    assert (shown["live"]["succeeded"], shown["live"]["prio"]) == ("1", "urgent")


def test_retry_failed_requeues_the_failed_jobs_in_the_task_shard(
        cli: Cli, engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a task in shard 1 whose first two jobs failed for good (no retries)
    t = cli.submit(*TASK, "-t", "group:web", "--retries", "0")
    keys = home(t)
    queue = Queue(redis_client, keys)
    for job in queue.claim("w1", 2).jobs:
        assert queue.fail("w1", job.job_id, job.token, JobResult(exit_code=1), error="boom") == "failed"
    record_shard(redis_client, engine, keys)
    assert redis_client.zcard(keys.due("normal")) == 2
    # When the operator retries the failed ones through the CLI
    cli.ok("tasks", "retry-failed", str(t), operator="carol")
    # Then both are pending again in the task's shard, and SQL has the retry by carol
    assert redis_client.zcard(keys.due("normal")) == 4
    assert redis_client.hget(keys.job(f"{t}.0"), "state") == "pending"
    [row] = sql_rows(cli.database_url, "SELECT operator FROM events WHERE task_id = :t AND "
                                       "kind = 'retry-failed'", t=str(t))
    assert row.operator == "carol"


def test_windows_are_copied_to_every_shard_and_removed_from_every_shard(
        cli: Cli, redis_client: redis.Redis) -> None:
    start = (datetime.now(timezone.utc) + timedelta(days=1)).replace(microsecond=0)
    # When a window is added
    cli.ok("windows", "add", "w", "--start", start.isoformat(), "--duration", "1h")
    # Then every shard has its copy
    assert holders(redis_client, lambda k: k.window("w")) == [0, 1, 2]
    assert len({json.dumps(redis_client.hgetall(k.window("w")), sort_keys=True)
                for k in SHARDS.all}) == 1
    # When one shard's copy is lost, sync brings it back
    redis_client.delete(SHARDS.all[2].window("w"))
    cli.ok("windows", "sync")
    assert holders(redis_client, lambda k: k.window("w")) == [0, 1, 2]
    # When it is removed, every shard keeps a tombstone
    cli.ok("windows", "remove", "w")
    assert [list(redis_client.hgetall(k.window("w"))) for k in SHARDS.all] == [[REMOVED]] * 3


def test_a_group_limit_lands_in_shard_0_and_in_every_copy_of_its_hosts(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given web-01 copied into shards 1 and 2 (a task of each runs there), web-02 into shard 1
    cli.submit(*TASK, "-t", "group:web")
    cli.submit(*TASK, "-t", "web-01")
    assert holders(redis_client, lambda k: k.host("web-01")) == [1, 2]
    # When the group gets a limit
    cli.ok("groups", "limit", "web", "--max-busy", "1")
    # Then the limit is in shard 0 alone, and every copy of its hosts names the group
    assert [redis_client.hget(k.glimit, "web") for k in SHARDS.all] == ["1", None, None]
    assert [redis_client.hget(k.host("web-01"), "limits") for k in SHARDS.all] == [None, "web", "web"]
    assert redis_client.hget(SHARDS.all[1].host("web-02"), "limits") == "web"
    # And a task submitted afterwards copies the field with its hosts
    t3 = cli.submit(*TASK, "-t", "web-02")
    assert SHARDS.index_of_task(str(t3)) == 0
    assert redis_client.hget(SHARDS.coord.host("web-02"), "limits") == "web"
    # When the limit goes, every copy forgets it
    cli.ok("groups", "limit", "web", "--remove")
    assert [redis_client.hget(k.host("web-01"), "limits") for k in SHARDS.all] == [None, "", ""]
    assert redis_client.hget(SHARDS.coord.glimit, "web") is None


def test_reconcile_rebuilds_a_flushed_sharded_queue_in_the_right_shards(
        cli: Cli, engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given three tasks, one per shard, the one in shard 1 paused and one of its jobs done
    ids = [cli.submit(*TASK, "-t", "group:web") for _ in range(3)]
    t1 = ids[0]
    queue = Queue(redis_client, home(t1))
    [job] = queue.claim("w1", 1).jobs
    queue.ack("w1", [(job.job_id, job.token, JobResult(exit_code=0))])
    cli.ok("tasks", "pause", str(t1))
    cli.ok("groups", "limit", "db", "--max-busy", "1")
    for keys in SHARDS.all:
        record_shard(redis_client, engine, keys)
    # When Redis loses everything and reconcile runs
    redis_client.flushall()
    out = json.loads(cli.ok("reconcile", "--nodes-stopped", "-o", "json"))
    # Then each task is back in its shard only, with its unfinished jobs
    assert out["tasks_recreated"] == 3 and out["jobs_requeued"] == 11
    for t in ids:
        me = SHARDS.index_of_task(str(t))
        assert holders(redis_client, lambda k: k.task(str(t))) == [me]
        assert holders(redis_client, lambda k: k.host("web-04")) == [0, 1, 2]
    # the paused one keeps its pause and its done job; its other jobs are back in its shard,
    # where a claim holds them back
    assert task_state(redis_client, t1) == "paused"
    assert redis_client.hget(home(t1).task(str(t1)), "succeeded") == "1"
    assert redis_client.zcard(home(t1).due("normal")) == 3
    assert Queue(redis_client, home(t1)).claim("w2", 10).jobs == []
    assert redis_client.zcard(home(t1).held(str(t1))) == 3
    for t in ids[1:]:
        assert redis_client.zcard(home(t).due("normal")) == 4
    # and the group limit is back in shard 0
    assert [redis_client.hget(k.glimit, "db") for k in SHARDS.all] == ["1", None, None]
    # And a second reconcile finds nothing to do
    again = json.loads(cli.ok("reconcile", "--nodes-stopped", "-o", "json"))
    assert (again["tasks_recreated"], again["jobs_requeued"]) == (0, 0)


def test_a_schedule_entry_stays_in_shard_0_and_its_task_goes_to_its_own_shard(
        cli: Cli, engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given a schedule added through the CLI: its entry is in shard 0 only
    cli.ok("schedules", "add", "s", "--every", "1s", *TASK, "-t", "group:db")
    assert holders(redis_client, lambda k: k.schedule("s")) == [0]
    occ = (int(time.time())) * 1000
    arm(redis_client, SHARDS, "s", occ, replace=True)
    assert [redis_client.zscore(k.due("urgent"), "sched:s") for k in SHARDS.all] == [occ, None, None]
    # When a node claims it in shard 0 and fires it with the queue's shards
    [claimed] = Queue(redis_client, SHARDS.coord).claim("w1", 5).schedules
    result = fire_claimed(engine, redis_client, SHARDS, claimed, occ + 200, worker="w1")
    # Then the occurrence's task is in the shard of its id, with its jobs and hosts
    [t] = result.tasks
    me = SHARDS.index_of_task(str(t))
    assert me != 0 and holders(redis_client, lambda k: k.task(str(t))) == [me]
    assert sorted(redis_client.zrange(home(t).due("normal"), 0, -1)) == [f"{t}.0", f"{t}.1"]
    assert holders(redis_client, lambda k: k.host("db-01")) == [me]
    # and the entry moved on in shard 0, with its fire event in shard 0's stream
    assert [redis_client.zscore(k.due("urgent"), "sched:s") for k in SHARDS.all] == [occ + 1000, None, None]
    fires = [f for _, f in redis_client.xrange(SHARDS.coord.events) if f["kind"] == "fire"]
    assert [f["task"] for f in fires] == [str(t)]
    assert sql_task(cli, t).state == "active"


def test_the_wave_controller_moves_rollouts_in_every_shard(
        cli: Cli, redis_client: redis.Redis) -> None:
    # Given a rollout in two waves in shard 1 whose first wave has ended
    t = cli.submit(*TASK, "-t", "group:web", "--waves", "1,100%")
    keys = home(t)
    assert SHARDS.index_of_task(str(t)) == 1 and redis_client.sismember(keys.waving, str(t))
    queue = Queue(redis_client, keys)
    [job] = queue.claim("w1", 10).jobs
    queue.ack("w1", [(job.job_id, job.token, JobResult(exit_code=0))])
    # When a node's wave controller (3 shards) runs a round
    waver = Waver(SimpleNamespace(queue_shards=3), redis_client, Keys("fs"))
    waver.round()
    # Then the second wave is released in the task's shard
    assert redis_client.hget(keys.task(str(t)), "wave") == "2"
    assert redis_client.zcard(keys.due("normal")) == 3
    assert not redis_client.exists(keys.wave_lock(str(t)))


def test_the_write_side_of_a_sharded_queue_on_a_redis_cluster(
        tmp_path: Path, cluster_url: str, redis_cluster) -> None:  # noqa: ANN001
    from tests.conftest import cluster_client

    # Given a 3-shard queue on a real Redis Cluster (each shard its own slot)
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, cluster_url, db, env={"FLEETSCHED_QUEUE_SHARDS": "3"})
    inventory(cli, tmp_path, FLEET)
    client = cluster_client(cluster_url)
    try:
        # When tasks are submitted, one paused and one cancelled, a window and a limit added
        ids = [cli.submit(*TASK, "-t", "group:web") for _ in range(3)]
        cli.ok("tasks", "pause", str(ids[0]))
        cli.ok("tasks", "cancel", str(ids[1]))
        start = (datetime.now(timezone.utc) + timedelta(days=1)).replace(microsecond=0)
        cli.ok("windows", "add", "w", "--start", start.isoformat(), "--duration", "1h")
        cli.ok("groups", "limit", "web", "--max-busy", "2")
        # Then each lands where it belongs, every multi-key step inside one slot
        assert [task_state(client, t) for t in ids] == ["paused", "cancelled", "active"]
        assert holders(client, lambda k: k.window("w")) == [0, 1, 2]
        assert [client.hget(k.host("web-01"), "limits") for k in SHARDS.all] == ["web"] * 3
        # When the cluster loses everything, reconcile puts the unfinished tasks back
        redis_cluster.flush()
        cli.ok("reconcile", "--nodes-stopped")
        assert [task_state(client, t) for t in ids] == ["paused", None, "active"]
        assert client.zcard(home(ids[2]).due("normal")) == 4
        assert client.hget(SHARDS.coord.glimit, "web") == "2"
    finally:
        client.close()


def test_a_command_with_another_shard_count_than_the_queue_is_refused_in_one_line(
        tmp_path, redis_url, redis_client):
    """An operator whose config lacks queue_shards = 3 must not write a task to shard 0 that
    the nodes would look for elsewhere: submit, a task verb and top refuse, writing nothing."""
    from scheduler.queue.sharded import check_shard_count
    from scheduler.queue.shards import Shards
    from tests.submit_support import cli_with_inventory

    check_shard_count(redis_client, Shards("fs", 3))
    cli = cli_with_inventory(tmp_path, redis_url, "[web]\nw1\n")
    before = sorted(redis_client.keys("*"))
    for args in (("submit", "command", "-t", "group:web", "-p", "cmd=true", "--yes"),
                 ("tasks", "pause", "1"), ("top", "--once")):
        code, out, err = cli(*args)
        assert code != 0, (args, out)
        assert "has 3 shards, but queue_shards = 1 here" in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) <= 2, err
    assert sorted(redis_client.keys("*")) == before
