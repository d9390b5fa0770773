"""The ssh executor against real OpenSSH sshd hosts (tests/fleet.py): commands and capture."""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scheduler.errors import AuthenticationError, ConfigError, HostUnreachableError
from tests.fleet import SshFleet
from tasks.executors import build_executor

pytestmark = pytest.mark.sshd

PY = sys.executable  # the fleet hosts are this machine: the same interpreter is there


@pytest.fixture
def executor(ssh_fleet: SshFleet):
    ex = ssh_fleet.executor()
    yield ex
    ex.close()


def test_a_command_runs_on_every_host_with_exit_code_output_and_duration(
    ssh_fleet: SshFleet, executor,
) -> None:
    # Given four hosts, each asked to report where it runs, in parallel
    def one(host):
        with executor.session(host.host()) as session:
            return session.run(["sh", "-c", 'pwd; echo "err $1" >&2; sleep 0.2', "sh", host.name],
                               timeout=20)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda h: one(h), ssh_fleet.hosts))
    for host, result in zip(ssh_fleet.hosts, results):
        assert result.exit_code == 0 and result.ok
        assert result.stderr_head == f"err {host.name}\n"
        assert result.stdout_bytes == len(result.stdout_head.encode())
        assert 0.2 <= result.duration_s < 15
        assert not result.timed_out and result.error is None


def test_a_non_zero_exit_is_reported_not_raised(ssh_fleet: SshFleet, executor) -> None:
    with executor.session(ssh_fleet.hosts[1].host()) as session:
        result = session.run(["sh", "-c", "echo failing >&2; exit 42"], timeout=10)
    assert result.exit_code == 42 and not result.ok
    assert result.stderr_head == "failing\n"


def test_a_command_killed_by_a_signal_is_reported_with_the_signal_name(
        ssh_fleet: SshFleet, executor) -> None:
    # Given a command whose process sshd waits for (the login shell) dies of SIGKILL: sshd
    # sends "exit-signal KILL" instead of an exit status
    with executor.session(ssh_fleet.hosts[2].host()) as session:
        result = session.run(["sh", "-c", "echo before; kill -KILL $$; sleep 5"], timeout=30)
    # Then the result has no exit code, and its error names the signal
    assert result.exit_code is None and not result.timed_out and not result.ok
    assert result.error is not None and result.error.startswith("killed by signal SIGKILL"), \
        result.error


def test_hostile_arguments_arrive_on_the_host_as_exactly_the_argv_given(
    ssh_fleet: SshFleet, executor, tmp_path: Path,
) -> None:
    # Given arguments a shell would interpret, and a marker that $() or `` would create
    marker = tmp_path / "pwned"
    hostile = ["it's", '"quoted"', f"$(touch {marker})", f"`touch {marker}`", "a;b", "x|y",
               "new\nline", " spaced  out ", "-rf", "--", "*", "", "\\", "$HOME", "#"]
    # When a script prints each of its arguments followed by NUL
    with executor.session(ssh_fleet.hosts[0].host()) as session:
        printed = session.run(["sh", "-c", "printf '%s\\0' \"$@\"", "sh", *hostile], timeout=10)
        python = session.run([PY, "-c", "import sys; print(sys.argv[1:])", *hostile], timeout=10)
    # Then they arrive unchanged, and nothing was executed
    assert printed.stdout_head.split("\0")[:-1] == hostile
    assert python.stdout_head == repr(hostile) + "\n"
    assert not marker.exists()


def test_twenty_megabytes_on_stdout_and_stderr_at_once_do_not_deadlock(
    ssh_fleet: SshFleet, executor,
) -> None:
    # Given a command interleaving 20 MB on each stream, while reading 2 MB of stdin
    script = ("import sys\n"
              "n = len(sys.stdin.buffer.read())\n"
              "for i in range(20):\n"
              "    sys.stdout.buffer.write(bytes([65 + i]) * 1_000_000); sys.stdout.flush()\n"
              "    sys.stderr.buffer.write(bytes([97 + i]) * 1_000_000); sys.stderr.flush()\n"
              "sys.stdout.write('END'); sys.stderr.write('stdin=%d' % n)\n")
    with executor.session(ssh_fleet.hosts[2].host()) as session:
        result = session.run([PY, "-c", script], timeout=120, stdin=b"i" * 2_000_000)
    assert result.ok, result
    assert result.stdout_bytes == 20_000_003 and result.stderr_bytes == 20_000_000 + 13
    assert result.stdout_head == "A" * 8192 and result.stdout_tail == "T" * 8189 + "END"
    assert result.stderr_head == "a" * 8192 and result.stderr_tail == "t" * 8179 + "stdin=2000000"


