"""Executor costs: pooled vs fresh SSH connections on a real sshd, and the simulator's overhead.

Run from the repository root:  .venv/bin/python benchmarks/bench_executors.py [--runs 5] [-n 30]

Prints, per run, the time of ``n`` sessions each running ``true`` with the connection pool on
and off, and their ratio (measured in the same run, as the shared machine is noisy), then the
medians; and the cost of one zero-duration simulated command.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fleet import start_fleet  # noqa: E402
from tasks.executors import Host, build_executor  # noqa: E402


def sessions(executor, host: Host, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        with executor.session(host) as session:
            assert session.run(["true"], timeout=30).ok
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("-n", type=int, default=30)
    args = parser.parse_args()
    fleet = start_fleet(Path(tempfile.mkdtemp(prefix="fs-bench-")), count=1, prefix="bench",
                        net="127.0.12")
    host = fleet.hosts[0].host()
    pooled, fresh, ratios = [], [], []
    try:
        for run in range(args.runs):
            with_pool = fleet.executor(pool=True)
            without = fleet.executor(pool=False)
            a = sessions(with_pool, host, args.n)
            b = sessions(without, host, args.n)
            with_pool.close()
            without.close()
            pooled.append(a / args.n * 1000)
            fresh.append(b / args.n * 1000)
            ratios.append(b / a)
            print(f"run {run + 1}: pooled {pooled[-1]:.1f} ms/session, fresh connection "
                  f"{fresh[-1]:.1f} ms/session, fresh/pooled {ratios[-1]:.2f}x")
        print(f"median: pooled {statistics.median(pooled):.1f} ms, fresh "
              f"{statistics.median(fresh):.1f} ms, ratio {statistics.median(ratios):.2f}x")
    finally:
        fleet.stop()
    sim = build_executor("simulate", {})
    n = 100_000
    with sim.session(Host("sim")) as session:
        started = time.perf_counter()
        for _ in range(n):
            session.run(["true"], timeout=1)
        per = (time.perf_counter() - started) / n * 1e6
    print(f"simulate, zero duration: {per:.1f} us per command")


if __name__ == "__main__":
    main()
