"""Worker start-up: from `fleetsched worker` (its defaults) to its first claim of a due job.

    .venv/bin/python benchmarks/worker_startup.py            # 5 runs
    .venv/bin/python benchmarks/worker_startup.py --quick    # 2 runs

Compiles fleetsched's bytecode first, as installing the wheel does (``compile_bytecode`` in
benchmarks/_common.py). Starts a private redis-server and, per run, a fresh SQLite record
(`fleetsched db upgrade`, untimed) and one due job (simulate executor, 0 ms); then times the
installed `fleetsched worker` command, with no options, from its start to the job's `claim`
and `ack` events (read from the stream every 5 ms, so figures are good to about 5 ms). Prints
the median, min and max.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import compile_bytecode, private_redis, quick_main  # noqa: E402
from scheduler.queue.client import JobSpec, Queue, TaskSpec  # noqa: E402
from scheduler.queue.keys import Keys  # noqa: E402

KEYS = Keys()
FLEETSCHED = str(Path(sys.executable).with_name("fleetsched"))


def one_run(client: Any, url: str, tmp: Path, n: int) -> dict[str, float]:
    client.flushall()
    client.hset(KEYS.host("h0"), mapping={"address": "127.0.0.1", "port": 22, "user": "",
                                           "vars": "{}"})
    q = Queue(client, KEYS)
    q.create_task(TaskSpec("t", spec={"action": "command", "params": {"cmd": ["true"]},
                                      "executor": "simulate",
                                      "executor_options": {"duration_ms": 0}}))
    q.enqueue("t", [JobSpec("t.0", "h0")])
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
    env.update(FLEETSCHED_REDIS_URL=url, FLEETSCHED_STATE_DIR=str(tmp / "state"),
               FLEETSCHED_DATABASE_URL=f"sqlite:///{tmp}/record-{n}.db")
    subprocess.run([FLEETSCHED, "db", "upgrade"], env=env, check=True, capture_output=True)
    start = time.monotonic()
    worker = subprocess.Popen([FLEETSCHED, "worker"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    seen: dict[str, float] = {}
    try:
        while "ack" not in seen:
            if time.monotonic() - start > 60:
                sys.exit("error: the worker claimed nothing in 60 s")
            for _id, fields in client.xrange(KEYS.events):
                kind = fields[b"kind"].decode()
                if kind in ("claim", "ack"):
                    seen.setdefault(kind, time.monotonic() - start)
            time.sleep(0.005)
    finally:
        worker.terminate()
        worker.wait(30)
    return seen


def run(quick: bool) -> dict[str, Any]:
    runs = 2 if quick else 5
    tmp = Path(tempfile.mkdtemp(prefix="fs-startup-"))
    compile_bytecode()
    with private_redis() as client:
        url = client.connection_pool.connection_kwargs
        url = f"redis://{url['host']}:{url['port']}/0"
        samples = [one_run(client, url, tmp, n) for n in range(runs)]
    out: dict[str, Any] = {"runs": runs}
    for kind in ("claim", "ack"):
        values = [s[kind] for s in samples]
        out[kind] = {"median_s": round(statistics.median(values), 3),
                     "min_s": round(min(values), 3), "max_s": round(max(values), 3)}
    return out


def table(r: dict[str, Any]) -> str:
    return "\n".join([f"fleetsched worker (defaults), start to first {k}: median "
                      f"{r[k]['median_s']:.3f} s (min {r[k]['min_s']:.3f}, max {r[k]['max_s']:.3f}), "
                      f"{r['runs']} runs" for k in ("claim", "ack")])


if __name__ == "__main__":
    quick_main(__doc__, "worker_startup", run, table)
