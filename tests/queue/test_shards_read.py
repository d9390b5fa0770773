"""A queue in three shards (``queue_shards = 3``), the recorder and the read side: every shard's
stream reaches SQL (two shards' entries of the same id are two events), a recorder dying
mid-batch on one shard loses nothing, and the backlog, the queue counts, ``top``, ``status``,
``recorder status`` and the exporter's gauges sum the shards and equal what each shard holds.
``doctor`` and ``status`` refuse a shard count Redis does not hold, in one line. Real
redis-server (and the test cluster), SQLite and PostgreSQL."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import redis
import sqlalchemy as sa

from scheduler.config import load_settings
from scheduler.queue.client import JobResult, JobSpec, Queue, TaskSpec
from scheduler.queue.depth import queue_counts
from scheduler.queue.shards import Shards
from scheduler.record import recorder as rec
from scheduler.record.models import Event, Job, Task
from scheduler.record.sharded import ShardRecorders, shard_backlogs, total_backlog
from scheduler.views.snapshot import take_snapshot
from tests.cli_support import isolated_env, run_cli
from tests.recorder_events import create_task_rows, job_lifecycle, xadd_all
from tests.worker_support import wait_until

SHARDS = Shards("fs", 3)


def queue_of(client: redis.Redis, task_id: int | str) -> Queue:
    """The one-shard verbs of the shard holding ``task_id``."""
    return Queue(client, SHARDS.of_task(str(task_id)), lease_ms=60_000)


def tasks_in_every_shard(engine: sa.Engine, sizes: tuple[int, ...] = (2, 3, 4)
                         ) -> list[tuple[int, list[tuple[str, str]]]]:
    """SQL task rows (accepted) with consecutive ids, so each lands in another shard."""
    made = [create_task_rows(engine, n) for n in sizes]
    assert {SHARDS.index_of_task(str(tid)) for tid, _ in made} == {0, 1, 2}
    return made


def recorded(engine: sa.Engine) -> tuple[int, dict[str, str], dict[int, tuple]]:
    with engine.connect() as conn:
        events = conn.execute(sa.select(sa.func.count()).select_from(Event)).scalar_one()
        jobs = dict(conn.execute(sa.select(Job.id, Job.state)).all())
        tasks = {r[0]: tuple(r[1:]) for r in conn.execute(
            sa.select(Task.id, Task.state, Task.succeeded, Task.failed, Task.running))}
    return events, jobs, tasks


# ------------------------------------------------------------------------------ recording


def test_every_shard_s_stream_reaches_sql_and_equal_entry_ids_stay_two_events(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given, in every shard's stream, an entry with the very same id (streams number alike)
    for keys in SHARDS.all:
        redis_client.xadd(keys.events, {"kind": "noop", "ts": "1700000000000"}, id="5-7")
    # and a task in each shard run to the end by the queue itself (its events in its shard)
    made = tasks_in_every_shard(engine)
    for tid, jobs in made:
        q = queue_of(redis_client, tid)
        q.create_task(TaskSpec(str(tid), operator="alice"))
        q.enqueue(str(tid), [JobSpec(j, h) for j, h in jobs])
        claimed = q.claim("w1", len(jobs)).jobs
        q.ack("w1", [(c.job_id, c.token, JobResult(0, 5, "ok")) for c in claimed])
    lengths = [redis_client.xlen(k.events) for k in SHARDS.all]
    assert all(lengths)
    # When one recorder of the three shards drains them
    recorders = ShardRecorders(redis_client, engine, SHARDS, "r1")
    assert recorders.drain() == sum(lengths)
    # Then every entry of every shard is one event row, every job and task is recorded
    events, jobs, tasks = recorded(engine)
    assert events == sum(lengths)
    assert set(jobs.values()) == {"succeeded"} and len(jobs) == 9
    assert {tasks[tid] for tid, _ in made} == {("succeeded", n, 0, 0) for n in (2, 3, 4)}
    with engine.connect() as conn:
        same = set(conn.scalars(sa.select(Event.id).where(Event.kind == "noop")))
    assert same == {"5-7", "5-7:1", "5-7:2"}
    # and nothing is left to record, on any shard
    assert total_backlog(redis_client, SHARDS) == (0, 0)
    assert shard_backlogs(redis_client, SHARDS) == [(0, 0)] * 3


def test_a_recorder_dying_mid_batch_on_one_shard_loses_nothing(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    # Given events in every shard and a live node's presence in shard 0 (the only presence)
    made = tasks_in_every_shard(engine, (3, 3, 3))
    for tid, jobs in made:
        xadd_all(redis_client, job_lifecycle(str(tid), jobs), SHARDS.of_task(str(tid)))
    total = sum(redis_client.xlen(k.events) for k in SHARDS.all)
    redis_client.hset(SHARDS.coord.workers, "alive", json.dumps(
        {"node": "n2", "pid": 1, "slots": 1, "busy": 0, "ms": int(time.time() * 1000)}))
    # and a node's recorder that read a batch on shard 1, wrote it, and died before its XACK
    dead = ShardRecorders(redis_client, engine, SHARDS, "worker:gone").recorders[1]
    dead.ensure_group()
    batch = dead._read(100, None)
    dead._write(batch)
    # and the live node's recorder holding a batch of shard 2, not yet committed
    busy = ShardRecorders(redis_client, engine, SHARDS, "worker:alive").recorders[2]
    busy.ensure_group()
    held = busy._read(2, None)
    assert batch and len(held) == 2
    assert [p for _, p in shard_backlogs(redis_client, SHARDS)] == [0, len(batch), 2]
    time.sleep(rec.DEAD_NODE_IDLE_MS / 1000 + 0.2)
    # When another recorder runs over every shard
    other = ShardRecorders(redis_client, engine, SHARDS, "r2")
    for _ in range(20):
        other.run_once()
    # Then the dead node's entries were taken over (its node has no presence) and recorded
    # once; the live node's (presence in shard 0) were left to it
    events, jobs, _tasks = recorded(engine)
    assert events == total - 2
    assert {k.events: p for k, (_, p) in zip(SHARDS.all, shard_backlogs(redis_client, SHARDS))
            } == {SHARDS.all[0].events: 0, SHARDS.all[1].events: 0, SHARDS.all[2].events: 2}
    # and once the live node finishes its batch, every event of every shard is in SQL
    busy._write(held)
    redis_client.xack(busy.stream, rec.GROUP, *[e.entry for e in held])
    assert recorded(engine)[0] == total
    assert total_backlog(redis_client, SHARDS) == (0, 0)
    assert set(recorded(engine)[1].values()) == {"succeeded"}


def test_run_records_every_shard_as_entries_arrive_until_stopped(
        engine: sa.Engine, redis_client: redis.Redis) -> None:
    made = tasks_in_every_shard(engine, (2, 2, 2))
    recorders = ShardRecorders(redis_client, engine, SHARDS, "r1", block_ms=200)
    stop = threading.Event()
    runner = threading.Thread(target=recorders.run, args=(stop,))
    runner.start()
    try:
        for tid, jobs in made:  # while it runs, each shard gets its events
            xadd_all(redis_client, job_lifecycle(str(tid), jobs), SHARDS.of_task(str(tid)))
        total = sum(redis_client.xlen(k.events) for k in SHARDS.all)
        wait_until(lambda: recorded(engine)[0] == total, 20, "every shard recorded")
    finally:
        stop.set()
        runner.join(10)
    assert not runner.is_alive()
    assert recorders.stats.events == total and recorders.stats.failures == 0


def test_a_node_s_recorder_process_records_every_shard(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> None:
    from scheduler.record.engine import make_engine
    from scheduler.record.migrate import upgrade
    from workers.recorder_process import RecorderProcess

    url = f"sqlite:///{tmp_path / 'record.db'}"
    upgrade(url)
    engine = make_engine(url)
    settings = load_settings({"redis_url": redis_url, "database_url": url, "queue_shards": 3},
                             environ={}, config_path=None)
    deaths: list[str] = []
    proc = RecorderProcess(settings, "node-a", deaths.append)
    try:
        made = tasks_in_every_shard(engine, (2, 1, 3))
        for tid, jobs in made:
            xadd_all(redis_client, job_lifecycle(str(tid), jobs), SHARDS.of_task(str(tid)))
        total = sum(redis_client.xlen(k.events) for k in SHARDS.all)
        wait_until(lambda: recorded(engine)[0] == total, 30, "the node recording every shard")
        # each shard's group knows the node's recorder by the node's consumer name
        for keys in SHARDS.all:
            names = {c["name"] for c in redis_client.xinfo_consumers(keys.events, rec.GROUP)}
            assert names == {"worker:node-a"}
    finally:
        proc.stop()
        engine.dispose()
    assert deaths == []


# ------------------------------------------------------------------------------ reading


@pytest.fixture
def busy_queue(tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> dict[str, Any]:
    """Three tasks, one per shard, in known states: 3 jobs due, 2 running, 3 held, 1 dead;
    their events unrecorded. Returns the SQLite URL, the CLI environment and the truth."""
    from scheduler.record.engine import make_engine
    from scheduler.record.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'record.db'}"
    upgrade(url)
    engine = make_engine(url)
    (t1, j1), (t2, j2), (t3, j3) = tasks_in_every_shard(engine)
    engine.dispose()
    q1, q2, q3 = (queue_of(redis_client, t) for t in (t1, t2, t3))
    q1.create_task(TaskSpec(str(t1)))
    q1.enqueue(str(t1), [JobSpec(j, h) for j, h in j1])
    assert len(q1.claim("w1", 1).jobs) == 1  # 1 running, 1 due
    q2.create_task(TaskSpec(str(t2), max_attempts=1))
    q2.enqueue(str(t2), [JobSpec(j, h) for j, h in j2])
    bad = q2.claim("w1", 1).jobs[0]
    assert q2.fail("w1", bad.job_id, bad.token, JobResult(1, 5, "no"), error="exit 1") == "failed"
    q3.create_task(TaskSpec(str(t3)))
    q3.enqueue(str(t3), [JobSpec(j, h) for j, h in j3])
    assert len(q3.claim("w1", 1).jobs) == 1  # 1 running; the 3 others held by the pause
    q3.pause(str(t3), "alice")
    assert q3.claim("w1", 5).jobs == []  # the claim meets its 3 due jobs and holds them
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=url,
                       FLEETSCHED_QUEUE_SHARDS="3")
    return {"url": url, "env": env, "due_now": 3, "running": 2, "held": 3, "dead": 1}


def per_shard(client: redis.Redis) -> dict[str, int]:
    """Each shard read on its own with the one-shard functions, summed: the truth."""
    out = {"due_now": 0, "running": 0, "parked": 0, "held": 0, "dead": 0, "stream_length": 0,
           "recorder_lag": 0, "tasks": 0}
    for keys in SHARDS.all:
        snap = take_snapshot(client, keys)
        for name in out:
            out[name] += len(snap.tasks) if name == "tasks" else getattr(snap, name)
    return out


def test_counts_and_the_top_frame_sum_the_shards(busy_queue: dict[str, Any],
                                                 redis_client: redis.Redis) -> None:
    truth = per_shard(redis_client)
    assert {k: truth[k] for k in ("due_now", "running", "held", "dead")} == {
        k: busy_queue[k] for k in ("due_now", "running", "held", "dead")}
    assert truth["tasks"] == 3 and truth["stream_length"] > 0
    counts = queue_counts(redis_client, SHARDS, 200)
    assert counts.due_now == 3 and counts.dead == 1
    assert counts.due_by_shard == [queue_counts(redis_client, k, 200).due_now
                                   for k in SHARDS.all]
    snap = take_snapshot(redis_client, SHARDS)
    assert {name: (len(snap.tasks) if name == "tasks" else getattr(snap, name))
            for name in truth} == truth
    # fleetsched top --once, configured with the three shards, prints the same
    code, out, err = run_cli(["top", "--once", "--output", "json"], busy_queue["env"])
    assert code == 0, err
    shown = json.loads(out)
    assert {name: (len(shown["tasks"]) if name == "tasks" else shown[name])
            for name in truth} == truth


def test_status_and_recorder_status_sum_the_shards_and_show_each(
        busy_queue: dict[str, Any], redis_client: redis.Redis) -> None:
    lags = [lag for lag, _ in shard_backlogs(redis_client, SHARDS)]
    assert all(lags)
    code, out, err = run_cli(["status", "--output", "json"], busy_queue["env"])
    assert "Traceback" not in err
    checks = {c["check"]: c for c in json.loads(out)["checks"]}
    assert checks["queue"]["data"]["due_now"] == 3
    assert checks["queue"]["data"]["due_by_shard"] == [
        queue_counts(redis_client, k, 0).due_now for k in SHARDS.all]
    assert checks["recorder"]["data"]["lag"] == sum(lags)
    assert [s["lag"] for s in checks["recorder"]["data"]["shards"]] == lags
    assert f"(by shard: {', '.join(map(str, lags))})" in checks["recorder"]["message"]
    assert checks["shards"]["level"] == "ok"
    code, out, err = run_cli(["recorder", "status", "--output", "json"], busy_queue["env"])
    assert code == 0, err
    status = json.loads(out)
    assert status["lag"] == sum(lags) and status["pending"] == 0
    assert status["length"] == sum(redis_client.xlen(k.events) for k in SHARDS.all)
    assert f"{SHARDS.all[2].events}: length" in status["shard 2"]
    # and once `recorder --drain` ran, nothing is left on any shard
    code, _out, err = run_cli(["recorder", "--drain"], busy_queue["env"])
    assert code == 0, err
    assert total_backlog(redis_client, SHARDS) == (0, 0)


def test_the_exporter_s_gauges_sum_the_shards(busy_queue: dict[str, Any],
                                              redis_client: redis.Redis) -> None:
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from scheduler.monitoring.exporter import registry_for

    settings = load_settings({"redis_url": busy_queue["env"]["FLEETSCHED_REDIS_URL"],
                              "database_url": busy_queue["url"], "queue_shards": 3},
                             environ={}, config_path=None)
    registry, engine = registry_for(settings)
    try:
        text = generate_latest(registry).decode()
    finally:
        engine.dispose()
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[s.name] = samples.get(s.name, 0) + s.value
    truth = per_shard(redis_client)
    lag, pending = total_backlog(redis_client, SHARDS)
    assert samples["fleetsched_up"] == 1 and samples["fleetsched_database_up"] == 1
    assert samples["fleetsched_queue_due_now"] == truth["due_now"] == 3
    assert samples["fleetsched_jobs_running"] == truth["running"] == 2
    assert samples["fleetsched_jobs_held"] == truth["held"] == 3
    assert samples["fleetsched_jobs_parked"] == truth["parked"]
    assert samples["fleetsched_jobs_dead"] == truth["dead"] == 1
    assert samples["fleetsched_recorder_lag_events"] == lag == truth["recorder_lag"] > 0
    assert samples["fleetsched_recorder_pending_events"] == pending


# ------------------------------------------------------------------------------ doctor


def test_doctor_and_status_refuse_a_shard_count_redis_does_not_hold_in_one_line(
        tmp_path: Path, redis_url: str, redis_client: redis.Redis) -> None:
    from scheduler.record.migrate import upgrade

    url = f"sqlite:///{tmp_path / 'record.db'}"
    upgrade(url)
    redis_client.set(SHARDS.count_key, "3")  # the queue was made with three shards
    env = isolated_env(tmp_path, FLEETSCHED_REDIS_URL=redis_url, FLEETSCHED_DATABASE_URL=url)
    for command in ("doctor", "status"):
        # When a command configured with the default one shard looks
        code, out, err = run_cli([command, "--output", "json"], env)
        assert "Traceback" not in err
        found = [c for c in json.loads(out)["checks"] if c["check"] == "shards"]
        # Then it fails on one line naming both counts and the setting to fix
        assert code == 1 and len(found) == 1 and found[0]["level"] == "fail"
        assert found[0]["message"] == (f"queue_shards is 1 but the queue in Redis has 3 "
                                       f"shard(s) ({SHARDS.count_key})")
        assert "\n" not in found[0]["message"] and "queue_shards to 3" in found[0]["hint"]
    # and configured with the three shards, doctor reads each of them and is content
    code, out, err = run_cli(["doctor", "--output", "json"], {**env,
                                                              "FLEETSCHED_QUEUE_SHARDS": "3"})
    found = [c for c in json.loads(out)["checks"] if c["check"] == "shards"]
    assert found[0]["level"] == "ok" and found[0]["message"].startswith("3 queue shards")
    # and the default one shard with no count in Redis says nothing about shards (as before)
    redis_client.delete(SHARDS.count_key)
    code, out, err = run_cli(["status", "--output", "json"], env)
    assert "shards" not in {c["check"] for c in json.loads(out)["checks"]}


# ------------------------------------------------------------------------------ cluster


def test_on_the_cluster_the_shards_spread_over_masters_and_all_reach_sql(
        cluster_url: str, tmp_path: Path) -> None:
    from scheduler.record.engine import make_engine
    from scheduler.record.migrate import upgrade
    from tests.conftest import cluster_client

    url = f"sqlite:///{tmp_path / 'record.db'}"
    upgrade(url)
    engine = make_engine(url)
    client = cluster_client(cluster_url)
    try:
        shards = Shards("fs", 6)  # six hash tags: more than one master serves them
        nodes = {client.get_node_from_key(k.tag).name for k in shards.all}
        assert len(nodes) > 1
        made = [create_task_rows(engine, 2) for _ in range(6)]
        for tid, jobs in made:
            q = Queue(client, shards.of_task(str(tid)), lease_ms=60_000)
            q.create_task(TaskSpec(str(tid)))
            q.enqueue(str(tid), [JobSpec(j, h) for j, h in jobs])
            claimed = q.claim("w1", 2).jobs
            q.ack("w1", [(c.job_id, c.token, JobResult(0, 1, "ok")) for c in claimed[:1]])
        lengths = [client.xlen(k.events) for k in shards.all]
        assert all(lengths)
        snap = take_snapshot(client, shards)  # one read over every master
        assert (snap.running, snap.stream_length, len(snap.tasks)) == (6, sum(lengths), 6)
        assert snap.recorder_lag == sum(lengths)
        recorders = ShardRecorders(client, engine, shards, "r1")
        assert recorders.drain() == sum(lengths)
        events, jobs, _ = recorded(engine)
        assert events == sum(lengths)
        assert sorted(jobs.values()) == ["running"] * 6 + ["succeeded"] * 6
        assert total_backlog(client, shards) == (0, 0)
    finally:
        client.close()
        engine.dispose()
