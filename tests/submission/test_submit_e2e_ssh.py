"""Every action through the whole pipeline on real sshd hosts: ``fleetsched submit`` -> a real
worker node (``python -m scheduler worker``, ssh executor, its own recorder process) -> SQL. Then the
secrets canary: a secret planted with ``@env`` is found nowhere, not in Redis, not in SQL, not
in the worker's debug log, not in any CLI output.

The firmware action needs service windows (``--in-window``), covered where windows are built.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import redis
import sqlalchemy as sa

from scheduler.queue.client import Queue
from scheduler.record.migrate import upgrade
from tests.fleet import SshFleet, current_user
from tests.submit_support import KEYS, Cli, inventory, sql_rows
from tests.worker_support import WorkerProcess, wait_until, worker_args

pytestmark = pytest.mark.sshd

CANARY = "cAnArY-7e1d-secret-0b39"
FAKE_ANSIBLE = """#!{python}
import json, os, sys
with open(os.environ["FAKE_ANSIBLE_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
print("PLAY RECAP ok=1")
"""


@pytest.fixture
def pipeline(tmp_path: Path, redis_url: str, ssh_fleet: SshFleet):
    """(cli, worker, ssh options): a database with the fleet imported, and a node to start."""
    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    lines = [f"{h.name} ansible_host={h.address} ansible_port={h.port} "
             f"ansible_user={current_user()} root={h.root}" for h in ssh_fleet]
    inventory(cli, tmp_path, "[web]\n" + "\n".join(lines) + "\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "ansible-playbook"
    fake.write_text(FAKE_ANSIBLE.format(python=sys.executable))
    fake.chmod(0o755)
    import os

    env = {"FLEETSCHED_KNOWN_HOSTS": str(ssh_fleet.known_hosts),
           "FLEETSCHED_SSH_CONFIG": str(ssh_fleet.ssh_config), "FLEETSCHED_DATABASE_URL": db,
           "FLEETSCHED_LOG_LEVEL": "debug", "FS_CANARY": CANARY,
           "FAKE_ANSIBLE_LOG": str(tmp_path / "ansible.log"),
           "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    args = [a for a in worker_args("e2e-1", slots=8, processes=1) if a != "--no-recorder"]
    worker = WorkerProcess(redis_url, tmp_path, args, env=env)
    ssh = ["--executor-option", f"identity_file={ssh_fleet.identity}",
           "--executor-option", "allow_agent=false", "--executor-option", "look_for_keys=false"]
    yield cli, worker, ssh
    worker.stop()


def recorded(cli: Cli, task: int, n: int) -> bool:
    """The node's recorder has every job of the task in a final state in SQL."""
    rows = sql_rows(cli.database_url, "SELECT state FROM jobs WHERE task_id = :t", t=task)
    return len(rows) == n and all(r.state in ("succeeded", "failed", "lost", "cancelled")
                                  for r in rows)


def test_command_script_copy_key_rollover_and_ansible_run_end_to_end(
        pipeline, ssh_fleet: SshFleet, tmp_path: Path) -> None:
    cli, worker, ssh = pipeline
    script = tmp_path / "hello.sh"
    script.write_text('#!/bin/sh\necho "script on $1" > "$2/script.out"\n')
    conf = tmp_path / "app.conf"
    conf.write_text("listen 8080\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    playbook = tmp_path / "site.yml"
    playbook.write_text("- hosts: all\n")
    # When five tasks are submitted: three on all four hosts, two on fewer
    tasks_and_sizes = [
        (cli.submit("command", "-t", "group:web", "-p",
                    "cmd=sh -c 'echo \"hello $1\" > \"$2/cmd.out\"' sh {host.name} {host.vars.root}",
                    *ssh), 4),
        (cli.submit("script", "-t", "group:web", "-p", f"script={script}",
                    "-p", "args={host.name} {host.vars.root}", *ssh), 4),
        (cli.submit("copy", "-t", "group:web", "-p", f"src={conf}",
                    "-p", f"dest={shared}/app.conf", "-p", "mode=0640", *ssh), 4),
        (cli.submit("key-rollover", "-t", "web-01,web-02", "-p", "pre_check=true",
                    "-p", "rollover=sh -c 'cat > \"$1/key\"' sh {host.vars.root}",
                    "-p", "post_check=test -s {host.vars.root}/key",
                    "-p", "secret=@env:FS_CANARY", *ssh), 2),
        (cli.submit("ansible", "-t", "web-03", "-p", f"playbook={playbook}",
                    "-p", "extra_vars=release=4.2"), 1),
    ]
    worker.start()
    # Then every job succeeds and the node's recorder has it all in SQL
    for task, n in tasks_and_sizes:
        wait_until(lambda: recorded(cli, task, n), 60, f"task {task} in SQL", worker.tail, [worker])
        states = sql_rows(cli.database_url, "SELECT state, succeeded FROM tasks WHERE id = :t", t=task)
        assert (states[0].state, states[0].succeeded) == ("succeeded", n), worker.tail()
    # And the hosts show the work
    for h in ssh_fleet:
        assert (h.root / "cmd.out").read_text() == f"hello {h.name}\n"
        assert (h.root / "script.out").read_text() == f"script on {h.name}\n"
    assert (shared / "app.conf").read_text() == "listen 8080\n"
    assert oct((shared / "app.conf").stat().st_mode & 0o777) == "0o640"
    assert [ (ssh_fleet[n].root / "key").read_text() for n in ("web-01", "web-02")] == [CANARY] * 2
    argv = json.loads((tmp_path / "ansible.log").read_text().splitlines()[0])
    assert "web-03" in argv and str(playbook) in argv
    # And each job's claim and ack are in the audit record with the worker and the host
    acks = sql_rows(cli.database_url, "SELECT job_id, host, worker FROM events WHERE kind = 'ack'")
    assert len(acks) == 15 and {a.worker for a in acks} == {"e2e-1"}


def redis_text(client: redis.Redis) -> str:
    """Every key and every value in Redis, as text, whatever its type."""
    out = []
    for key in client.scan_iter("*"):
        kind = client.type(key)
        value: object = {
            "string": lambda: client.get(key),
            "hash": lambda: client.hgetall(key),
            "zset": lambda: client.zrange(key, 0, -1, withscores=True),
            "list": lambda: client.lrange(key, 0, -1),
            "set": lambda: sorted(client.smembers(key)),
            "stream": lambda: client.xrange(key),
        }[kind]()
        out.append(f"{key} {kind} {value!r}")
    return "\n".join(out)


def sql_text(url: str) -> str:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            names = sa.inspect(conn).get_table_names()
            return "\n".join(repr(conn.execute(sa.text(f"SELECT * FROM {t}")).all()) for t in names)
    finally:
        engine.dispose()


def test_a_canary_secret_is_nowhere_after_a_failing_and_a_succeeding_job(
        pipeline, redis_client: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    cli, worker, ssh = pipeline
    monkeypatch.setenv("FS_CANARY", CANARY)  # the CLI could see it too: it must not use it
    outputs = []
    # Given a succeeding and a failing job that both echo the secret, and feed it on stdin
    good = cli.submit("command", "-t", "web-01", "-p",
                      "cmd=sh -c 'echo token=$1; cat; exit 0' sh @env:FS_CANARY",
                      "-p", "stdin=@env:FS_CANARY", *ssh)
    bad = cli.submit("command", "-t", "web-02", "-p",
                     "cmd=sh -c 'echo token=$1 >&2; cat >&2; exit 3' sh @env:FS_CANARY",
                     "-p", "stdin=@env:FS_CANARY", "--retries", "0", *ssh)
    # When the worker (debug logging on) runs them and its recorder copies the events to SQL
    worker.start()
    for task in (good, bad):
        wait_until(lambda: recorded(cli, task, 1), 60, f"task {task} in SQL", worker.tail, [worker])
    live = Queue(redis_client, KEYS)
    assert (live.task_state(str(good))["succeeded"], live.task_state(str(bad))["failed"]) == ("1", "1")
    # And the operator looks at everything through the CLI
    for args in (["tasks", "list", "-o", "json"], ["tasks", "show", str(good), "-o", "json"],
                 ["tasks", "show", str(bad)], ["tasks", "show", str(bad), "-o", "json"],
                 ["submit", "command", "-t", "web-01", "-p", "cmd=echo @env:FS_CANARY",
                  "--dry-run", "-o", "json"]):
        code, out, err = cli(*args)
        assert code == 0, err
        outputs.append(out + err)
    # Then the outputs did reach the record, masked
    (fail,) = sql_rows(cli.database_url, "SELECT output_tail, error FROM jobs WHERE task_id = :t", t=bad)
    assert "token=***" in fail.output_tail and "exit 3" in fail.error
    # And the canary is nowhere: Redis (every key, the stream), SQL (every table), the worker's
    # debug log, the CLI's output
    worker.stop()
    log = worker.log.read_text(errors="replace")
    assert "DEBUG" in log or "debug" in log.lower()
    for where, text in (("redis", redis_text(redis_client)), ("sql", sql_text(cli.database_url)),
                        ("worker log", log), ("cli", "\n".join(outputs))):
        assert CANARY not in text, f"the canary leaked into {where}"
        assert CANARY[:12] not in text, f"part of the canary leaked into {where}"


def test_a_job_killed_by_a_signal_shows_the_signal_where_exit_codes_are_shown(pipeline) -> None:
    cli, worker, ssh = pipeline
    # Given a command whose shell is killed by SIGKILL on the host, no retry
    task = cli.submit("command", "-t", "web-01", "-p", 'cmd=["sh", "-c", "kill -KILL $$"]',
                      "--retries", "0", *ssh)
    worker.start()
    wait_until(lambda: recorded(cli, task, 1), 60, "the job recorded", worker.tail, [worker])
    # Then each view that shows an exit code names the signal instead of leaving it empty
    shown = cli.ok("jobs", "show", f"{task}.0")
    assert "failed, exit code SIGKILL" in shown, shown
    assert "killed by signal SIGKILL on web-01" in shown
    failures = cli.ok("tasks", "show", str(task))
    [row] = [ln for ln in failures.splitlines() if "killed by signal" in ln]
    assert "SIGKILL" in row.split("killed by signal")[0], failures
    assert "web-01 | failed | rc=SIGKILL |" in cli.ok("tasks", "output", str(task))
    # and the record keeps no exit code (its column is a number), the signal in the error
    [attempt] = json.loads(cli.ok("jobs", "show", f"{task}.0", "-o", "json"))["attempts"]
    assert attempt["exit_code"] in (None, "") and "killed by signal SIGKILL" in attempt["error"]
