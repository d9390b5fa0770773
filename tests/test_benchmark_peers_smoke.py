"""The peer benchmark's smoke form, fleetsched's side only: ``benchmarks/peers/run.py --quick
--smoke --systems fleetsched`` runs every workload (W1-W4) at tiny sizes, through the
``bench-record`` plugin action (a plugin found through its entry point) and a real
``fleetsched worker``, and prints a table per workload. No timing is asserted; the peers (each
installed into its own virtual environment from PyPI) run by hand, see docs/benchmarks.md."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scheduler.config import Settings

ROOT = Path(__file__).resolve().parents[1]


def test_the_peer_benchmark_runs_for_fleetsched_in_its_smoke_form() -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/peers/run.py"), "--quick",
                           "--smoke", "--systems", "fleetsched"], cwd=ROOT, text=True,
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for workload in ("W1", "W2", "W3", "W4"):
        assert f"\n{workload} " in out, out[-3000:]
    rows = [line for line in out.splitlines() if line.startswith("| fleetsched")]
    assert len(rows) == 6, out[-3000:]  # W1 three ways, then W2, W3, W4
    threshold = Settings().overload_threshold_ms
    assert f"overload_threshold {threshold} ms" in out  # the settings printed are the defaults
