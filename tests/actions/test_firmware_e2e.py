"""The ``firmware`` action through the whole pipeline on real sshd hosts, inside a service window.

A one-off window open now is made with the library ``fleetsched windows add/assign`` uses
(``scheduler.windows.store``), assigned to two hosts; ``fleetsched submit firmware --in-window``
queues the task; a real worker node (``python -m scheduler worker``, ssh executor, its own recorder
thread) runs it; the results are read from SQL. No reboot (the reboot path is covered in
tests/actions/test_actions_ssh_files.py).
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from scheduler.record.migrate import upgrade
from scheduler.windows.store import WindowSpec, add_window, assign_window
from tests.fleet import SshFleet, current_user
from tests.submit_support import KEYS, Cli, inventory, sql_rows
from tests.worker_support import WorkerProcess, wait_until, worker_args

pytestmark = pytest.mark.sshd

HOSTS = ("web-01", "web-02")
UPGRADE = ('cp "$1" "$2/installed.bin" && echo "$3" > "$2/version" && '
           'echo upgraded >> "$2/upgrades"')


def _aware(value: object) -> datetime:
    at = value if isinstance(value, datetime) else datetime.fromisoformat(str(value))
    return at.replace(tzinfo=timezone.utc) if at.tzinfo is None else at.astimezone(timezone.utc)


def test_a_firmware_task_in_a_window_open_now_upgrades_each_host_and_records_it_inside_the_window(
        tmp_path: Path, redis_url: str, ssh_fleet: SshFleet) -> None:
    # Given two sshd hosts in the inventory, each a pretend device at version 4.1
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    hosts = [ssh_fleet[name] for name in HOSTS]
    inventory(cli, tmp_path, "[web]\n" + "\n".join(
        f"{h.name} ansible_host={h.address} ansible_port={h.port} "
        f"ansible_user={current_user()} root={h.root}" for h in hosts) + "\n")
    devices = [h.root / "fw-e2e" for h in hosts]
    for dev in devices:
        dev.mkdir(exist_ok=True)
        for stale in ("installed.bin", "upgrades"):
            (dev / stale).unlink(missing_ok=True)
        (dev / "version").write_text("4.1\n")
    image = tmp_path / "fw-4.2.bin"
    image.write_bytes(os.urandom(200_000))
    # And a one-off window that opened a minute ago and closes in 30 minutes, on both hosts
    opened = datetime.now(timezone.utc).replace(microsecond=0) - timedelta(minutes=1)
    closes = opened + timedelta(minutes=31)
    engine = sa.create_engine(db)
    try:
        _summary, warning = add_window(
            engine, lambda: redis.Redis.from_url(redis_url),
            WindowSpec(name="fw-now", start=opened.isoformat(), end=closes.isoformat()),
            operator="tester", keys=KEYS)
        assert warning is None
        assert assign_window(engine, "fw-now", hosts=list(HOSTS), operator="tester") == 2
    finally:
        engine.dispose()
    # When a firmware task is submitted in windows and a worker node runs it
    task = cli.submit(
        "firmware", "-t", ",".join(HOSTS), "--in-window",
        "-p", f"image={image}", "-p", f"sha256={hashlib.sha256(image.read_bytes()).hexdigest()}",
        "-p", f"upgrade_cmd=sh -c '{UPGRADE}' sh {{image}} {{host.vars.root}}/fw-e2e 4.2",
        "-p", "version_cmd=cat {host.vars.root}/fw-e2e/version", "-p", "expected_version=4.2",
        "--executor-option", f"identity_file={ssh_fleet.identity}",
        "--executor-option", "allow_agent=false", "--executor-option", "look_for_keys=false")
    env = {"FLEETSCHED_KNOWN_HOSTS": str(ssh_fleet.known_hosts),
           "FLEETSCHED_SSH_CONFIG": str(ssh_fleet.ssh_config), "FLEETSCHED_DATABASE_URL": db}
    args = [a for a in worker_args("fw-1", slots=4, processes=1) if a != "--no-recorder"]
    worker = WorkerProcess(redis_url, tmp_path, args, env=env)
    worker.start()
    try:
        def recorded() -> bool:
            rows = sql_rows(db, "SELECT state FROM jobs WHERE task_id = :t", t=task)
            return len(rows) == 2 and all(r.state in ("succeeded", "failed", "lost", "cancelled")
                                          for r in rows)

        wait_until(recorded, 60, f"task {task} in SQL", worker.tail, [worker])
    finally:
        worker.stop()
    # Then the task and both jobs succeeded, with the exit code and each step's output
    [t] = sql_rows(db, "SELECT state, succeeded FROM tasks WHERE id = :t", t=task)
    assert (t.state, t.succeeded) == ("succeeded", 2), worker.tail()
    jobs = sql_rows(db, 'SELECT host, state, exit_code, output_tail, error, "window" FROM jobs '
                        "WHERE task_id = :t ORDER BY host", t=task)
    assert [j.host for j in jobs] == list(HOSTS)
    for j in jobs:
        assert (j.state, j.exit_code, j.error, j.window) == ("succeeded", 0, None, "fw-now"), j
        steps = json.loads(j.output_tail)  # each remote step: command, exit code, output head
        assert steps[0]["stdout_head"] == "4.1\n" and steps[-1]["stdout_head"] == "4.2\n", steps
        [upgraded] = [s for s in steps if "installed.bin" in s["command"]]
        assert upgraded["exit_code"] == 0 and "fw-e2e 4.2" in upgraded["command"], steps
    # And the upgrade ran once on each host: the image installed, the device reports 4.2
    for h, dev in zip(hosts, devices):
        assert (dev / "installed.bin").read_bytes() == image.read_bytes()
        assert h.sh("cat fw-e2e/version fw-e2e/upgrades").stdout == "4.2\nupgraded\n"
    # And every claim in the audit record happened inside the window
    claims = sql_rows(db, "SELECT job_id, ts FROM events WHERE kind = 'claim' AND task_id = :t",
                      t=str(task))
    assert sorted(c.job_id for c in claims) == [f"{task}.0", f"{task}.1"]
    for c in claims:
        assert opened <= _aware(c.ts) < closes, (c.ts, opened, closes)
