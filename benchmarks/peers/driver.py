"""Runs one workload once for one system and prints its measures as one JSON line.

    <system's python> driver.py SYSTEM WORKLOAD --n N [--variant V] [--sample K]
    <system's python> driver.py SYSTEM fanout --n N --fleet FLEET.json

Runs inside the system's own interpreter (a peer's virtual environment, or fleetsched's), with
``benchmarks/peers/systems`` on ``sys.path`` and ``BENCH_REDIS_URL`` set to a fresh database.
The system module (``systems/<system>_peer.py``) gives ``submit(keys, etas, sleep_ms)``,
``worker_argvs(concurrency)`` and optionally ``prepare(keys)``; every job body RPUSHes
``"KEY TIME"`` onto ``bench:done`` (systems/body.py), which is how completion is counted here,
the same for every system. Times are the machine's wall clock (``time.time()``), in seconds.

Workloads (see workloads.py for the sizes):
- ``accept``: N jobs due an hour from now, submission timed (``--variant each|bulk|cli``;
  ``--sample K`` times only the first K of ``each``);
- ``drain``: N due jobs queued (untimed), then one worker started: start to last done, the
  start-up (start to first done) and the drain rate (first to last done);
- ``lateness``: idle worker (warmed by one job), N jobs due 50 ms apart from 2 s after the
  submission starts: start minus due time per job;
- ``fairness``: idle worker with 4 slots, N jobs of task A (5 ms each) then 4 of task B: each
  task's time from its submission to its last job done, B/A, A's rate.
- ``--variant no-recorder`` (fleetsched, W2-W4): the same worker with ``--no-recorder``, a
  diagnostic row that says what the SQL recorder costs in the same run (operators run the
  default, recorder on);
- ``fanout`` (W5): ``true`` on every sshd host of ``FLEET.json`` (written by run.py: hosts,
  key, known_hosts) at concurrency ``FANOUT_CONCURRENCY``, through the system module's
  ``fan_out``; no Redis list here (each system says when its last host is done, see its module).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import redis

SYSTEMS = Path(__file__).resolve().parent / "systems"
sys.path.insert(0, str(SYSTEMS))
sys.path.insert(1, str(SYSTEMS.parents[2]))  # the checkout: benchmarks._node (standard library only)

from benchmarks._node import ProcessGroup  # noqa: E402

DONE = "bench:done"
LATE_START_S = 2.0
LATE_STEP_S = 0.05
FAIR_JOB_MS = 5
FAIR_SLOTS = 4
FAIR_B = 4
WARM = "warm:w0"
FANOUT_COMMAND = "true"
FANOUT_CONCURRENCY = 50
NO_RECORDER = "no-recorder"  # fleetsched's diagnostic variant of W2-W4


class Workers(ProcessGroup):
    """The system's worker processes, run from ``systems/`` with it on their PYTHONPATH."""

    stop_timeout_s = 15.0

    def __init__(self, argvs: list[list[str]], log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(SYSTEMS), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])}
        super().__init__(argvs, log, env, cwd=SYSTEMS)


def wait_done(r: redis.Redis, n: int, timeout: float, workers: Workers) -> dict[str, float]:
    """{key: time} once ``n`` records are there; raises after ``timeout`` seconds."""
    deadline = time.time() + timeout
    while r.llen(DONE) < n:
        if time.time() > deadline:
            raise SystemExit(f"error: only {r.llen(DONE)} of {n} jobs done after {timeout:.0f} s")
        workers.check_alive()
        time.sleep(0.02)
    out = {}
    for item in r.lrange(DONE, 0, -1):
        key, ts = item.decode().rsplit(" ", 1)
        out[key] = float(ts)
    return out


def warm_up(r: redis.Redis, system, workers: Workers) -> None:
    system.submit([WARM], [None])
    wait_done(r, 1, 120, workers)
    r.delete(DONE)


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]


def accept(system, r, n: int, variant: str, sample: int | None, log: Path) -> dict:
    keys = [f"h{i:06d}" for i in range(n)]
    getattr(system, "prepare", lambda k: None)(keys)
    timed = keys[:sample] if sample else keys
    eta = time.time() + 3600
    t0 = time.perf_counter()
    if variant == "bulk":
        system.submit(timed, [eta] * len(timed))
    elif variant == "cli":
        system.submit_cli(3600)
    else:
        (getattr(system, "submit_each", None) or system.submit)(timed, [eta] * len(timed))
    elapsed = time.perf_counter() - t0
    return {"jobs": len(timed), "seconds": elapsed, "jobs_per_s": len(timed) / elapsed,
            "ms_per_call": elapsed * 1000 / (1 if variant in ("bulk", "cli") else len(timed))}


