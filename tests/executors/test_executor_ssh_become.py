"""become on real sshd hosts (tests/fleet.py) through a real ``sudo -n``: who the command runs
as, from the task's options and the host's ``ansible_become*`` variables; hostile arguments;
and sudo asking for a password, which fails the job for good with a clear error.

The fleet's sshd runs as root, so a login as root becomes anyone without a password. For the
password case the ``nopw_user`` fixture (tests/conftest.py) logs in as an unprivileged user
that is not in sudoers.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tasks
from scheduler.errors import BecomeError, ConfigError
from tests.fleet import SshFleet
from workers.protocol import Order
from workers.runner import Runner

pytestmark = pytest.mark.sshd


@pytest.fixture
def executor(ssh_fleet: SshFleet, sudo: str):
    ex = ssh_fleet.executor()
    yield ex
    ex.close()


def whoami(executor, host) -> str:
    with executor.session(host) as session:
        result = session.run(["id", "-un"], timeout=20)
    assert result.exit_code == 0, result.stderr_head
    return result.stdout_head.strip()


def test_become_user_from_the_task_options_runs_the_command_as_that_user(
        ssh_fleet: SshFleet, sudo: str) -> None:
    # Given a task whose ssh options say become_user=nobody (the login is root)
    executor = ssh_fleet.executor(become_user="nobody")
    try:
        # When it runs id -un, Then sudo ran it as nobody
        assert whoami(executor, ssh_fleet.hosts[0].host()) == "nobody"
    finally:
        executor.close()


def test_the_hosts_ansible_become_variables_decide_when_the_task_says_nothing(
        ssh_fleet: SshFleet, executor) -> None:
    host = ssh_fleet.hosts[1]
    assert whoami(executor, host.host(vars={"ansible_become": True,
                                            "ansible_become_user": "nobody"})) == "nobody"
    # ansible_become alone becomes root; "false" (as an INI file gives it) does not become
    login = whoami(executor, host.host())
    assert whoami(executor, host.host(vars={"ansible_become": "true"})) == "root"
    assert whoami(executor, host.host(vars={"ansible_become": "false",
                                            "ansible_become_user": "nobody"})) == login


def test_a_become_method_other_than_sudo_is_refused_before_connecting(
        ssh_fleet: SshFleet, executor) -> None:
    host = ssh_fleet.hosts[0].host(vars={"ansible_become": True, "ansible_become_method": "su"})
    with pytest.raises(ConfigError, match="ansible_become_method 'su' is not supported"), \
            executor.session(host):
        pass


@pytest.mark.parametrize("user", ["-s", "root\n"])  # (a trailing newline passed `$` once)
def test_a_become_user_that_looks_like_a_sudo_option_is_refused(ssh_fleet: SshFleet,
                                                                  sudo: str, user: str) -> None:
    executor = ssh_fleet.executor(become_user=user)
    try:
        with pytest.raises(ConfigError, match="is not a user name"), \
                executor.session(ssh_fleet.hosts[0].host()):
            pass
    finally:
        executor.close()


def test_hostile_arguments_under_become_reach_the_command_unchanged(
        ssh_fleet: SshFleet, sudo: str, tmp_path: Path) -> None:
    # Given arguments a shell would interpret, run as nobody
    marker = tmp_path / "pwned"
    hostile = ["it's", f"$(touch {marker})", f"`touch {marker}`", "a;b", "x|y", "-u", "--",
               "$HOME", ""]
    executor = ssh_fleet.executor(become_user="nobody")
    try:
        with executor.session(ssh_fleet.hosts[2].host()) as session:
            result = session.run(["printf", "%s\\n", *hostile], timeout=20)
    finally:
        executor.close()
    # Then each arrived as one argument, verbatim, and nothing ran
    assert result.exit_code == 0, result.stderr_head
    assert result.stdout_head.split("\n")[:-1] == hostile
    assert result.command.startswith("sudo -n -H -u nobody -- printf ")
    assert not marker.exists()


def test_sudo_asking_for_a_password_is_a_clear_become_error(
        ssh_fleet: SshFleet, executor, nopw_user: str) -> None:
    # Given a login without sudo rights on a host with ansible_become
    host = ssh_fleet.hosts[3].host(user=nopw_user, vars={"ansible_become": True})
    with executor.session(host) as session:
        # Then without become it runs as itself
        session.become = None
        assert session.run(["id", "-un"], timeout=20).stdout_head.strip() == nopw_user
    # When a command runs with become, sudo -n refuses instead of prompting
    with executor.session(host) as session, pytest.raises(BecomeError) as caught:
        session.run(["id", "-un"], timeout=20)
    assert str(caught.value) == (
        f"become: sudo on {host.name} asks for a password for root; give root NOPASSWD in "
        "sudoers for this command or run without become")


def test_a_job_whose_sudo_asks_for_a_password_fails_for_good_with_that_message(
        ssh_fleet: SshFleet, nopw_user: str, sudo: str) -> None:
    # Given a command job for a host whose inventory says become, as a worker child gets it
    fleet_host = ssh_fleet.hosts[3]
    order = Order(
        job_id="j1", token=1, task_id="t1", host=fleet_host.name,
        host_data={"address": fleet_host.address, "port": str(fleet_host.port),
                   "user": nopw_user, "vars": json.dumps({"ansible_become": True,
                                                          "ansible_become_user": "nobody"})},
        spec={"action": "command", "params": {"cmd": ["true"]}, "executor": "ssh",
              "executor_options": ssh_fleet.ssh_options()},
        timeout_s=30, due_ms=0)
    # When the runner runs it
    outcome = Runner(ssh_fleet.settings()).run(order)
    # Then the job fails, is not retried, and says why in one line
    assert not outcome.ok and outcome.retryable is False
    assert outcome.error == (
        f"become: sudo on {fleet_host.name} asks for a password for nobody; give nobody "
        "NOPASSWD in sudoers for this command or run without become")


def test_the_command_action_reports_become_refusals_as_permanent(
        ssh_fleet: SshFleet, executor, nopw_user: str) -> None:
    host = ssh_fleet.hosts[3].host(user=nopw_user, vars={"ansible_become": "yes"})
    action = tasks.get_action("command")
    with executor.session(host) as session:
        result = action.run(session, host, action.validate({"cmd": ["true"]}), 30)
    assert not result.ok and not result.retryable
    assert result.error is not None and result.error.startswith("become: sudo on ")


def test_a_timed_out_command_under_become_is_killed_with_its_children(
        ssh_fleet: SshFleet, sudo: str) -> None:
    from tests.executors.test_executor_ssh import _gone

    # Given a command run as nobody whose grandchild prints its pid and sleeps for a minute
    executor = ssh_fleet.executor(become_user="nobody")
    try:
        with executor.session(ssh_fleet.hosts[0].host()) as session:
            result = session.run(["sh", "-c", 'sh -c "echo \\$\\$; exec sleep 60" & wait'],
                                 timeout=1.0)
            # Then it times out, and the session still works
            assert result.timed_out and result.exit_code is None
            assert session.run(["id", "-un"], timeout=10).stdout_head == "nobody\n"
    finally:
        executor.close()
    # And the grandchild, running as nobody under sudo, was killed with the process group
    pid = int(result.stdout_head.strip())
    assert _gone(pid), "the become command survived its timeout"
