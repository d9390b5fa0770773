"""A node runs jobs on real sshd hosts; results land in the events stream and, through the
node's own recorder thread, in SQL. Secrets resolved on the worker never leave it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from scheduler.db.migrate import upgrade
from tests.fleet import SshFleet, current_user
from tests.worker_support import (
    WorkerProcess,
    dump,
    events,
    final_outcomes,
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
    try:
        wait_until(lambda: "open" not in final_outcomes(redis_client, ok + bad).values(), 30,
                   "the ssh jobs to end", lambda: w.tail() + dump(redis_client), [w])
        # Then the events carry each host's output, the exit code and the duration
        acks = {e["job"]: e for e in events(redis_client, ("ack",))}
        for job, h in zip(ok, hosts):
            out = json.loads(acks[job]["output"])
            assert out[0]["stdout_head"] == f"hello from {h.name} token=***\n"
            assert acks[job]["exit_code"] == "0" and int(acks[job]["duration_ms"]) >= 200
        (fail,) = events(redis_client, ("fail",))
        assert fail["exit_code"] == "3" and "exit 3" in fail["error"]
        assert "failing" in json.loads(fail["output"])[0]["stderr_head"]
        # And the recorder thread copied them into SQL
        engine = sa.create_engine(db_url)

        def recorded() -> list:
            with engine.connect() as conn:
                return conn.execute(sa.text(
                    "select job_id, kind, data from events where kind in ('ack', 'fail') "
                    "order by job_id")).all()

        rows = wait_until(lambda: len(recorded()) == 3 and recorded(), 15,
                          "the results in SQL", w.tail)
        by_job = {r.job_id: (r.kind, json.loads(r.data) if isinstance(r.data, str) else r.data)
                  for r in rows}
        assert by_job["32.0"][0] == "fail" and by_job["32.0"][1]["exit_code"] == 3
        assert by_job["31.0"][0] == "ack" and by_job["31.0"][1]["exit_code"] == 0
        # The secret is nowhere: not in events, not in SQL
        assert SECRET not in json.dumps(events(redis_client))
        with engine.connect() as conn:
            assert SECRET not in json.dumps([list(map(str, r)) for r in conn.execute(
                sa.text("select * from events")).all()])
        engine.dispose()
    finally:
        w.stop()
