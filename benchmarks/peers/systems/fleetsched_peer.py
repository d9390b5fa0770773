"""fleetsched as installed: ``fleetsched worker`` with its defaults (the settings' defaults,
printed as ``SETTINGS``: slots, recorder on, fair share, overload threshold), SQLite record, the ``bench-record`` plugin action
(benchmarks/peers/plugin) on the ``simulate`` executor: the executor runs nothing, the action's
body is the RPUSH every system makes.

Submitting goes through the library's ``scheduler.submission.submit.submit`` (plan, SQL record,
fan-out to Redis, what ``fleetsched submit`` calls) with one engine and one Redis client, as a
program using fleetsched would; ``submit_cli`` runs ``fleetsched submit`` itself. The hosts come
from a generated Ansible INI inventory imported first (group ``fleet``, or the key's prefix: the
key ``a:h000001`` is host ``h000001`` of group ``a``). Runs in the project's own interpreter.

W5 (``fan_out``) is the product as an operator types it: ``fleetsched hosts import`` of the
sshd fleet, the ssh executor pointed at the fleet's known_hosts, ssh config and key through
``FLEETSCHED_*`` settings (strict host-key checking, as always), one ``fleetsched worker`` with
its defaults (50 slots already), and ``fleetsched submit command -t all -p cmd=true
--max-concurrency 50 --wait`` twice on the same node.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa

HERE = Path(__file__).resolve().parent
PLUGIN = HERE.parent / "plugin"
URL = os.environ["BENCH_REDIS_URL"]


def _settings() -> str:
    from scheduler.config import Settings

    d = Settings()  # what an installation without a config file runs with
    return (f"`fleetsched worker` defaults: worker_slots {d.worker_slots}, 2 child processes, "
            f"recorder on, fair_share_by {d.fair_share_by}, overload_threshold "
            f"{d.overload_threshold_ms} ms; SQLite; action bench-record (plugin) on the "
            "simulate executor; --slots N for N slots; W5: `fleetsched submit command` on the "
            "ssh executor, the worker at its defaults")


SETTINGS = _settings()

_tmp = Path(tempfile.mkdtemp(prefix="fs-peers-"))
atexit.register(shutil.rmtree, _tmp, ignore_errors=True)
(_tmp / "config.toml").write_text("")
ENV = {"FLEETSCHED_REDIS_URL": URL, "FLEETSCHED_DATABASE_URL": f"sqlite:///{_tmp / 'fs.db'}",
       "FLEETSCHED_STATE_DIR": str(_tmp / "state"), "FLEETSCHED_CONFIG": str(_tmp / "config.toml"),
       "FLEETSCHED_OPERATOR": "bench"}
os.environ.update(ENV)
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(PLUGIN), *[p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]])
sys.path.insert(0, str(PLUGIN))

from scheduler.config import load_settings
from scheduler.inventory.service import import_inventory
from scheduler.record import make_engine
from scheduler.record.migrate import upgrade
from scheduler.record.models import Job
from scheduler.redisdb.connect import connect
from scheduler.submission.submit import TaskRequest
from scheduler.submission.submit import submit as fs_submit

_engine = None
_client = None
_groups: dict[str, list[str]] = {}


def _split(key: str) -> tuple[str, str]:
    prefix, _, host = key.rpartition(":")
    return prefix or "fleet", host


def prepare(keys: list[str]) -> None:
    """Create the SQL schema and import an inventory holding one host per key."""
    global _engine, _client
    for key in keys:
        group, host = _split(key)
        _groups.setdefault(group, []).append(host)
    lines = []
    for group, hosts in _groups.items():
        lines.append(f"[{group}]")
        lines += [f"{h} ansible_host=127.0.0.1" for h in hosts]
    inv = _tmp / "fleet.ini"
    inv.write_text("\n".join(lines) + "\n")
    upgrade(ENV["FLEETSCHED_DATABASE_URL"])
    _engine = make_engine(ENV["FLEETSCHED_DATABASE_URL"])
    import_inventory(_engine, inv, operator="bench")
    _client = connect(load_settings())


def _request(target: str, eta: float | None, prefix: str, sleep_ms: int) -> TaskRequest:
    at = None if eta is None else datetime.fromtimestamp(eta, UTC)
    return TaskRequest("bench-record", target, {"prefix": prefix, "sleep_ms": sleep_ms},
                       at=at, executor="simulate")


def _target(group: str, hosts: list[str]) -> str:
    return f"group:{group}" if hosts == _groups.get(group) else ",".join(hosts)


def submit(keys: list[str], etas: list[float | None], sleep_ms: int = 0) -> None:
    """The natural way: one task for the keys of one group that share a due time (W1 bulk,
    W2, W4: one task of N hosts), one task per distinct due time otherwise (W3)."""
    batches: dict[tuple[str, float | None], list[str]] = {}
    for key, eta in zip(keys, etas):
        group, host = _split(key)
        batches.setdefault((group, eta), []).append(host)
    for (group, eta), hosts in batches.items():
        prefix = "" if group == "fleet" else f"{group}:"
        fs_submit(_engine, lambda: _client, _request(_target(group, hosts), eta, prefix, sleep_ms),
                  operator="bench")


def submit_each(keys: list[str], etas: list[float | None], sleep_ms: int = 0) -> None:
    """One one-host task per key (the peers' one call per job)."""
    for key, eta in zip(keys, etas):
        group, host = _split(key)
        prefix = "" if group == "fleet" else f"{group}:"
        fs_submit(_engine, lambda: _client, _request(host, eta, prefix, sleep_ms),
                  operator="bench")


def submit_cli(delay_s: int) -> None:
    """``fleetsched submit bench-record -t all --in DELAY --yes``: one process, as typed."""
    subprocess.run(["fleetsched", "submit", "bench-record", "-t", "all", "--in", f"{delay_s}s",
                    "--executor", "simulate", "--yes", "--output", "json"],
                   check=True, capture_output=True)


WORKER_EXTRA: list[str] = []  # the driver's ``--variant no-recorder`` sets ``--no-recorder``


def worker_argvs(concurrency: int | None) -> list[list[str]]:
    extra = ["--slots", str(concurrency)] if concurrency else []
    return [["fleetsched", "worker", *extra, *WORKER_EXTRA]]


# ----------------------------------------------------------------------------- W5 fan-out

SQL_POLL_S = 0.05


def _import_fleet(fleet: dict[str, Any]) -> None:
    """``fleetsched hosts import`` of the fleet as group ``fleet``, and the settings that point
    the ssh executor at its known_hosts, ssh config and key (strict host keys, as always)."""
    os.environ.update({"FLEETSCHED_KNOWN_HOSTS": fleet["known_hosts"],
                       "FLEETSCHED_SSH_CONFIG": fleet["ssh_config"],
                       "FLEETSCHED_SSH_IDENTITY_FILE": fleet["identity"]})
    lines = [f"{name} ansible_host={address} ansible_port={port} ansible_user={fleet['user']}"
             for name, address, port in fleet["hosts"]]
    inv = _tmp / "fleet-ssh.ini"
    inv.write_text("[fleet]\n" + "\n".join(lines) + "\n")
    upgrade(ENV["FLEETSCHED_DATABASE_URL"])
    subprocess.run(["fleetsched", "hosts", "import", str(inv)], check=True, capture_output=True)


def _start_worker(log: Path) -> subprocess.Popen:
    """``fleetsched worker`` with its defaults; returns once it is in the workers hash (its
    first child is ready then, so no measured task pays for the node's start)."""
    from scheduler.queue.keys import Keys

    with log.open("ab") as out:
        proc = subprocess.Popen(["fleetsched", "worker"], stdout=out, stderr=out,
                                start_new_session=True)
    client = connect(load_settings())
    deadline = time.time() + 60
    while not client.hlen(Keys().workers):
        if proc.poll() is not None or time.time() > deadline:
            raise SystemExit(f"error: fleetsched worker did not start (see {log})")
        time.sleep(0.05)
    return proc


def _one_task(engine: sa.Engine, command: str, concurrency: int, n: int) -> dict[str, Any]:
    """Submit one task on every host and time it: to the last job final in SQL (polled every
    50 ms), to the last ack (the jobs' ``finished_at``, Redis time), and to the command's exit."""
    with engine.connect() as c:
        before = c.execute(sa.text("SELECT coalesce(max(id), 0) FROM tasks")).scalar_one()
    count = sa.text("SELECT count(*) FROM jobs WHERE task_id > :t AND state IN "
                    "('succeeded', 'failed', 'lost', 'cancelled')")
    start = time.time()
    proc = subprocess.Popen(
        ["fleetsched", "submit", "command", "-t", "all", "-p", f"cmd={command}",
         "--max-concurrency", str(concurrency), "--executor-option", "allow_agent=false",
         "--executor-option", "look_for_keys=false", "--yes", "--wait"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    in_sql = None
    while in_sql is None:
        with engine.connect() as c:
            if c.execute(count, {"t": before}).scalar_one() >= n:
                in_sql = time.time()
        if proc.poll() is not None and proc.returncode != 0:
            raise SystemExit(f"error: fleetsched submit exited {proc.returncode}: "
                             f"{proc.stderr.read().strip().splitlines()[-1:]}")
        if time.time() - start > 600:
            raise SystemExit("error: the task was not in SQL after 600 s")
        time.sleep(SQL_POLL_S)
    proc.wait(60)
    exited = time.time()
    with engine.connect() as c:
        rows = c.execute(sa.select(Job.state, Job.finished_at, Job.error)
                         .where(Job.task_id > before)).all()
    last_ack = max(r.finished_at for r in rows if r.finished_at is not None)
    return {"hosts": n, "ok": sum(1 for r in rows if r.state == "succeeded"),
            "seconds": in_sql - start, "ack_s": last_ack.timestamp() - start,
            "cli_s": exited - start, "cli_exit": proc.returncode,
            "errors": sorted({r.error for r in rows if r.error})[:3]}


def fan_out(fleet: dict[str, Any], command: str, concurrency: int, log: Path
            ) -> dict[str, Any]:
    """W5: a first task on an idle node, then the same task again right after it on the same
    node (its connection pool holds the first task's connections)."""
    _import_fleet(fleet)
    engine = make_engine(ENV["FLEETSCHED_DATABASE_URL"])
    worker = _start_worker(log)
    try:
        first = _one_task(engine, command, concurrency, len(fleet["hosts"]))
        return {"first": first,
                "second": _one_task(engine, command, concurrency, len(fleet["hosts"]))}
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait()
        engine.dispose()
