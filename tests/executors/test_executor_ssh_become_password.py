"""become with a password (issue 30) on real sshd hosts (tests/fleet.py) and a real ``sudo -S``:
the password comes from a secret reference read on the worker, is written only at sudo's
prompt, and never shows in the output, the logs or the job's outcome; a wrong one fails the
job once, for good; a literal one is refused.

The ``pw_user`` fixture (root only) makes a login, ``fleetsched-pw``, whose sudo asks its
password: a sudoers.d drop-in without NOPASSWD (and ``timestamp_timeout=0``, so sudo asks every
time), a random password set with chpasswd for the test only. The fleet's sshd lets it log in.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import pwd
import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from scheduler.errors import BecomeError, ConfigError
from scheduler.inventory import validate
from tests.fleet import PASSWORD_LOGIN, SshFleet
from tests.servers import missing
from workers.protocol import Order
from workers.runner import Runner

pytestmark = pytest.mark.sshd

ENV = "FLEETSCHED_TEST_BECOME_PW"
DROP_IN = Path("/etc/sudoers.d/fleetsched-pw-test")
LOCK = Path("/tmp/fleetsched-pw-test.lock")


@pytest.fixture
def pw_user(sudo: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, str]]:
    """(login, password): a login whose sudo asks its password; ``$ENV`` holds the password.
    Held under a lock (pytest-xdist workers share the user), undone after the test."""
    if os.geteuid() != 0:
        missing("root", "the become password tests create a login user; run them as root")
    with open(LOCK, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            pwd.getpwnam(PASSWORD_LOGIN)
        except KeyError:
            made = subprocess.run(["useradd", "--system", "--shell", "/bin/sh",
                                   "--no-create-home", "--home-dir", "/",
                                   "--password", "*", PASSWORD_LOGIN],
                                  check=False, capture_output=True, text=True)
            if made.returncode not in (0, 9):
                raise RuntimeError(f"useradd {PASSWORD_LOGIN}: {made.stderr.strip()}")
        # a home that exists: sshd's "Could not chdir" would come before the shell's stderr
        subprocess.run(["usermod", "-d", "/", PASSWORD_LOGIN], check=True, capture_output=True)
        password = "pw-" + secrets.token_urlsafe(18)
        subprocess.run(["chpasswd"], input=f"{PASSWORD_LOGIN}:{password}\n", text=True,
                       check=True, capture_output=True)
        rule = (f"Defaults:{PASSWORD_LOGIN} timestamp_timeout=0, lecture=never\n"
                f"{PASSWORD_LOGIN} ALL=(ALL:ALL) ALL\n")
        tmp = Path(f"/tmp/fleetsched-pw-test.{os.getpid()}")
        tmp.write_text(rule)
        subprocess.run(["visudo", "-cqf", str(tmp)], check=True)
        tmp.chmod(0o440)
        os.replace(tmp, DROP_IN)
        monkeypatch.setenv(ENV, password)
        try:
            yield PASSWORD_LOGIN, password
        finally:
            DROP_IN.unlink(missing_ok=True)
            subprocess.run(["usermod", "-p", "*", PASSWORD_LOGIN], check=True,
                           capture_output=True)


def order(fleet: SshFleet, user: str, host_vars: dict, cmd: list[str], **options) -> Order:
    h = fleet.hosts[3]
    return Order(
        job_id="j1", token=1, task_id="t1", host=h.name,
        host_data={"address": h.address, "port": str(h.port), "user": user,
                   "vars": json.dumps(host_vars)},
        spec={"action": "command", "params": {"cmd": cmd}, "executor": "ssh",
              "executor_options": fleet.ssh_options(**options)},
        timeout_s=30, due_ms=0)


def test_the_right_password_from_an_env_reference_runs_the_job_as_root_and_shows_nowhere(
        ssh_fleet: SshFleet, pw_user: tuple[str, str], caplog: pytest.LogCaptureFixture,
        capfd: pytest.CaptureFixture[str]) -> None:
    user, password = pw_user
    caplog.set_level(logging.DEBUG)  # every logger, paramiko's included, before any filter
    # Given a host whose inventory says become with the password as a reference
    job = order(ssh_fleet, user, {"ansible_become": True,
                                  "ansible_become_password": f"@env:{ENV}"},
                ["sh", "-c", "id -u; id -un >&2"])
    # When a worker runs the job
    outcome = Runner(ssh_fleet.settings()).run(job)
    # Then it ran as root
    assert outcome.ok, outcome.error
    assert json.loads(outcome.output)[0]["stdout_head"] == "0\n"
    assert json.loads(outcome.output)[0]["stderr_head"] == "root\n"  # no prompt, no mark
    # And the password is in none of the outcome, the log records, the process's output
    assert password not in json.dumps(outcome._asdict())
    assert password not in caplog.text
    captured = capfd.readouterr()
    assert password not in captured.out + captured.err


def test_the_commands_stdin_comes_after_the_password_and_the_prompt_is_not_captured(
        ssh_fleet: SshFleet, pw_user: tuple[str, str]) -> None:
    user, password = pw_user
    executor = ssh_fleet.executor(become_password=f"@env:{ENV}")
    try:
        host = ssh_fleet.hosts[0].host(user=user, vars={"ansible_become": "yes"})
        with executor.session(host) as session:
            result = session.run(["sh", "-c", "cat; id -un"], timeout=20, stdin=b"line 1\nend")
    finally:
        executor.close()
    # cat got the job's stdin, not the password (sudo read that at its prompt)
    assert result.exit_code == 0, result.stderr_head
    assert result.stdout_head == "line 1\nendroot\n"
    assert result.stderr_head == "" and password not in result.command
    assert result.command.startswith("sudo -S -p '[fleetsched-sudo-")


def test_when_sudo_does_not_ask_the_password_is_not_written_to_the_command(
        ssh_fleet: SshFleet, pw_user: tuple[str, str]) -> None:
    # Given a login (root) whose sudo never asks, with a become password configured
    _, password = pw_user
    executor = ssh_fleet.executor(become_user="nobody", become_password=f"@env:{ENV}")
    try:
        with executor.session(ssh_fleet.hosts[1].host()) as session:
            fed = session.run(["cat"], timeout=20, stdin=b"only this")
            empty = session.run(["sh", "-c", "cat; id -un"], timeout=20)
    finally:
        executor.close()
    # Then the command's stdin is the job's alone (and none ends at once)
    assert (fed.exit_code, fed.stdout_head) == (0, "only this"), fed.stderr_head
    assert (empty.exit_code, empty.stdout_head) == (0, "nobody\n")
    assert password not in fed.stdout_head + empty.stdout_head


def test_a_wrong_password_fails_the_job_once_for_good_and_says_so(
        ssh_fleet: SshFleet, pw_user: tuple[str, str], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture, tmp_path: Path) -> None:
    user, _ = pw_user
    wrong = "wrong-" + secrets.token_urlsafe(12)
    monkeypatch.setenv(ENV, wrong)
    caplog.set_level(logging.DEBUG)
    marker = tmp_path / "ran"
    job = order(ssh_fleet, user, {"ansible_become": True, "ansible_become_pass": f"@env:{ENV}"},
                ["touch", str(marker)])
    started = os.times().elapsed
    outcome = Runner(ssh_fleet.settings()).run(job)
    # Then the job failed, is not retried, names host and user, and the command never ran
    assert not outcome.ok and outcome.retryable is False
    assert outcome.error == (
        f"become: sudo on {job.host} rejected the become password for root (wrong password); "
        "not retried")
    assert not marker.exists()
    # sudo was not left asking until the timeout (the second prompt ended it)
    assert os.times().elapsed - started < 15
    assert wrong not in json.dumps(outcome._asdict()) and wrong not in caplog.text


def test_the_session_raises_become_error_for_a_wrong_password(
        ssh_fleet: SshFleet, pw_user: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    user, _ = pw_user
    monkeypatch.setenv(ENV, "not-the-password")
    executor = ssh_fleet.executor(become_password=f"@env:{ENV}")
    try:
        host = ssh_fleet.hosts[2].host(user=user, vars={"ansible_become": True})
        with executor.session(host) as session, pytest.raises(BecomeError) as caught:
            session.run(["true"], timeout=20, stdin=b"must not become a second try\n")
    finally:
        executor.close()
    assert "rejected the become password for root" in str(caught.value)
    assert "not-the-password" not in str(caught.value)


@pytest.mark.parametrize("where", ["option", "ansible_become_password", "ansible_become_pass"])
def test_a_literal_become_password_is_refused_without_showing_it(
        ssh_fleet: SshFleet, sudo: str, where: str) -> None:
    literal = "hunter2-literal"
    options = {"become_password": literal} if where == "option" else {}
    host_vars = {"ansible_become": True} | ({where: literal} if where != "option" else {})
    executor = ssh_fleet.executor(**options)
    try:
        with pytest.raises(ConfigError) as caught, \
                executor.session(ssh_fleet.hosts[0].host(vars=host_vars)):
            pass
    finally:
        executor.close()
    message = str(caught.value)
    assert "must be a secret reference, not a literal value" in message
    assert literal not in message and literal not in (caught.value.hint or "")


def test_a_missing_env_reference_is_a_clear_config_error(ssh_fleet: SshFleet, sudo: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    executor = ssh_fleet.executor(become=True, become_password=f"@env:{ENV}")
    try:
        with pytest.raises(ConfigError, match=f"@env:{ENV} is not set"), \
                executor.session(ssh_fleet.hosts[0].host()):
            pass
    finally:
        executor.close()


def test_the_inventory_keeps_a_become_password_reference_and_skips_a_literal() -> None:
    found: set[str] = set()
    kept = validate.public_vars({"ansible_become_pass": "@file:/etc/fleetsched/become",
                                 "ansible_become_password": "literal-secret",
                                 "db": {"ansible_become_pass": "@env:X"}}, found)
    assert kept == {"ansible_become_pass": "@file:/etc/fleetsched/become", "db": {}}
    assert found == {"ansible_become_password", "db.ansible_become_pass"}


def test_hosts_check_never_types_the_become_password(
        ssh_fleet: SshFleet, pw_user: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.executors.ssh.connect import ssh_options
    from tasks.executors.ssh.probe import probe_host

    # Given a host whose password reference is not even set where the check runs
    user, _ = pw_user
    monkeypatch.delenv(ENV)
    host = ssh_fleet.hosts[0].host(user=user, vars={"ansible_become": True,
                                                    "ansible_become_pass": f"@env:{ENV}"})
    # When hosts check probes it, Then it asks sudo -n, which says a password is needed
    settings = ssh_fleet.settings()
    probe = probe_host(host, settings, ssh_options(ssh_fleet.ssh_options(), settings), 20)
    assert (probe.status, probe.remote_user) == ("become-failed", user)
    assert probe.error.startswith(f"become: sudo on {host.name} asks for a password for root")


def test_a_command_line_echoed_before_sudo_runs_is_neither_the_prompt_nor_the_start() -> None:
    import shlex

    from tasks.executors.ssh.become import Become

    class Sink:
        def __init__(self) -> None:
            self.data = b""

        def feed(self, data: bytes) -> None:
            self.data += data

    become = Become("web-01", "root", password="not-shown")
    gate = become.gate(sink := Sink())
    assert gate is not None
    # Given a host that echoes the command to stderr before running it (xtrace, an audit
    # wrapper), whole and one argument a line
    argv = become.wrap(["cat"])
    gate.feed(("+ " + shlex.join(argv) + "\n" + "\n".join(argv) + "\n").encode())
    # Then no prompt was seen (no password typed) and the command has not started
    assert (gate.prompts, gate.started) == (0, False), sink.data
    # When sudo prints its prompt, then the command starts: both are seen, and taken out
    gate.feed(become.prompt.encode())
    gate.feed(f"{become.mark}-started\nhello\n".encode())
    assert (gate.prompts, gate.started) == (1, True)
    assert sink.data.endswith(b"cat\nhello\n") and become.prompt.encode() not in sink.data
