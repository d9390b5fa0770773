"""A group limit holds across tasks: with `groups limit db --max-busy 1`, three tasks on the
three hosts of group db never run two jobs there at once (checked from the SQL history), the
jobs held back wait without an attempt, and removing the limit lets them overlap again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scheduler.record.migrate import upgrade
from tests.fleet import SshFleet, current_user
from tests.submit_support import Cli, inventory, max_overlap, sql_rows
from tests.worker_support import WorkerProcess, wait_until, worker_args

pytestmark = pytest.mark.sshd


def test_a_group_limit_of_one_holds_across_three_tasks(
        tmp_path: Path, redis_url: str, ssh_fleet: SshFleet) -> None:
    # Given the three hosts of a database cluster, group db, limited to 1 job at a time
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    hosts = ssh_fleet.hosts[:3]
    lines = [f"{h.name} ansible_host={h.address} ansible_port={h.port} "
             f"ansible_user={current_user()}" for h in hosts]
    inventory(cli, tmp_path, "[db]\n" + "\n".join(lines) + "\n")
    out = cli("groups", "limit", "db", "--max-busy", "1")
    assert out[0] == 0, out
    ssh = ["--executor", "ssh", "--executor-option", f"identity_file={ssh_fleet.identity}",
           "--executor-option", "allow_agent=false", "--executor-option", "look_for_keys=false"]
    # When three tasks (overlap allowed per host, so only the group limit holds them back) go
    # to all three hosts at once, on a node with room for all nine jobs
    tasks = [cli.submit("command", "-t", "group:db", "-p", "cmd=sleep 0.3", "--allow-overlap",
                        *ssh) for _ in range(3)]
    env = {"FLEETSCHED_KNOWN_HOSTS": str(ssh_fleet.known_hosts),
           "FLEETSCHED_SSH_CONFIG": str(ssh_fleet.ssh_config), "FLEETSCHED_DATABASE_URL": db}
    args = [a for a in worker_args("node-g", slots=9, processes=1) if a != "--no-recorder"]
    worker = WorkerProcess(redis_url, tmp_path, args, env=env).start()
    try:
        for task in tasks:
            code, _, err = cli("tasks", "wait", str(task), "--timeout", "60s")
            assert code == 0, err + worker.tail()
        wait_until(lambda: len(sql_rows(db, "SELECT id FROM jobs WHERE state = 'succeeded'")) == 9,
                   30, "the record to catch up", worker.tail, [worker])
        # Then never two at once in the group, each job claimed once, and the waits say why
        assert max_overlap(db, *tasks) == 1
        assert {r.attempts for r in sql_rows(db, "SELECT attempts FROM jobs")} == {1}
        waits = [json.loads(r.data) if isinstance(r.data, str) else r.data
                 for r in sql_rows(db, "SELECT data FROM events WHERE kind = 'park'")]
        assert waits and all(w["detail"] == {"group_full": "db"} for w in waits)
        listed = json.loads(cli.ok("groups", "list", "-o", "json"))
        assert [g["max_busy"] for g in listed if g["name"] == "db"] == ["1"]
        # And once the limit is removed, the same three tasks overlap again
        assert cli("groups", "limit", "db", "--remove")[0] == 0
        again = [cli.submit("command", "-t", "group:db", "-p", "cmd=sleep 0.5",
                            "--allow-overlap", *ssh) for _ in range(3)]
        for task in again:
            code, _, err = cli("tasks", "wait", str(task), "--timeout", "60s")
            assert code == 0, err
        wait_until(lambda: len(sql_rows(db, "SELECT id FROM jobs WHERE state = 'succeeded'")) == 18,
                   30, "the record to catch up", worker.tail, [worker])
        assert max_overlap(db, *again) > 1
    finally:
        worker.stop()


def test_bad_limits_are_refused_in_one_line(tmp_path: Path, redis_url: str) -> None:
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, "[db]\ndb-1\ndb-2\n")
    for args, code in ((["db"], 2), (["db", "--max-busy", "0"], 2),
                       (["db", "--max-busy", "x"], 2), (["db", "--max-busy", "1", "--remove"], 2),
                       (["nope", "--max-busy", "1"], 4)):
        got, out, err = cli("groups", "limit", *args)
        assert got == code and out == "" and err.startswith("error: "), (args, err)