def test_a_command_timeout_kills_the_remote_process_group_and_the_host_stays_usable(
    ssh_fleet: SshFleet, executor, tmp_path: Path,
) -> None:
    # Given a command whose grandchild records its pid and sleeps for a minute
    pidfile = tmp_path / "remote.pid"
    started = time.monotonic()
    with executor.session(ssh_fleet.hosts[3].host()) as session:
        result = session.run(
            ["sh", "-c", f'sh -c "echo \\$\\$ > {pidfile}; exec sleep 60" & wait'], timeout=1.0)
        # Then the run returns at the timeout, marked timed out without an exit code
        assert result.timed_out and result.exit_code is None and not result.ok
        assert time.monotonic() - started < 10
        # And the same session still runs commands
        again = session.run(["echo", "still here"], timeout=10)
    assert again.ok and again.stdout_head == "still here\n"
    # And the remote grandchild was killed with its process group
    pid = int(pidfile.read_text())
    assert _gone(pid), f"remote process {pid} survived the timeout"


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def test_sftp_put_rename_and_remove_work_with_the_mode_given(ssh_fleet: SshFleet, executor) -> None:
    host = ssh_fleet.hosts[0]
    tmp, final = host.root / "config.tmp", host.root / "config"
    payload = bytes(range(256)) * 1000
    with executor.session(host.host()) as session:
        session.put(payload, str(tmp), mode=0o640)
        session.rename(str(tmp), str(final))
        assert final.read_bytes() == payload and not tmp.exists()
        assert final.stat().st_mode & 0o777 == 0o640
        session.put(b"new", str(tmp), mode=0o600)
        session.rename(str(tmp), str(final))  # replaces an existing file atomically
        assert final.read_bytes() == b"new" and final.stat().st_mode & 0o777 == 0o600
        session.remove(str(final))
        session.remove(str(final))  # already gone: not an error
    assert not final.exists()


def test_sessions_on_the_same_host_reuse_one_connection(ssh_fleet: SshFleet, executor) -> None:
    host = ssh_fleet.hosts[1]
    accepted_before = host.log_path.read_text().count("Accepted publickey")
    for _ in range(3):
        with executor.session(host.host()) as session:
            assert session.run(["true"], timeout=10).ok
    assert host.log_path.read_text().count("Accepted publickey") == accepted_before + 1
    assert executor.pool.idle_count() == 1


def test_a_pooled_connection_is_replaced_once_after_an_sshd_restart(
    private_ssh_fleet: SshFleet,
) -> None:
    # Given a pooled connection to a host
    host = private_ssh_fleet.hosts[0]
    executor = private_ssh_fleet.executor()
    with executor.session(host.host()) as session:
        assert session.run(["true"], timeout=10).ok
    # When the host's sshd is killed (with its connections) and started again
    host.restart()
    # Then the next session notices the dead connection and reconnects, once
    with executor.session(host.host()) as session:
        result = session.run(["echo", "back"], timeout=10)
        assert session.conn.reused is False
    assert result.ok and result.stdout_head == "back\n"
    executor.close()


def test_a_pooled_connection_that_dies_inside_a_session_is_replaced_before_the_next_command(
    private_ssh_fleet: SshFleet,
) -> None:
    # Given a session holding a connection taken from the pool
    host = private_ssh_fleet.hosts[0]
    executor = private_ssh_fleet.executor()
    with executor.session(host.host()) as session:
        assert session.run(["true"], timeout=10).ok
    with executor.session(host.host()) as session:
        assert session.conn.reused
        first = session.conn
        # When the host restarts between two commands of the job
        host.restart()
        result = session.run(["echo", "again"], timeout=10)
        # Then the dead connection was replaced once and the command ran on the new one
        assert result.ok and result.stdout_head == "again\n"
        assert session.conn is not first and not first.transport.is_active()
    assert host.log_path.read_text().count("Accepted publickey") == 2
    executor.close()


def test_a_connection_lost_mid_command_is_reported_without_an_exit_code(
    private_ssh_fleet: SshFleet,
) -> None:
    host = private_ssh_fleet.hosts[0]
    executor = private_ssh_fleet.executor()
    with executor.session(host.host()) as session:
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(session.run, ["sh", "-c", "echo started; sleep 30"], 60)
            time.sleep(0.8)
            host.kill()
            result = pending.result(timeout=30)
    assert result.exit_code is None and not result.timed_out and not result.ok
    assert "lost" in (result.error or "")
    assert executor.pool.idle_count() == 0  # a broken connection is not pooled
    executor.close()


def test_an_unreachable_host_fails_with_a_clear_error(ssh_fleet: SshFleet) -> None:
    from tests.servers import free_port

    executor = ssh_fleet.executor(connect_timeout=2)
    host = ssh_fleet.hosts[0].host(port=free_port("127.0.10.1"))
    with pytest.raises(HostUnreachableError, match=r"cannot connect to web-01 \(127.0.10.1:"):
        with executor.session(host):
            pass


