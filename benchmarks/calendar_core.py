"""Calendar core benchmark: what a windowed submission and a claim-time check cost.

    .venv/bin/python benchmarks/calendar_core.py            # 5 runs of each measurement
    .venv/bin/python benchmarks/calendar_core.py --runs 3

Times per call, medians of several runs in the same process (the machine is shared, so read
the ratios rather than the absolute figures):

- ``next_opening``: one host's next opening for a 40-minute job, daily and weekly Berlin
  windows anchored in 2000, with and without a year-end freeze, at random instants 2026-2030;
- ``fanout_3000``: a 3,000-host submission where every host has one of 20 windows;
- ``rrule_from_dtstart``: the same daily query walking dateutil from DTSTART (what the
  re-anchoring avoids), and its ratio to the re-anchored query;
- ``next_fire``: a cron schedule's next fire (fixed-time and real-time expressions).

Prints a table and JSON (benchmarks/results/calendar.json).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import save_result  # noqa: E402
from scheduler.calendar.cron import next_fire, parse_cron  # noqa: E402
from scheduler.calendar.recurrence import wall  # noqa: E402
from scheduler.calendar.windows import Window, next_opening  # noqa: E402

UTC = timezone.utc
JOB = timedelta(minutes=40)


def per_call(fn: Callable[[datetime], Any], instants: list[datetime], runs: int) -> float:
    """Median over ``runs`` of the mean seconds per call of ``fn`` over ``instants``."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        for at in instants:
            fn(at)
        samples.append((time.perf_counter() - start) / len(instants))
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(7)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    instants = [base + timedelta(minutes=rng.randrange(4 * 365 * 24 * 60)) for _ in range(500)]
    anchor = datetime(2000, 1, 1)
    daily = Window("daily", tz="Europe/Berlin", rrule="FREQ=DAILY;BYHOUR=2;BYMINUTE=0",
                   start=anchor, duration=timedelta(hours=2))
    weekly = Window("weekly", tz="Europe/Berlin", start=anchor, end_time="02:00",
                    rrule="FREQ=WEEKLY;BYDAY=SA;BYHOUR=22;BYMINUTE=0")
    freeze = Window("year-end", tz="Europe/Berlin", rrule="FREQ=YEARLY;BYMONTH=12;BYMONTHDAY=20",
                    duration=timedelta(days=14), freeze=True)
    results: dict[str, float] = {}
    results["next_opening_daily_us"] = 1e6 * per_call(
        lambda at: next_opening([daily], at, JOB), instants, args.runs)
    results["next_opening_weekly_us"] = 1e6 * per_call(
        lambda at: next_opening([weekly], at, JOB), instants, args.runs)
    results["next_opening_weekly_freeze_us"] = 1e6 * per_call(
        lambda at: next_opening([weekly], at, JOB, freezes=[freeze]), instants, args.runs)

    rule = daily._rec._rule  # type: ignore[union-attr]  # the rule as parsed, DTSTART 2000
    tz = ZoneInfo(daily.tz)
    results["rrule_from_dtstart_us"] = 1e6 * per_call(
        lambda at: rule.after(wall(at, tz)), instants[:50], args.runs)
    results["rrule_reanchored_us"] = 1e6 * per_call(
        lambda at: next(daily._rec.starts(at)), instants, args.runs)  # type: ignore[union-attr]
    results["reanchoring_speedup"] = (results["rrule_from_dtstart_us"]
                                      / results["rrule_reanchored_us"])

    windows = [Window(f"w{i}", tz="Europe/Berlin", start=anchor, duration=timedelta(hours=3),
                      rrule=f"FREQ=WEEKLY;BYDAY={'MO TU WE TH FR SA SU'.split()[i % 7]};"
                            f"BYHOUR={i % 24};BYMINUTE=0") for i in range(20)]
    hosts = [windows[i % 20] for i in range(3000)]
    samples = []
    for _ in range(args.runs):
        start = time.perf_counter()
        for w in hosts:
            next_opening([w], base, JOB, freezes=[freeze])
        samples.append(time.perf_counter() - start)
    results["fanout_3000_hosts_s"] = statistics.median(samples)

    fixed, real = parse_cron("30 2 * * *", "Europe/Berlin"), parse_cron("*/15 * * * *", "UTC")
    results["next_fire_fixed_us"] = 1e6 * per_call(
        lambda at: next_fire(fixed, "Europe/Berlin", at), instants, args.runs)
    results["next_fire_real_us"] = 1e6 * per_call(
        lambda at: next_fire(real, "UTC", at), instants, args.runs)

    width = max(map(len, results))
    for name, value in results.items():
        print(f"{name:<{width}}  {value:10.2f}")
    out = save_result("calendar", {"runs": args.runs, "results": results})
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
