"""Helpers for the worker node tests: real ``python -m scheduler worker`` processes on a real Redis.

- :func:`submit` writes hosts, a task and its jobs the way submission does (host hashes,
  ``Queue.create_task``, ``Queue.enqueue``);
- :class:`WorkerProcess` starts a node master as a subprocess, finds its children in /proc,
  sends it signals, and keeps its stderr for the failure message; :func:`started_workers`
  starts as many as a test asks for and stops them all at the end; :func:`alive` tells whether
  a process still runs (a zombie does not);
- :func:`events` and :func:`final_outcomes` read the audit stream to count what became of
  every job (acked, failed, retried, lost, released) without trusting the worker's own word.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from scheduler.queue.client import JobSpec, Queue, TaskSpec
from scheduler.queue.keys import Keys
from tests.fleet import descendants

KEYS = Keys()
ROOT = Path(__file__).resolve().parent.parent


def submit(client: redis.Redis, task_id: str, hosts: int | Sequence[str], *,
           action: str = "command", params: dict[str, Any] | None = None,
           executor: str = "simulate", options: dict[str, Any] | None = None,
           timeout_ms: int = 60_000, idempotent: bool = True, max_attempts: int = 3,
           backoff_ms: int = 100, due_ms: int = 0, host_data: dict[str, Any] | None = None,
           write_hosts: bool = True, **policy: Any) -> list[str]:
    """Create a task with one job per host; returns the job ids. ``policy``: more
    ``TaskSpec`` fields (max_failures, max_running ...)."""
    names = [f"{task_id}-h{i}" for i in range(hosts)] if isinstance(hosts, int) else list(hosts)
    if write_hosts:
        pipe = client.pipeline()
        for name in names:
            data = {"address": "127.0.0.1", "port": 22, "user": "", "vars": "{}", **(host_data or {})}
            pipe.hset(KEYS.host(name), mapping=data)
        pipe.execute()
    spec = {"action": action, "params": params if params is not None else {"cmd": ["true"]},
            "executor": executor, "executor_options": options or {}}
    q = Queue(client, KEYS)
    q.create_task(TaskSpec(task_id, spec=spec, timeout_ms=timeout_ms, idempotent=idempotent,
                           max_attempts=max_attempts, backoff_ms=backoff_ms, **policy))
    jobs = [JobSpec(f"{task_id}.{i}", name, due_ms=due_ms) for i, name in enumerate(names)]
    q.enqueue(task_id, jobs)
    return [j.job_id for j in jobs]


def events(client: redis.Redis, kinds: Sequence[str] | None = None) -> list[dict[str, str]]:
    out = [fields for _id, fields in client.xrange(KEYS.events)]
    return [e for e in out if kinds is None or e["kind"] in kinds]


def final_outcomes(client: redis.Redis, job_ids: Sequence[str]) -> dict[str, str]:
    """Each job's end as the events tell it: the kind of its last ``ack``/``fail``/``lost``
    event (``fail`` split into ``fail:<error>``), or ``open`` if it has none yet."""
    last: dict[str, str] = {}
    for e in events(client, ("ack", "fail", "lost")):
        if e.get("job") in job_ids:
            last[e["job"]] = e["kind"]
    states = {j: Queue(client, KEYS).job_state(j).get("state", "") for j in job_ids}
    result = {}
    for j in job_ids:
        if j in last and states[j] in ("", "failed"):
            result[j] = "acked" if last[j] == "ack" else "failed"
        else:
            result[j] = "open"
    return result


def wait_until(predicate: Callable[[], Any], timeout: float, what: str,
               on_timeout: Callable[[], str] | None = None,
               watch: Sequence[WorkerProcess] = ()) -> Any:
    """Poll ``predicate`` until true; fail early if a watched worker exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        for w in watch:
            if w.proc is not None and w.proc.poll() is not None:
                raise AssertionError(f"worker {w.args_id} exited ({w.proc.returncode}) while "
                                     f"waiting for {what}\n{w.tail()}")
        time.sleep(0.02)
    detail = on_timeout() if on_timeout else ""
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{detail}")


