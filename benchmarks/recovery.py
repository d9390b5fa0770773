"""How long a dead node's jobs take to come back, behind a backlog of overdue jobs.

A real ``fleetsched worker`` node A (lease 5 s, its defaults otherwise) claims 4 jobs of task B
(idempotent, 60 s each); A is killed with SIGKILL; a second node C, with its defaults (50
slots), serves a backlog of 10,000 overdue jobs of task A (250 ms each: about 50 s of work) due
before B's lease runs out. Measured from the kill, on the Redis clock: when the first ``lost``
event of B's jobs appears (a claim found the expired lease) and when all four are claimed
again. The target is within two leases whatever the backlog (issue 12, defect 5: 64 s with a
5 s lease, before the claims visited expired leases first).

Run: ``python benchmarks/recovery.py`` (3 runs, medians) or ``--quick`` (1 run, 2,000 jobs).
"""

from __future__ import annotations

import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from benchmarks._common import quick_main  # noqa: E402
from scheduler.queue.client import JobSpec, Queue, TaskSpec  # noqa: E402
from scheduler.queue.keys import Keys  # noqa: E402
from scheduler.queue.presence import redis_now_ms  # noqa: E402
from tests.servers import start_redis  # noqa: E402

KEYS = Keys()
LEASE_S = 5
BACKLOG_JOB_MS = 250


def node(url: str, tmp: Path, wid: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env.update(FLEETSCHED_REDIS_URL=url, FLEETSCHED_STATE_DIR=str(tmp / "state"),
               XDG_CONFIG_HOME=str(tmp / "config"), PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-P", "-m", "scheduler", "worker", "--id", wid,
                             "--lease", f"{LEASE_S}s", "--no-recorder"], env=env,
                            stdout=subprocess.DEVNULL, stderr=open(tmp / f"{wid}.log", "wb"),
                            start_new_session=True)


def task(q: Queue, client: redis.Redis, task_id: str, n: int, duration_ms: int,
         due_ms: int) -> list[str]:
    for i in range(min(n, 50)):
        client.hset(KEYS.host(f"h{i}"), mapping={"address": "127.0.0.1", "port": 22, "user": "",
                                                 "vars": "{}"})
    spec = {"action": "command", "params": {"cmd": ["true"]}, "executor": "simulate",
            "executor_options": {"duration_ms": duration_ms}}
    q.create_task(TaskSpec(task_id, spec=spec, idempotent=True, timeout_ms=600_000))
    jobs = [JobSpec(f"{task_id}.{i}", f"h{i % 50}", due_ms=due_ms) for i in range(n)]
    q.enqueue(task_id, jobs)
    return [j.job_id for j in jobs]


def events(client: redis.Redis, kind: str) -> list[tuple[int, dict[str, str]]]:
    return [(int(i.split("-")[0]), f) for i, f in client.xrange(KEYS.events)
            if f.get("kind") == kind]


def once(backlog: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="fs-recovery-"))
    server = start_redis(tmp)
    client = redis.Redis.from_url(server.url, decode_responses=True)
    q = Queue(client, KEYS)
    a = c = None
    try:
        now = redis_now_ms(client)
        b_jobs = task(q, client, "2", 4, 60_000, now - 120_000)
        a = node(server.url, tmp, "a")
        while len(events(client, "claim")) < 4:
            if a.poll() is not None:
                raise RuntimeError((tmp / "a.log").read_text()[-2000:])
            time.sleep(0.05)
        time.sleep(1.0)  # the jobs are running on A's children (not given back at its start)
        released = [f for _, f in events(client, "release") if f.get("job") in b_jobs]
        if released:
            raise RuntimeError(f"node A gave jobs back instead of running them: {released}")
        task(q, client, "1", backlog, BACKLOG_JOB_MS, now - 60_000)
        os.killpg(a.pid, signal.SIGKILL)
        a.wait()
        killed = redis_now_ms(client)
        c = node(server.url, tmp, "c")
        deadline = time.monotonic() + 180
        lost = reclaimed = None
        while time.monotonic() < deadline and reclaimed is None:
            ev_lost = [ms for ms, f in events(client, "lost") if f.get("job") in b_jobs]
            again = [ms for ms, f in events(client, "claim")
                     if f.get("job") in b_jobs and f.get("worker") == "c"]
            if ev_lost and lost is None:
                lost = min(ev_lost)  # the first claim that found the lease expired
            if len(again) == 4:
                reclaimed = max(again)
            time.sleep(0.1)
        acked = sum(1 for ms, f in events(client, "ack")
                    if f["job"].startswith("1.") and lost is not None and ms <= lost)
        left = sum(1 for _, f in events(client, "ack") if f["job"].startswith("1."))
        return {"backlog": backlog, "lease_s": LEASE_S,
                "lost_after_s": (lost - killed) / 1000 if lost else float("nan"),
                "reclaimed_after_s": (reclaimed - killed) / 1000 if reclaimed else float("nan"),
                "backlog_acked_before_found": acked, "backlog_left_then": backlog - acked,
                "backlog_acked_at_end": left}
    finally:
        for p in (a, c):
            if p is not None and p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        client.close()
        server.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def run(quick: bool) -> dict:
    backlog = 2_000 if quick else 10_000
    runs = [once(backlog) for _ in range(1 if quick else 3)]
    med = {k: statistics.median(r[k] for r in runs)
           for k in ("lost_after_s", "reclaimed_after_s", "backlog_left_then")}
    return {"backlog": backlog, "lease_s": LEASE_S, "runs": runs, "median": med,
            "leases_to_recover": med["reclaimed_after_s"] / LEASE_S}


def table(r: dict) -> str:
    m = r["median"]
    return (f"dead node's 4 jobs behind {r['backlog']:,} overdue jobs, lease {r['lease_s']} s "
            f"(median of {len(r['runs'])}):\n"
            f"  lost found after   {m['lost_after_s']:.1f} s\n"
            f"  claimed again after {m['reclaimed_after_s']:.1f} s = "
            f"{r['leases_to_recover']:.2f} leases\n"
            f"  backlog jobs still waiting when they were found {m['backlog_left_then']:.0f}")


if __name__ == "__main__":
    quick_main(__doc__, "recovery", run, table)
