"""The fleet-day benchmark's smoke form: ``benchmarks/fleet_day.py --quick --smoke`` runs the
whole compressed day at tiny sizes (300 hosts imported with ``fleetsched hosts import``, three
real ``fleetsched worker`` nodes, a private PostgreSQL and redis-server, a schedule, a service
window, small tasks beside a fleet-wide change) and prints every figure. No timing is asserted:
it fails when a part of the day cannot run, or a figure cannot be measured."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_fleet_day_benchmark_runs_in_its_smoke_form(fresh_postgres_url: str) -> None:
    # Given a fresh database on the suite's PostgreSQL (the benchmark's --database-url; without
    # it the benchmark starts a private cluster the way the suite's fixture does)
    # When the whole day runs at tiny sizes
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/fleet_day.py"), "--quick",
                           "--smoke", "--database-url", fresh_postgres_url], cwd=ROOT, text=True,
                          capture_output=True, timeout=240)
    # Then every figure is printed, measured on three nodes, with no job lost or failed
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for figure in ("throughput: big change", "claim latency, big change:", "small tasks' completion, those created before",
                   "Redis: used_memory_peak", "recorder lag", "SQL events:", "SQL per day"):
        assert figure in out, out[-3000:]
    result = json.loads(out[out.index("\n{") + 1:])
    assert result["acks_by_worker"] and len(result["acks_by_worker"]) == 3
    assert result["failed_jobs"] == 0
    assert result["schedule_occurrences"] >= 1
    assert result["tasks"]["in_window"] == 1 and result["claim_latency_ms"]["in_window"]["n"] >= 1
    assert result["big"]["jobs"] == 300