@dataclass
class WorkerProcess:
    """A node master started as ``python -m scheduler worker``; its stderr goes to ``log``."""

    redis_url: str
    tmp: Path
    args: list[str]
    env: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen | None = None

    @property
    def log(self) -> Path:
        return self.tmp / f"worker-{self.args_id}.log"

    @property
    def args_id(self) -> str:
        return self.args[self.args.index("--id") + 1] if "--id" in self.args else "w"

    def start(self) -> WorkerProcess:
        self.tmp.mkdir(parents=True, exist_ok=True)
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("FLEETSCHED_")}
        env = {
            **inherited,
            "FLEETSCHED_REDIS_URL": self.redis_url,
            "FLEETSCHED_STATE_DIR": str(self.tmp / "state"),
            "XDG_CONFIG_HOME": str(self.tmp / "config"),  # no user config file
            "FLEETSCHED_LOG_LEVEL": "info",
            "FLEETSCHED_LOG_FORMAT": "text",  # the tests read lines; tests/workers/test_logs_json.py reads JSON
            "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [self.env.pop("PYTHONPATH", "")])]),
            **self.env,
        }
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-P", "-m", "scheduler", "worker", *self.args], env=env,
                                         stdout=subprocess.DEVNULL, stderr=err, cwd=self.tmp)
        return self

    def wait_registered(self, client: redis.Redis, timeout: float = 15.0) -> None:
        wait_until(lambda: client.hexists(KEYS.workers, self.args_id), timeout,
                   f"worker {self.args_id} to register", self.tail)

    def children(self) -> list[int]:
        return descendants(self.proc.pid) if self.proc else []

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def kill9(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(10)

    def wait(self, timeout: float = 30.0) -> int:
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"worker did not exit within {timeout}s\n{self.tail()}") from None

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in descendants(self.proc.pid) if self.proc else []:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def tail(self, lines: int = 40) -> str:
        try:
            text = self.log.read_text(errors="replace")
        except OSError:
            return ""
        return "worker log:\n" + "\n".join(text.splitlines()[-lines:])


def worker_args(worker_id: str, *, slots: int = 8, processes: int = 2, lease: str = "2s",
                grace: str = "5s", extra: Sequence[str] = ()) -> list[str]:
    return ["--id", worker_id, "--slots", str(slots), "--processes", str(processes),
            "--lease", lease, "--grace", grace, "--no-recorder", *extra]


@contextmanager
def started_workers(redis_url: str, tmp: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Yield ``start(worker_id, *, env=None, **worker_args_kwargs)``, which starts a node master
    on ``redis_url``; every master started is stopped when the block ends."""
    started: list[WorkerProcess] = []

    def start(worker_id: str, *, env: dict[str, str] | None = None, **kwargs: Any) -> WorkerProcess:
        w = WorkerProcess(redis_url, tmp, worker_args(worker_id, **kwargs), env=dict(env or {}))
        started.append(w.start())
        return w

    try:
        yield start
    finally:
        for w in started:
            w.stop()


def alive(pid: int) -> bool:
    """True while ``pid`` runs; a zombie (exited, not yet reaped) counts as dead."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def claims_per_job(client: redis.Redis) -> Counter[str]:
    return Counter(e["job"] for e in events(client, ("claim",)))


def dump(client: redis.Redis) -> str:
    return "events:\n" + "\n".join(json.dumps(e) for e in events(client)[-60:])


def plugin_site(base: Path) -> Path:
    """A directory holding an installed distribution whose ``fleetsched.actions`` entry points
    are the actions of ``tests/plugin_actions.py`` (``hang``, ``mark-then-sleep``): put it on a
    worker's ``PYTHONPATH`` (which holds the repository already) and its children find them."""
    site = base / "site"
    info = site / "fs_test_actions-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fs-test-actions\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[fleetsched.actions]\n"
        "hang = tests.plugin_actions:HangAction\n"
        "mark-then-sleep = tests.plugin_actions:MarkThenSleep\n")
    return site
