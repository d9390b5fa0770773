"""The sshd fleet fixture starts real OpenSSH servers that the system ssh client accepts."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.fleet import SshFleet


def _ssh(fleet: SshFleet, name: str, command: str) -> subprocess.CompletedProcess[str]:
    host = fleet[name]
    return subprocess.run(
        ["ssh", "-F", str(fleet.ssh_config), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=yes", "-o", f"UserKnownHostsFile={fleet.known_hosts}",
         "-i", str(fleet.identity), "-p", str(host.port), host.address, command],
        capture_output=True, text=True, timeout=30,
    )


def test_every_fleet_host_is_a_real_sshd_on_its_own_loopback_address(ssh_fleet: SshFleet) -> None:
    if shutil.which("ssh") is None:
        pytest.skip("the OpenSSH client is not installed")
    assert [h.address for h in ssh_fleet] == [f"127.0.10.{i}" for i in range(1, 5)]
    for host in ssh_fleet:
        result = _ssh(ssh_fleet, host.name, f"cd {host.root} && pwd")
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == str(host.root)


def test_a_private_fleet_host_comes_back_on_the_same_port_after_a_restart(
    private_ssh_fleet: SshFleet,
) -> None:
    host = private_ssh_fleet.hosts[0]
    port = host.port
    host.kill()
    assert not host.is_alive()
    host.restart()
    assert host.is_alive() and host.port == port
    assert host.sh("echo ok").stdout == "ok\n"
