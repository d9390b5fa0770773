"""Two tasks never run on the same host at once (one job per host at a time, across tasks):
on real sshd hosts, a second task's job waits for its host without counting an attempt, and
the history in SQL shows no overlap; a task that allows overlap runs alongside."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from scheduler.record.migrate import upgrade
from tests.fleet import SshFleet, current_user
from tests.submit_support import Cli, inventory, sql_rows
from tests.worker_support import WorkerProcess, wait_until, worker_args

pytestmark = pytest.mark.sshd


def _intervals(db: str, tasks: list[int]) -> dict[str, list[tuple[int, int, int]]]:
    """host -> (start pos, end pos, task) of every run, from the claim and ack events."""
    rows = sql_rows(db, "SELECT id, kind, task_id, job_id, host FROM events WHERE kind IN "
                        "('claim', 'ack', 'fail', 'retry', 'release', 'lost') ORDER BY id")
    started: dict[str, tuple[int, int]] = {}
    out: dict[str, list[tuple[int, int, int]]] = defaultdict(list)

    def pos(event_id: str) -> int:
        ms, _, seq = event_id.partition("-")
        return int(ms) * 1_000_000 + int(seq)

    for r in rows:
        if int(r.task_id) not in tasks:
            continue
        if r.kind == "claim":
            started[r.job_id] = (pos(r.id), int(r.task_id))
        elif r.job_id in started:
            begin, task = started.pop(r.job_id)
            out[r.host].append((begin, pos(r.id), task))
    return out


def test_two_tasks_on_the_same_hosts_never_overlap_and_waiting_costs_no_attempt(
        tmp_path: Path, redis_url: str, ssh_fleet: SshFleet) -> None:
    # Given 2 real hosts and a node with 8 slots (room to run both tasks at once)
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    hosts = ssh_fleet.hosts[:2]
    lines = [f"{h.name} ansible_host={h.address} ansible_port={h.port} "
             f"ansible_user={current_user()}" for h in hosts]
    inventory(cli, tmp_path, "[web]\n" + "\n".join(lines) + "\n")
    ssh = ["--executor", "ssh", "--executor-option", f"identity_file={ssh_fleet.identity}",
           "--executor-option", "allow_agent=false", "--executor-option", "look_for_keys=false"]
    env = {"FLEETSCHED_KNOWN_HOSTS": str(ssh_fleet.known_hosts),
           "FLEETSCHED_SSH_CONFIG": str(ssh_fleet.ssh_config), "FLEETSCHED_DATABASE_URL": db}
    args = [a for a in worker_args("node-x", slots=8, processes=1) if a != "--no-recorder"]
    # When a firmware-like change and a config push are submitted to the same hosts together,
    # and a read-only check that allows overlap
    first = cli.submit("command", "-t", "group:web", "-p", "cmd=sleep 1", *ssh)
    second = cli.submit("command", "-t", "group:web", "-p", "cmd=sleep 1", *ssh)
    check = cli.submit("command", "-t", "group:web", "-p", "cmd=sleep 1", "--allow-overlap", *ssh)
    worker = WorkerProcess(redis_url, tmp_path, args, env=env).start()
    try:
        for task in (first, second, check):
            code, _, err = cli("tasks", "wait", str(task), "--timeout", "60s")
            assert code == 0, err + worker.tail()
        wait_until(lambda: len(sql_rows(db, "SELECT id FROM jobs WHERE state = 'succeeded'")) == 6,
                   30, "the record to catch up", worker.tail, [worker])
    finally:
        worker.stop()
    # Then on each host the two exclusive tasks' runs never overlap ...
    runs = _intervals(db, [first, second, check])
    for host in (h.name for h in hosts):
        exclusive = sorted(r for r in runs[host] if r[2] in (first, second))
        assert len(exclusive) == 2
        assert exclusive[0][1] <= exclusive[1][0], f"{host}: {exclusive}"
        # ... while the check that allows overlap ran alongside one of them
        [(begin, end, _)] = [r for r in runs[host] if r[2] == check]
        assert any(b < end and begin < e for b, e, _ in exclusive), f"{host}: {runs[host]}"
    # And the job that waited for its host did so without an attempt: one claim each
    attempts = sql_rows(db, "SELECT id, attempts FROM jobs WHERE task_id IN (:a, :b)",
                        a=first, b=second)
    assert {a.attempts for a in attempts} == {1}
    waits = sql_rows(db, "SELECT data FROM events WHERE kind = 'park'")
    details = [json.loads(w.data)["detail"] if isinstance(w.data, str) else w.data["detail"]
               for w in waits]
    assert len(details) >= 2 and all("host_busy" in d for d in details), details
    shown = json.loads(cli.ok("tasks", "show", str(check), "-o", "json"))
    assert shown["policy"]["hosts"] == "may overlap"
