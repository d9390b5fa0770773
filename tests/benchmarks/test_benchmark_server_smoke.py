"""The HTTP API benchmark's smoke form: ``benchmarks/bench_server.py --smoke`` fills a SQLite
record and a PostgreSQL one (the suite's server, the benchmark's ``--database-url``) by bulk
INSERT at tiny sizes, starts the real ``fleetsched server`` on each, and has five clients call
task list, task detail and the task's job pages. No timing is asserted: it fails when a part
cannot run, a request is refused, or a figure is missing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_server_benchmark_runs_in_its_smoke_form(fresh_postgres_url: str) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/bench_server.py"), "--smoke",
                           "--database-url", fresh_postgres_url], cwd=ROOT, text=True,
                          capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "p99/50ms" in out
    results = json.loads(out[out.index("\n[") + 1:])
    assert [r["database"] for r in results] == ["sqlite", "postgresql"]
    for r in results:
        assert r["jobs"] == 1200 and r["big_task_hosts"] == 200 and r["detail_bytes"] > 0
        assert {"tasks list", "task detail"} <= set(r["endpoints"])
        for name, e in r["endpoints"].items():
            assert e["requests"] > 0 and e["errors"] == {}, (r["database"], name, e)
            assert 0 < e["p50"] <= e["p95"] <= e["p99"]
