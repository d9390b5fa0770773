"""Claim+ack throughput of a sharded queue: 1, 3 and 6 shards, 1, 2 and 4 worker processes.

A real Redis Cluster of 3 masters and 3 replicas on this machine (``tests.cluster``; set to
``appendfsync everysec``, the production setting, instead of the test fixture's ``always``).
Each configuration fills the queue with 12 tasks of due no-op jobs (tasks 1-12, so every shard
count splits them evenly), not exclusive and without group limits (what differs from the
default: an exclusive task's jobs of shards >= 1 also take their host's place in shard 0; the
``exclusive`` rows measure that cost, each task on hosts of its own so no job waits for a host). Then N processes each loop
``claim(100)`` + ``ack`` on the library's queue (``scheduler.queue.sharded.open_queue``, what
``fleetsched worker`` uses) until the queue is empty. Figure: jobs acked per second, from the
first claim to the last ack; median [min-max] of 3 runs (1 with ``--quick``); each row also as
a ratio to 1 shard with the same processes, same run. Also the ceiling: jobs per CPU second
of the busiest master during the run (INFO cpu), the rate at which that master would fill a
core of its own. On a machine whose cores are fewer than the masters plus the worker
processes (2 cores here: 6 redis-servers and up to 4 workers share them), the measured rate
shows the contention for cores; the ceiling shows what the shards spread.

A second table repeats the rows with each master held to ``MASTER_CPU`` (a fifth) of a core by
a cgroup CPU quota, as if each master had a core of its own, scaled down so that three masters
and the workers fit in 2 cores: there the masters, not the machine, are the limit, and the
measured rate itself shows what the shards spread (needs root and a writable cgroup ``cpu``
controller, v1 or v2; else that table says it was skipped).

Run: ``python benchmarks/shards.py`` or ``--quick``.
"""

from __future__ import annotations

import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import quick_main  # noqa: E402
from scheduler.queue.client import JobResult, JobSpec, TaskSpec  # noqa: E402
from scheduler.queue.sharded import open_queue  # noqa: E402
from scheduler.queue.shards import Shards  # noqa: E402
from scheduler.redisdb.cluster import cluster_client  # noqa: E402
from tests.cluster import start_redis_cluster  # noqa: E402

TASKS = 12
MASTER_CPU = 0.2  # of a core, per master, in the capped table
BATCH = 100
SHARD_COUNTS = (1, 3, 6)
PROCESSES = (1, 2, 4)


def _drain(url: str, shards: Shards, start: Any, total: Any, expected: int, out: Any) -> None:
    client = cluster_client(url, {"decode_responses": True})
    queue = open_queue(client, shards, check=False)
    start.wait()
    first = last = None
    acked = 0
    worker = f"bench-{multiprocessing.current_process().pid}"
    deadline = time.monotonic() + 300
    while total.value < expected and time.monotonic() < deadline:
        claim = queue.claim(worker, BATCH)
        if not claim.jobs:
            time.sleep(0.002)
            continue
        first = first or time.monotonic()
        codes = queue.ack(worker, [(j.job_id, j.token, JobResult()) for j in claim.jobs])
        done = sum(1 for c in codes if c == 0)
        acked += done
        with total.get_lock():
            total.value += done
        last = time.monotonic()
    out.put((acked, first, last))
    client.close()


def _fill(url: str, shards: Shards, jobs: int, exclusive: bool) -> None:
    client = cluster_client(url, {"decode_responses": True})
    for node in client.get_primaries():
        client.execute_command("FLUSHALL", target_nodes=node)
    queue = open_queue(client, shards)
    per_task = jobs // TASKS
    for t in range(1, TASKS + 1):
        queue.create_task(TaskSpec(str(t), exclusive=exclusive))
        # Hosts of their own per task: an exclusive job takes its place uncontended, so the
        # rows measure what a place costs, not hosts waiting for each other.
        queue.enqueue(str(t), [JobSpec(f"{t}.{k}", f"h{t}-{k}") for k in range(per_task)])
    client.close()


def _master_cpu(url: str) -> dict[str, float]:
    """CPU seconds (user + system) each master has used so far."""
    client = cluster_client(url, {"decode_responses": True})
    out = {}
    for node in client.get_primaries():
        info = client.info("cpu", target_nodes=node)
        out[node.name] = float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
    client.close()
    return out


def one(url: str, shards: int, processes: int, jobs: int,
        exclusive: bool = False) -> tuple[float, float]:
    """(jobs/s measured, jobs per CPU second of the busiest master: the rate at which the
    busiest master would use a whole core, i.e. the queue's ceiling on machines where the
    masters have cores of their own)."""
    layout = Shards("fs", shards)
    _fill(url, layout, jobs, exclusive)
    cpu_before = _master_cpu(url)
    ctx = multiprocessing.get_context("spawn")
    start, out, total = ctx.Event(), ctx.Queue(), ctx.Value("q", 0)
    expected = jobs - jobs % TASKS
    procs = [ctx.Process(target=_drain, args=(url, layout, start, total, expected, out))
             for _ in range(processes)]
    for p in procs:
        p.start()
    time.sleep(1.5)  # every process connected and waiting
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    acked = sum(r[0] for r in results)
    if acked != jobs - jobs % TASKS:
        client = cluster_client(url, {"decode_responses": True})
        left = {k.prefix: [client.zcard(d) for d in k.all_due()] for k in layout.all}
        raise AssertionError(f"{shards} shards, {processes} processes: {acked} of {jobs} jobs acked; "
                             f"due sets left: {left}; per process: {[r[0] for r in results]}")
    cpu_after = _master_cpu(url)
    busiest = max(cpu_after[n] - cpu_before.get(n, 0.0) for n in cpu_after)
    firsts = [r[1] for r in results if r[1]]
    lasts = [r[2] for r in results if r[2]]
    return acked / (max(lasts) - min(firsts)), acked / max(busiest, 1e-6)


