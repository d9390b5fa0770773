"""What a Redis Cluster failover loses of the writes its master acknowledged, with and without
``WAIT 1`` after each write.

A real cluster of 3 masters and 3 replicas (``tests.cluster.RedisCluster``: AOF with
``appendfsync always``, ``cluster-node-timeout`` 1 s) on this machine. Eight writer threads
each increment their own field of ``{fs}:probe`` on the master of the queue's slot, as fast as
they can; a write counts as acknowledged when its reply came (with WAIT: when WAIT also said one
replica has it, within 200 ms). After 1.5 s the master is killed with SIGKILL; once its replica
serves the slot, each field there is compared with the last value its writer saw acknowledged:
the difference is what the failover lost. WAIT goes in one pipeline with the write, on the
master's own connection: WAIT only waits for the writes of the connection it is sent on.

Run: ``python benchmarks/cluster_failover.py`` (3 runs of each) or ``--quick`` (1 run each).
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from benchmarks._common import quick_main  # noqa: E402
from tests.cluster import RedisCluster, start_redis_cluster  # noqa: E402

KEY = "{fs}:probe"
WRITERS = 8
WRITE_S = 1.5
WAIT_MS = 200


def _writer(host: str, port: int, field: int, use_wait: bool, acked: list[int],
            stop: threading.Event) -> None:
    client = redis.Redis(host=host, port=port, socket_timeout=2)
    try:
        while not stop.is_set():
            if use_wait:
                pipe = client.pipeline(transaction=False)
                pipe.hincrby(KEY, str(field), 1)
                pipe.execute_command("WAIT", 1, WAIT_MS)
                value, replicas = pipe.execute()
                if replicas < 1:
                    continue  # not on a replica in time: the caller would not take it as done
            else:
                value = client.hincrby(KEY, str(field), 1)
            acked[field] = value
    except redis.RedisError:
        return  # the master is gone
    finally:
        client.close()


def one_run(cluster: RedisCluster, use_wait: bool) -> dict[str, Any]:
    cluster.heal()
    cluster.flush()
    master = cluster.master_of(KEY)
    acked = [0] * WRITERS
    stop = threading.Event()
    threads = [threading.Thread(target=_writer, args=(master.host, master.port, i, use_wait,
                                                      acked, stop)) for i in range(WRITERS)]
    for t in threads:
        t.start()
    time.sleep(WRITE_S)
    started = time.monotonic()
    _killed, promoted = cluster.kill_master_of(KEY)
    took = time.monotonic() - started
    stop.set()
    for t in threads:
        t.join()
    client = promoted.client()
    survived = {int(k): int(v) for k, v in client.hgetall(KEY).items()}
    client.close()
    lost = sum(max(0, acked[i] - survived.get(i, 0)) for i in range(WRITERS))
    return {"wait": use_wait, "acknowledged": sum(acked), "lost": lost,
            "per_s": round(sum(acked) / WRITE_S), "failover_s": round(took, 2)}


def run(quick: bool) -> dict[str, Any]:
    runs = 1 if quick else 3
    cluster = start_redis_cluster(Path(tempfile.mkdtemp(prefix="fs-cluster-")))
    try:
        results = [one_run(cluster, use_wait) for _ in range(runs) for use_wait in (False, True)]
    finally:
        cluster.stop()
    return {"writers": WRITERS, "write_s": WRITE_S, "wait_ms": WAIT_MS, "runs": results}


def table(result: dict[str, Any]) -> str:
    lines = ["WAIT  acknowledged  per s  lost  failover s"]
    for r in result["runs"]:
        lines.append(f"{'yes' if r['wait'] else 'no':<4}  {r['acknowledged']:>12}  "
                     f"{r['per_s']:>5}  {r['lost']:>4}  {r['failover_s']:>10}")
    return "\n".join(lines)


if __name__ == "__main__":
    quick_main(__doc__, "cluster_failover", run, table)
