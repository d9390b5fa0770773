"""A node runs jobs on real sshd hosts; results land in the events stream and, through the
node's own recorder process, in SQL (which then trims the stream: the test reads SQL). Secrets
resolved on the worker never leave it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from scheduler.queue.client import Queue
from scheduler.record.migrate import upgrade
from tests.fleet import SshFleet, current_user
from tests.worker_support import (
    KEYS,
    WorkerProcess,
    dump,
    events,
    submit,
    wait_until,
    worker_args,
)

pytestmark = pytest.mark.sshd

SECRET = "s3cr3t-Token-9f2c"


def test_jobs_run_over_ssh_and_their_output_exit_code_and_duration_reach_events_and_sql(
        redis_client, redis_url: str, ssh_fleet: SshFleet, tmp_path: Path) -> None:
    # Given a migrated SQL database and hosts known to Redis as the inventory writes them
    db_url = f"sqlite:///{tmp_path / 'record.db'}"
    upgrade(db_url)
    hosts = ssh_fleet.hosts[:2]
    for h in hosts:
        redis_client.hset(f"{{fs}}:host:{h.name}", mapping={
            "address": h.address, "port": h.port, "user": current_user(), "vars": "{}"})
    options = ssh_fleet.ssh_options()
    ok = submit(redis_client, "31", [h.name for h in hosts], executor="ssh", options=options,
                params={"cmd": ["sh", "-c", 'echo "hello from $1 token=$2"; sleep 0.2',
                                "sh", "{host.name}", "@env:FS_TEST_TOKEN"]},
                write_hosts=False, timeout_ms=30_000)
    bad = submit(redis_client, "32", [hosts[0].name], executor="ssh", options=options,
                 params={"cmd": ["sh", "-c", "echo failing >&2; exit 3"]}, write_hosts=False,
                 idempotent=False, max_attempts=1)
    # When a node with its recorder serves them
    env = {"FLEETSCHED_KNOWN_HOSTS": str(ssh_fleet.known_hosts),
           "FLEETSCHED_SSH_CONFIG": str(ssh_fleet.ssh_config),
           "FLEETSCHED_DATABASE_URL": db_url, "FS_TEST_TOKEN": SECRET}
    args = [a for a in worker_args("node-ssh", slots=4, processes=1) if a != "--no-recorder"]
    w = WorkerProcess(redis_url, tmp_path, args, env=env).start()
    q = Queue(redis_client, KEYS)

    def ended() -> bool:  # a succeeded job's hash is deleted; a failed one stays as "failed"
        return (all(not q.job_state(j) for j in ok)
                and q.job_state(bad[0]).get("state") == "failed")

    engine = sa.create_engine(db_url)

    def recorded() -> dict[str, tuple[str, dict]]:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("select job_id, kind, data from events "
                                        "where kind in ('ack', 'fail')")).all()
        return {r.job_id: (r.kind, json.loads(r.data) if isinstance(r.data, str) else r.data)
                for r in rows}

    try:
        wait_until(ended, 30, "the ssh jobs to end", lambda: w.tail() + dump(redis_client), [w])
        # Then the audit record (events stream -> the node's recorder process -> SQL) holds each
        # host's output, the exit code and the duration
        by_job = wait_until(lambda: len(recorded()) == 3 and recorded(), 15,
                            "the results in SQL", w.tail, [w])
        for job, h in zip(ok, hosts):
            kind, data = by_job[job]
            assert kind == "ack" and data["exit_code"] == 0 and data["duration_ms"] >= 200
            assert data["output"][0]["stdout_head"] == f"hello from {h.name} token=***\n"
        kind, data = by_job[bad[0]]
        assert kind == "fail" and data["exit_code"] == 3 and "exit 3" in data["error"]
        assert "failing" in data["output"][0]["stderr_head"]
        # The secret is nowhere: not in what is left of the stream, not in SQL
        assert SECRET not in json.dumps(events(redis_client))
        with engine.connect() as conn:
            assert SECRET not in json.dumps([list(map(str, r)) for r in conn.execute(
                sa.text("select * from events")).all()])
    finally:
        w.stop()
        engine.dispose()


def logins(host) -> int:
    """Logins this host's sshd accepted so far (its log is the fleet's, shared by tests)."""
    return host.log_path.read_text().count("Accepted publickey")


def test_a_hosts_next_job_goes_to_the_child_holding_its_connection_so_no_new_login(
        redis_client, redis_url: str, ssh_fleet: SshFleet, tmp_path: Path) -> None:
    # Given a node of two children with two slots each, and three hosts known to Redis
    hosts = ssh_fleet.hosts[:3]
    for h in hosts:
        redis_client.hset(f"{{fs}}:host:{h.name}", mapping={
            "address": h.address, "port": h.port, "user": current_user(), "vars": "{}"})
    env = {"FLEETSCHED_KNOWN_HOSTS": str(ssh_fleet.known_hosts),
           "FLEETSCHED_SSH_CONFIG": str(ssh_fleet.ssh_config)}
    w = WorkerProcess(redis_url, tmp_path, worker_args("node-affinity", slots=4, processes=2),
                      env=env)
    q = Queue(redis_client, KEYS)
    options = ssh_fleet.ssh_options()
    before = [logins(h) for h in hosts]
    # When a first task on the three hosts fills the first child (two jobs) and puts the third
    # host's job on the second child
    first = submit(redis_client, "41", [h.name for h in hosts], executor="ssh", options=options,
                   write_hosts=False)
    w.start()
    try:
        wait_until(lambda: all(not q.job_state(j) for j in first), 30, "the first task",
                   lambda: w.tail() + dump(redis_client), [w])
        assert [logins(h) - b for h, b in zip(hosts, before)] == [1, 1, 1]
        # And a second task runs on the third host alone, while the first child is free
        second = submit(redis_client, "42", [hosts[2].name], executor="ssh", options=options,
                        write_hosts=False)
        wait_until(lambda: all(not q.job_state(j) for j in second), 30, "the second task",
                   lambda: w.tail() + dump(redis_client), [w])
        # Then it ran on the second child, over the connection the first task left idle there
        assert logins(hosts[2]) - before[2] == 1, w.tail()
    finally:
        w.stop()
