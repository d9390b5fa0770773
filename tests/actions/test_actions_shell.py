"""The ``shell`` action on real OpenSSH hosts, on the local executor, and through the whole
pipeline (``submit --dry-run`` shows the line a host runs; a real worker node runs it): a
script with ``;`` works, and a hostile host variable arrives as one word, never as shell code."""

from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

import pytest

import tasks
from tasks.executors import build_executor
from tasks.host import Host
from tests.actions.test_actions_ssh_commands import hostile
from tests.actions_support import run_action
from tests.fleet import SshFleet, current_user
from tests.submit_support import cli_with_inventory, sql_rows
from tests.worker_support import WorkerProcess, wait_until, worker_args

pytestmark = pytest.mark.sshd

# Prints its arguments as JSON: what the program started by the script really received.
ECHO = shlex.join([sys.executable, "-c",
                   "import json, sys; sys.stdout.write(json.dumps(sys.argv[1:]))"])


def hostile_host(fh_host: Host, canary: Path) -> tuple[Host, list[str], str]:
    """The host with one hostile variable per hostile string, the strings, and a script that
    passes each variable bare to ECHO."""
    evil = [f"x'; touch {canary}; '", *hostile(canary)]
    host = Host(f"web-01; touch {canary}", fh_host.address, fh_host.port, fh_host.user,
                {f"v{i}": v for i, v in enumerate(evil)})
    script = f"true; {ECHO} " + " ".join(f"{{host.vars.v{i}}}" for i in range(len(evil)))
    return host, evil, script + " {host.name}"


def test_a_script_with_a_semicolon_runs_under_sh_on_the_host(ssh_fleet: SshFleet) -> None:
    result = run_action(ssh_fleet, ssh_fleet.hosts[0], "shell", {"cmd": "uname -n; echo ok"})
    assert result.ok, result.error
    assert result.results[0].stdout_head == f"{os.uname().nodename}\nok\n"
    assert result.results[0].command == shlex.join(["sh", "-c", "uname -n; echo ok"])


def test_a_hostile_host_variable_arrives_as_one_word_and_runs_nothing(ssh_fleet: SshFleet) -> None:
    fh = ssh_fleet.hosts[1]
    canary = fh.root / "pwned-shell"
    host, evil, script = hostile_host(fh.host(), canary)
    result = run_action(ssh_fleet, fh, "shell", {"cmd": script}, host=host)
    assert result.ok, result.error
    assert json.loads(result.results[0].stdout_head) == [*evil, host.name]
    assert not canary.exists()


def test_the_local_executor_runs_the_same_script_with_the_same_quoting(tmp_path: Path) -> None:
    canary = tmp_path / "pwned-local"
    host, evil, script = hostile_host(Host("local-1"), canary)
    action = tasks.get_action("shell")
    executor = build_executor("local", {})
    with executor.session(host) as session:
        result = action.run(session, host, action.validate({"cmd": script}), 30.0)
        piped = action.run(session, host, action.validate(
            {"cmd": "tr a-z A-Z | tail -1; exit 4", "stdin": "one\ntwo\n"}), 30.0)
    assert result.ok, result.error
    assert json.loads(result.results[0].stdout_head) == [*evil, host.name]
    assert not canary.exists()
    assert not piped.ok and piped.results[0].stdout_head == "TWO\n"
    assert piped.error == "shell failed (exit 4): TWO"


def test_a_placeholder_inside_quotes_is_refused_at_submit_with_one_line(tmp_path: Path,
                                                                       redis_url: str) -> None:
    cli = cli_with_inventory(tmp_path, redis_url, "[web]\nweb-01\n")
    code, out, err = cli("submit", "shell", "-t", "web-01", "--dry-run",
                         "-p", 'cmd=echo "{host.name}"')
    assert code != 0 and out == ""
    assert err.splitlines()[0] == (
        "error: action shell: parameter 'cmd': {host.name} at character 7 is inside double "
        "quotes: write it bare, outside quotes, comments, backquotes and here-documents (its "
        "value is quoted as one word for you)")
    assert "Traceback" not in err


@pytest.fixture
def fleet_cli(tmp_path: Path, redis_url: str, ssh_fleet: SshFleet):
    """(cli, worker node to start, ssh options) on the sshd fleet; web-02 has a hostile var."""
    lines = [f"{h.name} ansible_host={h.address} ansible_port={h.port} "
             f"ansible_user={current_user()} root={h.root}" for h in ssh_fleet.hosts[:2]]
    lines[1] += f" \"evil=x'; touch {ssh_fleet.hosts[1].root}/pwned; '\""
    cli = cli_with_inventory(tmp_path, redis_url, "[web]\n" + "\n".join(lines) + "\n")
    env = {"FLEETSCHED_KNOWN_HOSTS": str(ssh_fleet.known_hosts),
           "FLEETSCHED_SSH_CONFIG": str(ssh_fleet.ssh_config),
           "FLEETSCHED_DATABASE_URL": cli.database_url}
    args = [a for a in worker_args("shell-1", slots=4, processes=1) if a != "--no-recorder"]
    worker = WorkerProcess(redis_url, tmp_path, args, env=env)
    ssh = ["--executor-option", f"identity_file={ssh_fleet.identity}",
           "--executor-option", "allow_agent=false", "--executor-option", "look_for_keys=false"]
    yield cli, worker, ssh
    worker.stop()


def test_the_plan_shows_the_shell_line_and_a_worker_runs_it_on_the_hosts(
        fleet_cli, ssh_fleet: SshFleet) -> None:
    cli, worker, ssh = fleet_cli
    script = "uname -n > {host.vars.root}/shell.out; echo {host.vars.evil} >> {host.vars.root}/shell.out"
    # Given a dry run on web-02, whose variable is hostile: the plan shows the line it runs
    plan = json.loads(cli.ok("submit", "shell", "-t", "web-02", "-p", f"cmd={script}",
                             "--dry-run", "--output", "json", *ssh))
    root = ssh_fleet["web-02"].root
    evil = f"x'; touch {root}/pwned; '"
    rendered = (f"uname -n > {shlex.quote(str(root))}/shell.out; "
                f"echo {shlex.quote(evil)} >> {shlex.quote(str(root))}/shell.out")
    assert plan["plan"]["runs"] == "on web-02: " + shlex.join(["sh", "-c", rendered])
    # When the task runs on a real worker node over SSH
    task = cli.submit("shell", "-t", "group:web", "-p", "cmd=echo {host.name}; uname -n",
                      *ssh)
    hostile_task = cli.submit("shell", "-t", "web-02", "-p", f"cmd={script}", *ssh)
    worker.start()
    for t in (task, hostile_task):
        wait_until(lambda t=t: [r.state for r in sql_rows(
            cli.database_url, "SELECT state FROM tasks WHERE id = :t", t=t)] == ["succeeded"],
            90, f"task {t} succeeded in SQL", worker.tail, [worker])
    # Then each host ran the script, and the hostile value arrived as text
    out = cli.ok("tasks", "output", str(task))
    assert "web-01" in out and os.uname().nodename in out
    assert (root / "shell.out").read_text() == f"{os.uname().nodename}\n{evil}\n"
    assert not (root / "pwned").exists()
