"""On real sshd hosts, a failing change with retries stops after ``--max-failures`` hosts failed
an attempt, not after every host was tried; the abort says which hosts and which threshold, and
the report lists every host that failed an attempt with its attempts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.record.migrate import upgrade
from tests.fleet import SshFleet, current_user
from tests.submit_support import Cli, inventory, sql_rows
from tests.worker_support import WorkerProcess, wait_until, worker_args

pytestmark = pytest.mark.sshd


@pytest.mark.parametrize("count", ["attempts", "final"])
def test_a_failing_change_stops_after_the_threshold(
        tmp_path: Path, redis_url: str, ssh_fleet: SshFleet, count: str) -> None:
    # Given 4 real hosts and a node with its recorder
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    lines = [f"{h.name} ansible_host={h.address} ansible_port={h.port} "
             f"ansible_user={current_user()}" for h in ssh_fleet]
    inventory(cli, tmp_path, "[web]\n" + "\n".join(lines) + "\n")
    env = {"FLEETSCHED_KNOWN_HOSTS": str(ssh_fleet.known_hosts),
           "FLEETSCHED_SSH_CONFIG": str(ssh_fleet.ssh_config), "FLEETSCHED_DATABASE_URL": db}
    args = [a for a in worker_args("node-1", slots=4, processes=1) if a != "--no-recorder"]
    worker = WorkerProcess(redis_url, tmp_path, args, env=env).start()
    # When a change that fails everywhere goes out one host at a time, 3 attempts each, and
    # the task may lose 1 host
    try:
        task = cli.submit("command", "-t", "group:web", "-p", "cmd=false", "--executor", "ssh",
                          "--executor-option", f"identity_file={ssh_fleet.identity}",
                          "--executor-option", "allow_agent=false",
                          "--executor-option", "look_for_keys=false",
                          "--max-concurrency", "1", "--max-failures", "1", "--retries", "2",
                          "--backoff", "0", "--count-failures", count)
        code, _, err = cli("tasks", "wait", str(task), "--timeout", "60s")
        assert code == 3, err
        wait_until(lambda: not sql_rows(db, "SELECT id FROM jobs WHERE task_id = :t AND state "
                                            "IN ('pending', 'running', 'accepted')", t=task),
                   30, "the record to catch up", worker.tail, [worker])
    finally:
        worker.stop()
    claims = sql_rows(db, "SELECT job_id FROM events WHERE task_id = :t AND kind = 'claim'",
                      t=str(task))
    [abort] = sql_rows(db, "SELECT data FROM events WHERE task_id = :t AND kind = 'abort'",
                       t=str(task))
    reason = json.loads(abort.data)["error"] if isinstance(abort.data, str) else abort.data["error"]
    shown = json.loads(cli.ok("tasks", "show", str(task), "-o", "json"))
    report = json.loads(cli.ok("report", "--task", str(task), "-o", "json"))
    failed = [j for j in report["jobs"] if j["job"] in report["failures"]]
    if count == "attempts":
        # Then the first host's first failure stops it: 1 host tried once, 3 never started
        assert len(claims) == 1
        assert reason.startswith("1 hosts failed an attempt (web-"), reason
        assert reason.endswith(", the limit is 1; pending jobs are cancelled, running ones finish")
        assert (shown["state"], shown["failed"], shown["cancelled"]) == ("aborted", 1, 3)
        assert [(j["state"], j["attempts"]) for j in failed] == [("failed", 1)]
    else:
        # Then (the old way) the first host is tried 3 times before the task stops
        assert len({c.job_id for c in claims}) >= 1 and len(claims) >= 3
        assert reason.startswith("1 jobs failed, the limit is 1")
        assert shown["state"] == "aborted"
    assert shown["policy"]["max_failures"] == (
        "1 hosts failing any attempt" if count == "attempts" else "1 final failures")