def drain(system, r, n: int, log: Path) -> dict:
    keys = [f"h{i:06d}" for i in range(n)]
    getattr(system, "prepare", lambda k: None)(keys)
    system.submit(keys, [None] * n)
    start = time.time()
    workers = Workers(system.worker_argvs(None), log)
    try:
        done = wait_done(r, n, 900, workers)
    finally:
        workers.stop()
    first, last = min(done.values()), max(done.values())
    return {"jobs": n, "start_to_last_s": last - start, "startup_s": first - start,
            "jobs_per_s_from_start": n / (last - start),
            "drain_jobs_per_s": (n - 1) / (last - first) if last > first else None}


def lateness(system, r, n: int, log: Path) -> dict:
    keys = [f"h{i:06d}" for i in range(n)]
    getattr(system, "prepare", lambda k: None)(keys + [WARM])
    workers = Workers(system.worker_argvs(None), log)
    try:
        warm_up(r, system, workers)
        t0 = time.time() + LATE_START_S
        due = {k: t0 + i * LATE_STEP_S for i, k in enumerate(keys)}
        system.submit(keys, [due[k] for k in keys])
        submitted = time.time()
        done = wait_done(r, n, LATE_START_S + n * LATE_STEP_S + 60, workers)
    finally:
        workers.stop()
    late = [(done[k] - due[k]) * 1000 for k in keys]
    return {"jobs": n, "submit_s": submitted - (t0 - LATE_START_S),
            "p50_ms": pct(late, 50), "p95_ms": pct(late, 95), "p99_ms": pct(late, 99),
            "max_ms": max(late), "min_ms": min(late), "early": sum(1 for x in late if x < 0)}


def fairness(system, r, n: int, log: Path) -> dict:
    a_keys = [f"a:h{i:06d}" for i in range(n)]
    b_keys = [f"b:h{i:06d}" for i in range(n, n + FAIR_B)]
    getattr(system, "prepare", lambda k: None)(a_keys + b_keys + [WARM])
    workers = Workers(system.worker_argvs(FAIR_SLOTS), log)
    try:
        warm_up(r, system, workers)
        ta = time.time()
        system.submit(a_keys, [None] * n, FAIR_JOB_MS)
        tb = time.time()
        system.submit(b_keys, [None] * FAIR_B, FAIR_JOB_MS)
        done = wait_done(r, n + FAIR_B, 900, workers)
    finally:
        workers.stop()
    a_times = [done[k] for k in a_keys]
    a_s, b_s = max(a_times) - ta, max(done[k] for k in b_keys) - tb
    return {"jobs_a": n, "jobs_b": FAIR_B, "a_s": a_s, "b_s": b_s, "b_over_a": b_s / a_s,
            "a_submit_s": tb - ta,
            "a_jobs_per_s": (n - 1) / (max(a_times) - min(a_times))}


def fanout(system, fleet_path: Path, log: Path) -> dict:
    fleet = json.loads(fleet_path.read_text())
    if system.__name__ == "fleetsched_peer":  # {"first": ..., "second": ...}: two rows
        return system.fan_out(fleet, FANOUT_COMMAND, FANOUT_CONCURRENCY, log)
    return system.fan_out(fleet, FANOUT_COMMAND, FANOUT_CONCURRENCY)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("system")
    parser.add_argument("workload", choices=["describe", "accept", "drain", "lateness",
                                             "fairness", "fanout"])
    parser.add_argument("--n", type=int, default=0)
    parser.add_argument("--variant", default="each",
                        choices=["each", "bulk", "cli", NO_RECORDER])
    parser.add_argument("--fleet", type=Path, help="fanout: the fleet's JSON")
    parser.add_argument("--sample", type=int)
    parser.add_argument("--log", type=Path, default=Path(os.devnull))
    args = parser.parse_args()
    system = importlib.import_module(f"{args.system.replace('-', '_')}_peer")
    if args.workload == "describe":
        out = {"settings": system.SETTINGS, "python": sys.version.split()[0]}
        if hasattr(system, "version"):
            out["version"] = system.version()
        print(json.dumps(out))
        return
    if args.workload == "fanout":
        print(json.dumps(fanout(system, args.fleet, args.log)))
        return
    import redis  # W1-W4 only: Ansible's and parallel-ssh's environments have no redis-py

    r = redis.Redis.from_url(os.environ["BENCH_REDIS_URL"])
    if args.workload == "accept":
        out = accept(system, r, args.n, args.variant, args.sample, args.log)
    else:
        if args.variant == NO_RECORDER:
            system.WORKER_EXTRA = ["--no-recorder"]
        out = globals()[args.workload](system, r, args.n, args.log)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
