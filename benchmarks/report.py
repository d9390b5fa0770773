"""Report benchmark: how long ``fleetsched report`` takes for 100,000 jobs, per stage and format.

    .venv/bin/python benchmarks/report.py            # 100,000 jobs (100 tasks x 1,000), 5 runs
    .venv/bin/python benchmarks/report.py --quick    # 10,000 jobs, 3 runs

Fills a SQLite file in a temporary directory with generated finished tasks and jobs (2% failed,
log-normal durations; not timed), then times, as medians of several runs: the query
(``build_report``), each rendering (table, CSV, JSON, HTML), and the whole command end to end
in a fresh process (``fleetsched report --html``), which includes Python start-up and imports.
Prints a table, then JSON (also written to benchmarks/results/report.json).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import median_seconds, save_result  # noqa: E402
from scheduler.record.engine import make_engine  # noqa: E402
from scheduler.record.migrate import upgrade  # noqa: E402
from scheduler.reports import ReportFilter, build_report, render_html  # noqa: E402
from scheduler.reports.text import write_csv, write_json, write_table  # noqa: E402
from tests.report_rows import insert_jobs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    tasks, per_task, runs = (10, 1000, 3) if args.quick else (100, 1000, 5)
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/report.db"
        upgrade(url)
        engine = make_engine(url)
        insert_jobs(engine, tasks=tasks, jobs_per_task=per_task)
        report = build_report(engine, ReportFilter())
        results = {
            "jobs": len(report.jobs), "runs": runs,
            "query_s": median_seconds(lambda: build_report(engine, ReportFilter()), runs),
            "query_failed_only_s": median_seconds(
                lambda: build_report(engine, ReportFilter(state="failed")), runs),
            "table_s": median_seconds(lambda: write_table(io.StringIO(), report), runs),
            "csv_s": median_seconds(lambda: write_csv(io.StringIO(), report), runs),
            "json_s": median_seconds(lambda: write_json(io.StringIO(), report), runs),
            "html_s": median_seconds(lambda: render_html(report), runs),
        }
        engine.dispose()
        cli = [str(Path(sys.executable).with_name("fleetsched")), "--database-url", url, "report",
               "--html", f"{tmp}/report.html"]
        env = {**os.environ, "NO_COLOR": "1"}
        results["cli_html_end_to_end_s"] = median_seconds(
            lambda: subprocess.run(cli, check=True, capture_output=True, env=env), runs)
        results["html_bytes"] = Path(f"{tmp}/report.html").stat().st_size
    width = max(map(len, results))
    for k, v in results.items():
        print(f"{k.ljust(width)}  {v:.3f}" if isinstance(v, float) else f"{k.ljust(width)}  {v}")
    save_result("report", results)
    print(json.dumps(results))


if __name__ == "__main__":
    main()
