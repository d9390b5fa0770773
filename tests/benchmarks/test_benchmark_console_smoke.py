"""The console benchmark's smoke form: ``benchmarks/bench_console.py --smoke`` (a 300-host task
on a real server and worker node, its page opened in a real Chromium while the jobs drain).

No timing is asserted. What is asserted is how the page is built: the browser holds only the
visible page of hosts (50 rows, not 300), the live stream brought fragments while the jobs
changed state, and the task drained with the page open."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.server.console.browser import chromium_binary
from tests.servers import missing

ROOT = Path(__file__).resolve().parents[2]


def test_the_task_page_holds_one_page_of_hosts_while_the_task_drains() -> None:
    if chromium_binary() is None:
        missing("chromium-headless-shell",
                "apt-get install --no-install-recommends chromium-headless-shell")
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/bench_console.py"), "--smoke"],
                          cwd=ROOT, text=True, capture_output=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "task page, idle:" in out and "ratios drain / idle:" in out
    result = json.loads(out[out.index("\n{") + 1:])
    assert result["hosts"] == 300 and result["drained"] is True
    assert result["rows_shown"] == 50  # one page of the 300 hosts
    assert result["fragments"] > 0  # the page was redrawn live while the jobs ran
    assert result["idle_page_median_ms"] > 0 and result["drain_page_median_ms"] > 0
