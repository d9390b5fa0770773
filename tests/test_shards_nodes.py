"""A sharded queue end to end: two real `fleetsched worker` nodes on the real 3-master Redis
Cluster with ``queue_shards = 3``, six exclusive tasks over the same 40 hosts (so they land in
all three shards, on three masters, and fight over every host), one node killed with SIGKILL
mid-run, or the master of one shard killed and failed over to its replica.

What must hold: every task finishes, no host ever runs two jobs at once across shards (read from
the SQL record: each run from its claim to its end), the record holds every shard's events, and
the history checker's verdict on the PostgreSQL record is clean.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
import sqlalchemy as sa

from scheduler.queue.shards import Shards
from scheduler.record.migrate import upgrade
from tests.conftest import cluster_client
from tests.faults.history import check
from tests.submit_support import Cli, inventory
from tests.worker_support import WorkerProcess, wait_until

pytestmark = pytest.mark.postgres

SHARDS = Shards("fs", 3)
ENV = {"FLEETSCHED_QUEUE_SHARDS": "3"}
ENDS = ("ack", "retry", "fail", "release", "stale")
NEVER_RAN = ("defer",)  # claimed, then refused its places (or its window): it did not run


def runs_by_host(database_url: str) -> dict[str, list[tuple[int, int, str]]]:
    """Per host, each run (from its claim, or from its end minus the duration it reports if
    later, to its end, by stream time) of a job that ran and did not die with its node:
    (start ms, end ms, job). A claim ended by a defer never ran: a job of shard
    >= 1 is claimed before it asks shard 0 for its host, and deferred when refused."""
    engine = sa.create_engine(database_url)
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT id, kind, job_id, host, data FROM events "
                                    "WHERE job_id IS NOT NULL")).all()
    engine.dispose()
    starts: dict[tuple[str, str], tuple[int, str]] = {}
    runs: dict[str, list[tuple[int, int, str]]] = defaultdict(list)
    for r in sorted(rows, key=lambda r: int(r.id.split("-")[0])):
        ms = int(r.id.split("-")[0])
        data = r.data if isinstance(r.data, dict) else {}
        token = str(data.get("token", ""))
        if r.kind == "claim":
            starts[(r.job_id, token)] = (ms, r.host)
        elif r.kind in ENDS and (r.job_id, token) in starts:
            start, host = starts.pop((r.job_id, token))
            # A job of shard >= 1 is claimed before it takes its host's place in shard 0: it
            # runs from the later of its claim and its end minus the duration it reports.
            ran_ms = data.get("duration_ms")
            if isinstance(ran_ms, (int, float, str)) and str(ran_ms).isdigit():
                start = max(start, ms - int(ran_ms))
            runs[host].append((start, ms, r.job_id))
        elif r.kind in NEVER_RAN:
            starts.pop((r.job_id, token), None)
        elif r.kind == "lost":
            starts.pop((r.job_id, token), None)  # died with its node: not a run to compare
    return runs


@pytest.mark.parametrize("fault", ["node", "shard master"])
def test_two_nodes_on_a_sharded_cluster_keep_hosts_exclusive_and_lose_nothing(
        tmp_path: Path, cluster_url: str, redis_cluster, fresh_postgres_url: str,
        fault: str) -> None:
    """``node``: one of the two nodes is killed -9. ``shard master``: the master of shard 2 is
    killed -9 and its replica takes over while both nodes claim, ack and renew across the
    shards (a verb spanning shards must keep what the answering shards did)."""
    client = cluster_client(cluster_url)
    upgrade(fresh_postgres_url)
    cli = Cli(tmp_path, cluster_url, fresh_postgres_url, env=ENV)
    inventory(cli, tmp_path, "[fleet]\nh[01:40]\n")
    nodes = [WorkerProcess(cluster_url, tmp_path / "nodes",
                           ["--id", f"node-{n}", "--slots", "8", "--processes", "1",
                            "--lease", "2s"],
                           env={"FLEETSCHED_DATABASE_URL": fresh_postgres_url, **ENV}).start()
             for n in (1, 2)]
    try:
        for w in nodes:
            w.wait_registered(client)
        tasks = [cli.submit("command", "-t", "group:fleet", "-p", "cmd=true", "--executor",
                            "simulate", "--executor-option", "duration_ms=300", "--idempotent")
                 for _ in range(6)]
        assert {SHARDS.index_of_task(str(t)) for t in tasks} == {0, 1, 2}

        def succeeded() -> int:
            return sum(int(client.hget(SHARDS.of_task(str(t)).task(str(t)), "succeeded") or 0)
                       for t in tasks)

        wait_until(lambda: succeeded() >= 40, 60, "40 jobs acked",
                   lambda: "\n".join(w.tail(10) for w in nodes), nodes)
        if fault == "node":
            nodes[1].kill9()
        else:
            redis_cluster.kill_master_of(SHARDS.all[2].due())
        code, out, err = cli("tasks", "wait", *map(str, tasks), "--timeout", "120s")
        assert code == 0, out + err + nodes[0].tail(20)
        # The surviving node's recorder takes over what the dead one had read, in every shard
        wait_until(lambda: all(
            state == "succeeded" for state in _task_states(fresh_postgres_url, tasks)), 30,
            "SQL to record every task's end", lambda: str(_task_states(fresh_postgres_url, tasks)),
            [nodes[0]])
        if fault != "node":
            assert all(w.proc.poll() is None for w in nodes)  # both rode out the failover
    finally:
        for w in nodes:
            w.stop()
    # No host ran two jobs at once, whichever shards their tasks live in
    runs = runs_by_host(fresh_postgres_url)
    assert sum(len(r) for r in runs.values()) >= 6 * 40
    for host, spans in runs.items():
        spans.sort()
        for (_, end, job), (start, _, other) in zip(spans, spans[1:]):
            assert start >= end, f"{host}: {other} started at {start} while {job} ran until {end}"
    # Every shard's events reached the record, and the history checker judges it
    check(fresh_postgres_url, client, keys=SHARDS)
    client.close()


def _task_states(database_url: str, tasks: list[int]) -> list[str]:
    engine = sa.create_engine(database_url)
    with engine.connect() as conn:
        states = [r.state for r in conn.execute(
            sa.text("SELECT state FROM tasks WHERE id IN :ids").bindparams(
                sa.bindparam("ids", expanding=True)), {"ids": list(tasks)})]
    engine.dispose()
    return states