class CpuCaps:
    """Each given process in a cgroup of its own whose CPU quota is ``share`` of a core
    (cgroup v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``); removed by ``close``."""

    V1, V2 = Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")

    def __init__(self, pids: list[int], share: float) -> None:
        self.groups: list[Path] = []
        period = 100_000
        for pid in pids:
            if (self.V2 / "cgroup.controllers").exists() and \
                    "cpu" in (self.V2 / "cgroup.controllers").read_text().split():
                group = self.V2 / f"fs-shards-{pid}"
                group.mkdir(exist_ok=True)
                (group / "cpu.max").write_text(f"{int(period * share)} {period}")
            else:
                group = self.V1 / f"fs-shards-{pid}"
                group.mkdir(exist_ok=True)
                (group / "cpu.cfs_period_us").write_text(str(period))
                (group / "cpu.cfs_quota_us").write_text(str(int(period * share)))
            (group / "cgroup.procs").write_text(str(pid))
            self.groups.append(group)

    def close(self) -> None:
        for group in self.groups:
            root = group.parent
            for pid in (group / "cgroup.procs").read_text().split():
                try:
                    (root / "cgroup.procs").write_text(pid)
                except OSError:
                    pass  # it exited
            group.rmdir()


def _configs() -> list[tuple[int, int, bool]]:
    configs = [(s, p, False) for p in PROCESSES for s in SHARD_COUNTS]
    return configs + [(1, 4, True), (3, 4, True)]


def _measure(url: str, reps: int, jobs: int) -> dict[str, Any]:
    rows: dict[str, list[tuple[float, float]]] = {}
    for _ in range(reps):  # interleaved: a noisy minute hits every configuration alike
        for s, p, exclusive in _configs():
            key = f"{s} shards, {p} processes" + (", exclusive" if exclusive else "")
            rows.setdefault(key, []).append(one(url, s, p, jobs, exclusive))
    summary = {}
    for k, v in rows.items():
        rate, ceiling = [r[0] for r in v], [r[1] for r in v]
        summary[k] = {"median": statistics.median(rate), "min": min(rate), "max": max(rate),
                      "runs": rate, "ceiling": statistics.median(ceiling),
                      "ceiling_runs": ceiling}
    return summary


def run(quick: bool) -> dict[str, Any]:
    reps = 1 if quick else 3
    jobs = 6_000 if quick else 24_000
    cluster = start_redis_cluster(Path(tempfile.mkdtemp(prefix="fs-shards-")))
    capped: dict[str, Any] | str
    try:
        for node in cluster.nodes:
            node.client().config_set("appendfsync", "everysec")
        url = cluster.url
        rows = _measure(url, reps, jobs)
        masters = [n.proc.pid for n in cluster.nodes if n.role() == "master" and n.proc]
        try:
            caps = CpuCaps(masters, MASTER_CPU)
        except OSError as exc:
            capped = f"skipped: no writable cgroup cpu controller here ({exc})"
        else:
            try:
                capped = _measure(url, reps, jobs)
            finally:
                caps.close()
    finally:
        cluster.stop()
    return {"jobs": jobs, "reps": reps, "batch": BATCH, "rows": rows,
            "capped": capped, "capped_jobs": jobs, "master_cpu": MASTER_CPU}


def _rows(rows: dict[str, Any]) -> list[str]:
    lines = [f"{'configuration':34} {'jobs/s':>22} {'ratio':>6} {'ceiling':>9} {'ratio':>6}"]
    for key, r in rows.items():
        base = rows.get("1 shards, " + key.split(", ", 1)[1], r)
        lines.append(f"{key:34} {r['median']:>9,.0f} [{r['min']:,.0f}-{r['max']:,.0f}] "
                     f"{r['median'] / base['median']:>6.2f} {r['ceiling']:>9,.0f} "
                     f"{r['ceiling'] / base['ceiling']:>6.2f}")
    return lines


def table(result: dict[str, Any]) -> str:
    lines = [f"claim+ack, {result['jobs']:,} due jobs, batch {result['batch']}, "
             f"median of {result['reps']} [min-max]; ratio to 1 shard, same processes",
             "ceiling: jobs per CPU second of the busiest master (the rate at which it would "
             "fill a core of its own)", *_rows(result["rows"]), "",
             f"the same, each master held to {result['master_cpu']:g} of a core (cgroup quota), "
             f"{result['capped_jobs']:,} due jobs:"]
    capped = result["capped"]
    lines += [capped] if isinstance(capped, str) else _rows(capped)
    return "\n".join(lines)


if __name__ == "__main__":
    quick_main(__doc__, "shards", run, table)
