"""The event stream benchmark's smoke form: ``benchmarks/bench_sse.py --smoke`` on a PostgreSQL
record (the suite's server, its ``--database-url``), a real ``fleetsched server`` and worker
node running a 60-host task, followed by 0, 1 and 10 followers for a few seconds each.

No timing is asserted. What is asserted is a property of the server: followers of one task
share one poller, so 10 followers make the reads of 1, counted outside the server (the
commands Redis saw on the server's connections, the record's transactions) and inside
(``/status/followers``)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ten_followers_of_a_task_cost_redis_and_the_record_what_one_does(
        fresh_postgres_url: str) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks/bench_sse.py"), "--smoke",
                           "--database-url", fresh_postgres_url], cwd=ROOT, text=True,
                          capture_output=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = proc.stdout
    assert "the record (pg_stat_database)" in out and "ratios 10 followers / 1" in out
    result = json.loads(out[out.index("\n{") + 1:])
    assert result["database"] == "postgresql" and result["hosts"] == 60
    levels = result["levels"]
    assert set(levels) == {"0", "1", "10"}
    assert levels["0"]["polls"] == 0 and levels["0"]["server_redis"] == 0
    for n in ("1", "10"):
        assert levels[n]["events_min"] > 0, levels[n]  # every follower got events
        assert levels[n]["server_redis"] > 0 and levels[n]["polls"] > 0, levels[n]
    one, ten = levels["1"], levels["10"]
    # One poller: what the server sends Redis, seen by Redis, does not grow with the
    # followers (10 would be 10x), nor its own count of reads and round trips ...
    assert ten["server_redis"] <= 1.5 * one["server_redis"], (one, ten)
    assert ten["polls"] <= 1.5 * one["polls"] and ten["queries"] <= 1.5 * one["queries"]
    # ... nor the record's transactions beyond the baseline's (the worker's recorder's)
    assert ten["xact_share"] <= 1.5 * max(one["xact_share"], 1.0) + 2, (one, ten)