def test_a_key_the_host_does_not_authorize_is_refused(ssh_fleet: SshFleet, tmp_path: Path) -> None:
    from tests.fleet import keygen

    keygen(tmp_path / "stranger", "stranger")
    executor = build_executor("ssh", ssh_fleet.ssh_options(identity_file=str(tmp_path / "stranger")),
                              ssh_fleet.settings())
    with pytest.raises(AuthenticationError, match=r"accepted no key for user .*stranger refused"):
        with executor.session(ssh_fleet.hosts[0].host()):
            pass


def test_a_missing_identity_file_is_a_configuration_error(ssh_fleet: SshFleet) -> None:
    executor = build_executor("ssh", ssh_fleet.ssh_options(identity_file="/nonexistent/key"),
                              ssh_fleet.settings())
    with pytest.raises(ConfigError, match="identity file /nonexistent/key does not exist"):
        with executor.session(ssh_fleet.hosts[0].host()):
            pass


def test_the_ssh_config_supplies_hostname_port_user_and_identity_file(
    ssh_fleet: SshFleet, tmp_path: Path,
) -> None:
    # Given only an alias, and an ssh config that knows where it lives and which key to use
    real = ssh_fleet.hosts[2]
    config = tmp_path / "ssh_config"
    config.write_text(f"Host db-alias\n  HostName {real.address}\n  Port {real.port}\n"
                      f"  User {real.host().user}\n  IdentityFile {ssh_fleet.identity}\n")
    executor = build_executor("ssh", {"allow_agent": False, "look_for_keys": False},
                              ssh_fleet.settings(ssh_config=config))
    from tasks.executors import Host

    with executor.session(Host(name="db-alias")) as session:
        result = session.run(["hostname"], timeout=10)
    assert result.ok
    executor.close()


def test_a_proxycommand_in_the_ssh_config_is_refused_with_a_clear_message(
    ssh_fleet: SshFleet, tmp_path: Path,
) -> None:
    # (a ProxyJump is followed: tests/executors/test_executor_ssh_jump.py)
    config = tmp_path / "ssh_config"
    config.write_text("Host web-*\n  ProxyCommand nc bastion.example 22\n")
    executor = build_executor("ssh", ssh_fleet.ssh_options(), ssh_fleet.settings(ssh_config=config))
    with pytest.raises(ConfigError, match="sets proxycommand nc bastion.example 22 for web-01: "
                                          "the ssh executor runs no proxy commands"):
        with executor.session(ssh_fleet.hosts[0].host()):
            pass


def test_the_identity_file_setting_is_offered_like_the_option(ssh_fleet: SshFleet) -> None:
    settings = ssh_fleet.settings(ssh_identity_file=f"/nonexistent/other, {ssh_fleet.identity}")
    executor = build_executor("ssh", {"allow_agent": False, "look_for_keys": False}, settings)
    with pytest.raises(ConfigError, match="identity file /nonexistent/other does not exist"):
        with executor.session(ssh_fleet.hosts[0].host()):
            pass
    settings = ssh_fleet.settings(ssh_identity_file=str(ssh_fleet.identity))
    executor = build_executor("ssh", {"allow_agent": False, "look_for_keys": False}, settings)
    with executor.session(ssh_fleet.hosts[0].host()) as session:
        assert session.run(["true"], timeout=10).ok
    executor.close()


def test_keys_from_a_running_ssh_agent_are_offered(
    ssh_fleet: SshFleet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import shutil
    import subprocess

    if shutil.which("ssh-agent") is None or shutil.which("ssh-add") is None:
        pytest.skip("ssh-agent is not installed")
    # Given a real ssh-agent holding the fleet's key, and no key file configured
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        env = {"SSH_AUTH_SOCK": str(sock), "PATH": "/usr/bin:/bin"}
        subprocess.run(["ssh-add", str(ssh_fleet.identity)], env=env, check=True,
                       capture_output=True)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        executor = build_executor("ssh", {"allow_agent": True, "look_for_keys": False},
                                  ssh_fleet.settings())
        # Then the agent's key logs in
        with executor.session(ssh_fleet.hosts[3].host()) as session:
            assert session.run(["true"], timeout=10).ok
        executor.close()
    finally:
        agent.terminate()
        agent.wait(10)


def test_a_server_that_never_sends_a_banner_fails_within_the_banner_timeout(
    ssh_fleet: SshFleet,
) -> None:
    import socket
    import threading

    # Given a TCP listener that accepts connections and says nothing
    listener = socket.socket()
    listener.bind(("127.0.10.1", 0))
    listener.listen(1)
    accepted: list[socket.socket] = []
    thread = threading.Thread(target=lambda: accepted.append(listener.accept()[0]), daemon=True)
    thread.start()
    executor = ssh_fleet.executor(banner_timeout=0.5, connect_timeout=0.5)
    host = ssh_fleet.hosts[0].host(port=listener.getsockname()[1])
    started = time.monotonic()
    try:
        with pytest.raises(HostUnreachableError, match=r"SSH handshake with web-01 .* failed"):
            with executor.session(host):
                pass
        assert time.monotonic() - started < 5
    finally:
        for s in accepted:
            s.close()
        listener.close()
