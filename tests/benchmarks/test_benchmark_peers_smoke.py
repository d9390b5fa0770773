"""The peer benchmark's smoke form, fleetsched's side only: ``benchmarks/peers/run.py --quick
--smoke --systems fleetsched`` runs every workload at tiny sizes: W1-W4 through the
``bench-record`` plugin action (a plugin found through its entry point) and a real ``fleetsched
worker``, W5 (SSH fan-out) as ``fleetsched submit command`` on 4 real sshd hosts started by the
benchmark (tests/fleet.py), and prints a table per workload. No timing is asserted; the peers
(each installed into its own virtual environment from PyPI) run by hand, see docs/benchmarks.md.
Without sshd, W1-W4 still run, then the test skips (fails with ``CI=true``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from scheduler.config import Settings
from tests.fleet import sshd_binary
from tests.servers import missing

ROOT = Path(__file__).resolve().parents[2]


def test_the_peer_benchmark_runs_for_fleetsched_in_its_smoke_form() -> None:
    has_sshd = sshd_binary() is not None
    workloads = ["W1", "W2", "W3", "W4"] + (["W5"] if has_sshd else [])
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/peers/run.py"), "--quick",
                           "--smoke", "--systems", "fleetsched", "--only", ",".join(workloads)],
                          cwd=ROOT, text=True, capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    for workload in workloads:
        assert f"\n{workload} " in out, out[-3000:]
    rows = [line for line in out.splitlines() if line.startswith("| fleetsched")]
    # W1 three ways, then W2, W3, W4 each at the defaults and with --no-recorder (the
    # diagnostic row), then W5's first task and second task
    assert len(rows) == (11 if has_sshd else 9), out[-3000:]
    assert not [row for row in rows if "(error:" in row], out[-3000:]
    diagnostic = [row for row in rows
                  if row.startswith("| fleetsched (diagnostic: --no-recorder) |")]
    assert len(diagnostic) == 3, out[-3000:]
    threshold = Settings().overload_threshold_ms
    assert f"overload_threshold {threshold} ms" in out  # the settings printed are the defaults
    if not has_sshd:
        missing("OpenSSH sshd", "apt-get install openssh-server (W5 was left out)")
    # Every one of the 4 hosts ran the command, in both of W5's tasks
    assert all(row.endswith("| 4 |") for row in rows[-2:]), rows[-2:]
