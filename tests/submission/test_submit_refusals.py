"""Bad parameters, options and task files: one clear line (``file:line:`` for a task file),
a non-zero exit, and nothing enqueued (Redis and SQL byte for byte unchanged). Also: a good
task file submits exactly what the same options submit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis

from scheduler.queue.client import Queue
from tests.servers import start_redis
from tests.submit_support import (
    KEYS,
    Cli,
    cli_with_inventory,
    inventory,
    migrated_sqlite,
    redis_snapshot,
    sql_rows,
    sql_snapshot,
)


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return migrated_sqlite(tmp_path_factory.mktemp("tpl"))


@pytest.fixture
def cli(tmp_path: Path, redis_url: str, template_db: Path) -> Cli:
    return cli_with_inventory(tmp_path, redis_url, "[web]\nweb-[01:04]\n", migrated=template_db)


def refused(cli: Cli, redis_client: redis.Redis, args: list[str], code: int, message: str) -> str:
    before = (sql_snapshot(cli.database_url), redis_snapshot(redis_client))
    got, out, err = cli("submit", *args, "--yes")
    lines = err.splitlines()
    assert got == code, err
    assert out == "" and "Traceback" not in err
    assert lines[0].startswith("error: ") and message in lines[0], lines
    assert len(lines) <= 2 and all(ln.startswith("hint: ") for ln in lines[1:]), lines
    assert (sql_snapshot(cli.database_url), redis_snapshot(redis_client)) == before
    return err


@pytest.mark.parametrize("args, code, message", [
    (["command", "-t", "web-01", "-p", "command=true"], 2,
     "action command: unknown parameter 'command' (known: cmd, stdin)"),
    (["command", "-t", "web-01"], 2, "action command: missing required parameter 'cmd'"),
    (["command", "-t", "web-01", "-p", "cmd"], 2, "--param 'cmd' is not NAME=VALUE"),
    (["command", "-t", "web-01", "-p", 'cmd=["sh",1]'], 2,
     "action command: parameter 'cmd': element 2 of the list is 1, not a string"),
    (["command", "-t", "web-01", "-p", 'cmd=["sh","-c",null]'], 2,
     "action command: parameter 'cmd': element 3 of the list is null, not a string"),
    (["command", "-t", "web-01", "-p", "cmd=a", "-p", "cmd=b"], 2, "--param cmd is given twice"),
    (["copy", "-t", "web-01", "-p", "src=relative.txt", "-p", "dest=/etc/x"], 2,
     "action copy: parameter 'src'"),
    (["copy", "-t", "web-01", "-p", "src=/a", "-p", "dest=/b", "-p", "mode=999"], 2,
     "parameter 'mode' must be an octal file mode"),
    (["key-rollover", "-t", "web-01", "-p", "pre_check=true", "-p", "rollover=true", "-p",
      "post_check=true", "-p", "secret=hunter2-literal"], 2,
     "parameter 'secret' is secret: give a reference"),
    (["command", "-t", "web-01", "-p", "cmd=true", "--executor", "telnet"], 2,
     "unknown executor 'telnet'"),
    (["command", "-t", "web-01", "-p", "cmd=true", "--executor", "simulate",
      "--executor-option", "speed=9"], 2, "simulate executor has no option 'speed'"),
    (["command", "-t", "web-01", "-p", "cmd=true", "--max-concurrency", "0"], 2,
     "--max-concurrency '0' is not a count from 1 to 10,000,000"),
    (["command", "-t", "web-01", "-p", "cmd=true", "--max-failures", "150%"], 2,
     "--max-failures '150%'"),
    (["command", "-t", "web-01", "-p", "cmd=true", "--timeout", "soon"], 2,
     "--timeout 'soon' is not a duration"),
    (["command", "-t", "web-01", "-p", "cmd=true", "--priority", "high"], 2,
     "priority 'high' is not one of urgent, normal, bulk"),
    (["command", "-t", "web-01", "-p", "cmd=true", "--at", "2001-01-01T00:00Z"], 2,
     "is in the past"),
    (["command", "-t", "web-01", "-p", "cmd=true", "--at", "tomorrow"], 2, "is not ISO 8601"),
    (["command", "-t", "web-01", "-p", "cmd=true", "--in", "1h", "--at", "2099-01-01T00:00Z"],
     2, "give --at or --in, not both"),
    (["command", "-t", "web-01", "-p", "cmd=true", "--retries", "-1"], 2, "retries -1"),
    (["firmware", "-t", "web-01", "-p", "image=/srv/fw.bin", "-p", "expected_version=4.2",
      "-p", "upgrade_cmd=fw-up {image}", "-p", "version_cmd=fw-version"], 2,
     "action firmware runs inside service windows, and 1 of 1 hosts have no service window"),
    (["reboot-everything", "-t", "web-01"], 4, "reboot-everything"),
    (["-t", "web-01"], 2, "no action given"),
    (["command", "-p", "cmd=true"], 2, "no --target given"),
])
def test_a_bad_option_or_parameter_is_one_line_and_nothing_is_enqueued(
        cli: Cli, redis_client: redis.Redis, args: list[str], code: int, message: str) -> None:
    err = refused(cli, redis_client, args, code, message)
    assert "hunter2-literal" not in err  # a refused secret is never echoed


@pytest.mark.parametrize("text, message", [
    ("action: command\ntarget: web-01\nmax_concurency: 2\n",
     "task.yaml:3: unknown key 'max_concurency'"),
    ("action: command\ntarget: web-01\nparams: {cmd: true}\n\n\n  \nsecrets: x\n",
     "task.yaml:7: unknown key 'secrets'"),
    ("action: command\n", "task.yaml:1: missing required key 'target'"),
    ("- action: command\n", "task.yaml:1: a task file is one mapping"),
    ("action: command\ntarget: web-01\ntarget: web-02\n", "task.yaml:3: key 'target' appears twice"),
    ("action: command\ntarget: [web-01]\n", "task.yaml:2: target must be a text value"),
    ("action: command\ntarget: web-01\nparams: cmd=true\n",
     "task.yaml:3: params must be a mapping of name: value"),
    ("action: command\ntarget: web-01\nparams: {cmd: [a, b}\n", "task.yaml:3: not valid YAML"),
    ("action: command\ntarget: web-01\nretries: -1\n",
     "task.yaml:3: retries must be a whole number from 0 to 100"),
    ("action: command\ntarget: web-01\nin: 1h\nat: 2099-01-01T00:00:00Z\n",
     "give 'at' or 'in', not both"),
    ("action: command\ntarget: web-01\ntimeout: forever\n",
     "task.yaml:3: timeout 'forever' is not a duration"),
    ("action: command\ntarget: web-01\nidempotent: maybe\n",
     "task.yaml:3: idempotent must be true or false"),
    ("action: command\ntarget: web-01\nparams: {cmd: true, typo: 1}\n",
     "action command: unknown parameter 'typo'"),
    ("", "task.yaml: the file is empty"),
])
def test_a_bad_task_file_is_one_line_with_its_line_and_nothing_is_enqueued(
        cli: Cli, redis_client: redis.Redis, tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(text)
    err = refused(cli, redis_client, ["-f", str(path)], 2, message)
    assert str(tmp_path) in err or "action command" in err


def test_a_task_file_cannot_be_mixed_with_task_options(cli: Cli, redis_client: redis.Redis,
                                                       tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("action: command\ntarget: web-01\nparams: {cmd: 'true'}\n")
    refused(cli, redis_client, ["-f", str(path), "--max-failures", "1"], 2, "not both")


def test_a_task_file_submits_the_same_task_as_the_options(
        cli: Cli, redis_client: redis.Redis, tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(
        "# reload the web tier\n"
        "action: command\n"
        "target: group:web,!web-02\n"
        "params:\n  cmd: [sh, -c, 'systemctl reload nginx']\n"
        "name: reload\n"
        "max_concurrency: 50%\n"
        "max_failures: 1\n"
        "timeout: 90s\n"
        "retries: 0\n"
        "backoff: 5s\n"
        "priority: bulk\n"
        "executor: simulate\n"
        "executor_options: {duration_ms: 10}\n"
        "idempotent: true\n")
    from_file = int(cli.ok("submit", "-f", str(path), "--yes").strip())
    from_options = cli.submit(
        "command", "-t", "group:web,!web-02", "-p", "cmd=sh -c 'systemctl reload nginx'",
        "--name", "reload", "--max-concurrency", "50%", "--max-failures", "1", "--timeout",
        "90s", "--retries", "0", "--backoff", "5s", "--priority", "bulk", "--executor",
        "simulate", "--executor-option", "duration_ms=10", "--idempotent")
    queue = Queue(redis_client, KEYS)
    a, b = queue.task_state(str(from_file)), queue.task_state(str(from_options))
    ignore = {"created", "share"}
    assert {k: v for k, v in a.items() if k not in ignore} == {
        k: v for k, v in b.items() if k not in ignore} | {
        "spec": a["spec"]}  # options arrive as text from the CLI, as YAML numbers from a file
    spec_a, spec_b = json.loads(a["spec"]), json.loads(b["spec"])
    assert spec_a["params"] == spec_b["params"] == {"cmd": ["sh", "-c", "systemctl reload nginx"]}
    assert spec_a["executor_options"] == {"duration_ms": 10}
    assert spec_b["executor_options"] == {"duration_ms": "10"}
    assert (a["max_running"], a["max_failures"], a["max_attempts"], a["timeout_ms"],
            a["backoff_ms"], a["prio"], a["idempotent"]) == ("2", "1", "1", "90000", "5000",
                                                             "bulk", "1")


def test_become_user_from_the_option_and_from_a_task_file_lands_in_the_ssh_options(
        cli: Cli, redis_client: redis.Redis, tmp_path: Path) -> None:
    # Given the same become asked for on the command line and in a task file
    path = tmp_path / "task.yaml"
    path.write_text("action: command\ntarget: web-01\nparams: {cmd: 'id -un'}\n"
                    "become: true\nbecome_user: postgres\n")
    from_file = int(cli.ok("submit", "-f", str(path), "--yes").strip())
    from_option = cli.submit("command", "-t", "web-01", "-p", "cmd=id -un",
                             "--become-user", "postgres")
    # Then both tasks carry it as ssh executor options, which the worker's executor reads
    queue = Queue(redis_client, KEYS)
    spec_file = json.loads(queue.task_state(str(from_file))["spec"])
    spec_option = json.loads(queue.task_state(str(from_option))["spec"])
    assert spec_file["executor_options"] == {"become": True, "become_user": "postgres"}
    assert spec_option["executor_options"] == {"become_user": "postgres"}


@pytest.mark.parametrize("args, message", [
    (["command", "-t", "web-01", "-p", "cmd=true", "--become-user", "postgres",
      "--executor-option", "become_user=root"],
     "give --become-user or --executor-option become_user, not both"),
    (["command", "-t", "web-01", "-p", "cmd=true", "--become-user", "postgres",
      "--executor", "local"], "local executor has no option 'become_user'"),
])
def test_become_user_is_refused_twice_or_for_an_executor_without_it(
        cli: Cli, redis_client: redis.Redis, args: list[str], message: str) -> None:
    refused(cli, redis_client, args, 2, message)


@pytest.mark.parametrize("args, message", [
    (["--become-user", "root;id"], "become_user 'root;id' is not a user name"),
    (["--become-user", "root\n"], "become_user 'root\\n' is not a user name"),
    (["--become-user", "-u"], "become_user '-u' is not a user name"),
    (["--executor-option", "become_user=a b"], "become_user 'a b' is not a user name"),
    (["--executor", "simulate", "--become-user", "$(id)"],
     "become_user '$(id)' is not a user name"),
])
def test_a_become_user_the_worker_would_refuse_is_refused_at_submit(
        cli: Cli, redis_client: redis.Redis, args: list[str], message: str) -> None:
    # (the worker checks it with the same rule, tasks/executors/ssh/become.py: refused here, nothing queued)
    refused(cli, redis_client, ["command", "-t", "web-01", "-p", "cmd=true", *args], 2, message)


def test_a_good_become_user_and_a_uid_are_taken(cli: Cli) -> None:
    for user in ("postgres", "svc-backup.1", "machine$", "#1001"):
        cli.submit("command", "-t", "web-01", "-p", "cmd=true", "--become-user", user)


@pytest.mark.parametrize("text, message", [
    ("become_user: postgres\nexecutor_options: {become_user: root}\n",
     "task.yaml:4: become_user is given twice (also in executor_options)"),
    ("become: false\nbecome_user: postgres\n",
     "task.yaml:4: become: false with a become_user: drop one"),
    ("become: sometimes\n", "task.yaml:4: become must be true or false"),
    ("become_user: 'root; id'\n", "become_user 'root; id' is not a user name"),
])
def test_a_task_files_become_keys_are_checked(cli: Cli, redis_client: redis.Redis,
                                              tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "task.yaml"
    path.write_text("action: command\ntarget: web-01\nparams: {cmd: 'true'}\n" + text)
    refused(cli, redis_client, ["-f", str(path)], 2, message)


def test_a_redis_that_may_evict_keys_refuses_the_submit_before_the_task_is_recorded(
    tmp_path: Path, template_db: Path,
) -> None:
    # Given a real redis-server that evicts keys when memory is full
    (tmp_path / "lru").mkdir()
    server = start_redis(tmp_path / "lru", maxmemory_policy="allkeys-lru")
    client = redis.Redis.from_url(server.url)
    try:
        db = tmp_path / "fleetsched.db"
        db.write_bytes(template_db.read_bytes())
        cli = Cli(tmp_path, server.url, f"sqlite:///{db}")
        inventory(cli, tmp_path, "[web]\nweb-[01:02]\n")
        # When a task is submitted to it
        err = refused(cli, client, ["command", "-t", "web-01", "-p", "cmd=true"], 1,
                      "uses maxmemory-policy allkeys-lru, which may evict queued jobs")
        # Then it is refused as it is, not as a recorded task waiting for a reconcile
        assert "recorded" not in err and "reconcile" not in err
        assert sql_rows(cli.database_url, "SELECT id FROM tasks") == []
        assert sql_rows(cli.database_url, "SELECT id FROM jobs") == []
    finally:
        client.close()
        server.kill()
