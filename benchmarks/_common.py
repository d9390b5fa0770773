"""What the benchmark scripts share: median timings, the result file, the --quick entry point.

Each script still puts the repository root on ``sys.path`` itself (it runs as
``python benchmarks/<name>.py``) before importing this module.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def median_seconds(fn: Callable[[], Any], runs: int,
                   setup: Callable[[], Any] | None = None) -> float:
    """Median wall time of ``runs`` calls of ``fn``, each after an untimed ``setup()``."""
    samples = []
    for _ in range(runs):
        if setup:
            setup()
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def save_result(name: str, result: Any) -> Path:
    """Write ``result`` as indented JSON to benchmarks/results/<name>.json; its path."""
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    return out


def quick_main(doc: str, name: str, run: Callable[[bool], dict[str, Any]],
               table: Callable[[dict[str, Any]], str],
               shown: Callable[[dict[str, Any]], Any] = lambda r: r) -> None:
    """The entry point of a benchmark with only ``--quick``: run, print the table and the JSON
    (``shown`` picks what is printed), save the whole result as <name>.json."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one run each")
    result = run(parser.parse_args().quick)
    print(table(result))
    print(json.dumps(shown(result), indent=2))
    save_result(name, result)
