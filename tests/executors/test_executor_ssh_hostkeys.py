"""Strict host-key checking: unknown or changed keys stop everything before authentication."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from scheduler.errors import HostKeyError
from tasks.executors.ssh.known_hosts import KnownHosts, Verdict
from tests.fleet import FleetHost, SshFleet
from tasks.executors import build_executor

pytestmark = pytest.mark.sshd


def _accepted(host: FleetHost) -> int:
    return host.log_path.read_text().count("Accepted publickey")


def _try_to_touch(fleet: SshFleet, known_hosts: Path, host: FleetHost, marker: Path) -> None:
    executor = build_executor("ssh", fleet.ssh_options(), fleet.settings(known_hosts=known_hosts))
    try:
        with executor.session(host.host()) as session:
            session.run(["touch", str(marker)], timeout=10)
    finally:
        executor.close()


def test_an_unknown_host_key_fails_and_nothing_runs_or_is_added(
    ssh_fleet: SshFleet, tmp_path: Path,
) -> None:
    # Given a known_hosts file that lists every host but web-03
    host = ssh_fleet["web-03"]
    known = tmp_path / "known_hosts"
    known.write_text("".join(h.known_hosts_line + "\n" for h in ssh_fleet if h is not host))
    before = known.read_bytes()
    accepted = _accepted(host)
    marker = host.root / "unknown-key-marker"
    # When a command that would create a marker is sent to web-03
    with pytest.raises(HostKeyError) as info:
        _try_to_touch(ssh_fleet, known, host, marker)
    # Then the error names the host, its address and the file, and hints at the fingerprint
    assert str(info.value) == (f"host key for web-03 ({host.address}:{host.port}) "
                               f"is not in {known}")
    assert "SHA256:" in (info.value.hint or "")
    # And the command never ran, no login happened, and known_hosts is unchanged byte for byte
    assert not marker.exists()
    assert _accepted(host) == accepted
    assert known.read_bytes() == before


def test_a_missing_known_hosts_file_is_not_created(ssh_fleet: SshFleet, tmp_path: Path) -> None:
    host = ssh_fleet["web-01"]
    known = tmp_path / "nothing" / "known_hosts"
    with pytest.raises(HostKeyError, match="is not in .* \\(the file does not exist\\)"):
        _try_to_touch(ssh_fleet, known, host, host.root / "never")
    assert not known.exists() and not known.parent.exists()


def test_a_changed_host_key_fails_as_a_possible_man_in_the_middle(
    private_ssh_fleet: SshFleet,
) -> None:
    # Given a host recorded in known_hosts, which then gets a new host key
    host = private_ssh_fleet.hosts[0]
    known = private_ssh_fleet.known_hosts
    before = known.read_bytes()
    host.new_host_key()
    host.restart()
    accepted = _accepted(host)
    marker = host.root / "changed-key-marker"
    # When a command is sent to it
    with pytest.raises(HostKeyError, match=r"host key for solo-01 \(127\.0\.11\.1:\d+\) has "
                       r"CHANGED since it was recorded in .*known_hosts \(line 1\): possible "
                       r"man-in-the-middle"):
        _try_to_touch(private_ssh_fleet, known, host, marker)
    # Then nothing ran, nobody logged in, and known_hosts is exactly as it was
    assert not marker.exists()
    assert _accepted(host) == accepted
    assert known.read_bytes() == before


def test_cert_authority_lines_comments_and_garbage_are_tolerated(
    ssh_fleet: SshFleet, tmp_path: Path,
) -> None:
    host = ssh_fleet["web-02"]
    ca_key = host.host_key_line.split()[1]
    known = tmp_path / "known_hosts"
    known.write_text(
        "# fleet hosts\n"
        f"@cert-authority *.example.com ssh-ed25519 {ssh_fleet['web-01'].host_key_line.split()[1]}\n"
        f"@cert-authority [127.0.10.2]:* ssh-ed25519 {ca_key}\n"
        "this line is not a key\n"
        "\n"
        + host.known_hosts_line + "\n"
    )
    marker = host.root / "cert-authority-ok"
    _try_to_touch(ssh_fleet, known, host, marker)
    assert marker.exists()
    marker.unlink()


def test_hashed_known_hosts_entries_are_matched(ssh_fleet: SshFleet, tmp_path: Path) -> None:
    # Given a known_hosts file hashed by ssh-keygen -H (as Debian's HashKnownHosts writes it)
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    host = ssh_fleet["web-04"]
    known = tmp_path / "known_hosts"
    known.write_text(host.known_hosts_line + "\n")
    subprocess.run(["ssh-keygen", "-H", "-f", str(known)], check=True, capture_output=True)
    assert known.read_text().startswith("|1|")
    # Then the host is recognised
    marker = host.root / "hashed-ok"
    _try_to_touch(ssh_fleet, known, host, marker)
    assert marker.exists()
    marker.unlink()


def test_a_revoked_host_key_is_refused_even_when_also_listed(
    ssh_fleet: SshFleet, tmp_path: Path,
) -> None:
    host = ssh_fleet["web-01"]
    known = tmp_path / "known_hosts"
    known.write_text(f"@revoked * {host.host_key_line}\n{host.known_hosts_line}\n")
    with pytest.raises(HostKeyError, match="is marked @revoked"):
        _try_to_touch(ssh_fleet, known, host, host.root / "never")


def test_wildcards_and_negations_match_like_openssh() -> None:
    known = KnownHosts(Path("kh"), [])
    from tasks.executors.ssh.known_hosts import parse

    known.entries = list(parse("*.example.com,!bad.example.com ssh-ed25519 AAAA\n"
                               "[10.0.0.?]:2222 ssh-ed25519 BBBB\n"))
    assert known.verify(["web.example.com"], "ssh-ed25519", "AAAA")[0] is Verdict.KNOWN
    assert known.verify(["bad.example.com"], "ssh-ed25519", "AAAA")[0] is Verdict.UNKNOWN
    assert known.verify(["[10.0.0.7]:2222"], "ssh-ed25519", "BBBB")[0] is Verdict.KNOWN
    assert known.verify(["[10.0.0.7]:2222"], "ssh-ed25519", "CCCC")[0] is Verdict.CHANGED
    assert known.verify(["[10.0.0.17]:2222"], "ssh-ed25519", "BBBB")[0] is Verdict.UNKNOWN
    assert known.verify(["10.0.0.7"], "ssh-ed25519", "BBBB")[0] is Verdict.UNKNOWN


def test_a_host_that_no_longer_offers_the_recorded_key_type_counts_as_changed(
    ssh_fleet: SshFleet, tmp_path: Path,
) -> None:
    # Given known_hosts recording an ECDSA key for web-01, which only has an ed25519 key
    subprocess.run(["ssh-keygen", "-q", "-t", "ecdsa", "-N", "", "-f", str(tmp_path / "ecdsa")],
                   check=True)
    host = ssh_fleet["web-01"]
    keytype, blob = (tmp_path / "ecdsa.pub").read_text().split()[:2]
    known = tmp_path / "known_hosts"
    known.write_text(f"[{host.address}]:{host.port} {keytype} {blob}\n")
    # Then the handshake is not allowed to fall back to the unrecorded ed25519 key
    with pytest.raises(HostKeyError, match="CHANGED: it offers none of the key types recorded"):
        _try_to_touch(ssh_fleet, known, host, host.root / "never")
    assert not (host.root / "never").exists()
