"""Many nodes, one fleet: three `fleetsched worker` nodes, each reaching Redis on its own loopback
address (as three machines would), share one Redis and one PostgreSQL record.

A 10,000-job task (a real `fleetsched submit` on a 10,000-host inventory) is shared between
them: while all three are healthy no job is claimed twice, and each node takes a real share.
The claims are read from the stream and from the record together: the recorders trim what they
wrote. Then one node is killed with SIGKILL mid-run: its jobs come back when their leases run out, the
other two finish the task, every job ends succeeded once, and the history checker reads the
PostgreSQL record (written by the nodes' own recorders) to a clean verdict.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from scheduler.record.migrate import upgrade
from tests.faults.history import check
from tests.servers import RedisServer, start_redis
from tests.submit_support import KEYS, Cli, inventory, sql_rows
from tests.worker_support import WorkerProcess, wait_until

pytestmark = pytest.mark.postgres

JOBS = 10_000
ADDRESSES = ("127.0.0.1", "127.0.0.2", "127.0.0.3")


@pytest.fixture
def shared_redis(tmp_path: Path) -> Iterator[RedisServer]:
    (tmp_path / "redis").mkdir()
    server = start_redis(tmp_path / "redis", also_bind=ADDRESSES[1:])
    yield server
    server.stop()


def history(client: redis.Redis, database_url: str, kinds: tuple[str, ...]) -> list[dict[str, str]]:
    """Every event of these kinds so far: the ones still in the stream, and the ones the nodes'
    recorders wrote to SQL and then trimmed from it. The stream is read first: an event trimmed
    before that read was recorded before it, so the SQL read that follows holds it."""
    found = {i: f for i, f in client.xrange(KEYS.events) if f["kind"] in kinds}
    marks = ", ".join(f":k{n}" for n in range(len(kinds)))
    for r in sql_rows(database_url, "SELECT id, kind, job_id, worker FROM events "
                      f"WHERE kind IN ({marks})", **{f"k{n}": k for n, k in enumerate(kinds)}):
        found.setdefault(r.id, {"kind": r.kind, "job": r.job_id, "worker": r.worker})
    return [found[i] for i in sorted(found, key=lambda i: tuple(map(int, i.split("-"))))]


def node(server: RedisServer, n: int, database_url: str, tmp: Path) -> WorkerProcess:
    """Node n: its own address, 16 slots, a 3 s lease (short, so the killed node's jobs come
    back soon; not so short that a stall of a loaded test machine loses one), its own recorder
    (the defaults' shape)."""
    url = f"redis://{ADDRESSES[n]}:{server.port}/0"
    args = ["--id", f"node-{n + 1}", "--slots", "16", "--processes", "2", "--lease", "3s"]
    return WorkerProcess(url, tmp, args, env={"FLEETSCHED_DATABASE_URL": database_url}).start()


def test_three_nodes_share_a_10000_job_task_and_one_killed_mid_run_loses_nothing(
        tmp_path: Path, shared_redis: RedisServer, fresh_postgres_url: str) -> None:
    client = redis.Redis(host="127.0.0.1", port=shared_redis.port, decode_responses=True)
    upgrade(fresh_postgres_url)
    cli = Cli(tmp_path, shared_redis.url, fresh_postgres_url)
    inventory(cli, tmp_path, f"[fleet]\nh[00001:{JOBS:05d}]\n")
    nodes = [node(shared_redis, n, fresh_postgres_url, tmp_path / "nodes") for n in range(3)]
    try:
        for w in nodes:
            w.wait_registered(client)
        # The three nodes reach Redis on three addresses (laddr: the address a client reached)
        peers = {c["laddr"].rsplit(":", 1)[0] for c in client.client_list()}
        assert set(ADDRESSES) <= peers, peers
        # Given a 10,000-host task of idempotent 20 ms jobs
        task = cli.submit("command", "-t", "group:fleet", "-p", "cmd=true", "--executor",
                          "simulate", "--executor-option", "duration_ms=20", "--idempotent")

        def acked() -> int:
            return int(client.hget(KEYS.task(str(task)), "succeeded") or 0)

        wait_until(lambda: acked() >= JOBS // 3, 120, "a third of the jobs acked",
                   lambda: "\n".join(w.tail(10) for w in nodes), nodes)
        # Then, all healthy: no job claimed twice, and every node took a real share
        claims = history(client, fresh_postgres_url, ("claim",))
        assert len(claims) >= JOBS // 3, len(claims)
        assert max(Counter(e["job"] for e in claims).values()) == 1
        share = Counter(e["worker"] for e in claims)
        assert set(share) == {"node-1", "node-2", "node-3"}, share
        assert min(share.values()) >= len(claims) // 10, share
        # When node-2 is killed with SIGKILL mid-run
        nodes[1].kill9()
        # Then the other two finish the task, node-2's jobs included, each job succeeding once
        code, out, err = cli("tasks", "wait", str(task), "--timeout", "180s")
        assert code == 0, out + err + "\n".join(w.tail(10) for w in nodes)
        # And the survivors' recorders take over node-2's unrecorded batch in seconds (its
        # heartbeat is stale), not after the one-minute idle time of an unknown consumer
        def job_states() -> dict[str, int]:
            return {r.state: r.n for r in sql_rows(
                fresh_postgres_url, "SELECT state, count(*) AS n FROM jobs WHERE task_id = :t "
                "GROUP BY state", t=task)}
        wait_until(lambda: job_states() == {"succeeded": JOBS}, 30, "SQL to record every job",
                   lambda: str(job_states()), [nodes[0], nodes[2]])
        lost_events = history(client, fresh_postgres_url, ("lost",))
        lost = {e["job"] for e in lost_events}
        assert all(e["worker"] == "node-2" for e in lost_events)
        claims = history(client, fresh_postgres_url, ("claim",))
        assert len(claims) >= JOBS, len(claims)
        reruns = {j for j, n in Counter(e["job"] for e in claims).items() if n > 1}
        assert reruns <= lost, reruns - lost  # a job ran again only because node-2 died with it
        # And the healthy nodes never thought they had lost a lease (a job acked while its
        # renewal was on its way is not a loss)
        for w in (nodes[0], nodes[2]):
            assert "could not be renewed" not in w.log.read_text(), w.tail()
    finally:
        for w in nodes:
            w.stop()
    # And the record the nodes' recorders wrote to PostgreSQL holds every job's history, judged
    check(fresh_postgres_url, client)
