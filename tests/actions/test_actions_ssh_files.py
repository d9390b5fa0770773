"""``copy`` and ``firmware`` end to end on real OpenSSH hosts: verified uploads, atomic
replacement, cleanup on every failure path, version checks, and a reboot the action waits out."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

import pytest

from tasks import ActionContext
from tests.actions_support import run_action
from tests.fleet import FleetHost, SshFleet

pytestmark = pytest.mark.sshd


def _local(tmp_path: Path, name: str, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def _leftovers(directory: Path, keep: set[str]) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name not in keep)


# -------------------------------------------------------------------------------------- copy


def test_a_copied_file_arrives_verified_with_its_mode_and_no_temporary_file_left(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = ssh_fleet.hosts[0]
    dest_dir = fh.root / "copy-ok"
    dest_dir.mkdir()
    data = os.urandom(300_000)
    params = {"src": _local(tmp_path, "app.conf", data), "dest": str(dest_dir / "app.conf"),
              "mode": "0640"}
    result = run_action(ssh_fleet, fh, "copy", params)
    assert result.ok and result.changed, result.error
    dest = dest_dir / "app.conf"
    assert dest.read_bytes() == data and (dest.stat().st_mode & 0o7777) == 0o640
    assert _leftovers(dest_dir, {"app.conf"}) == []
    assert any(r.command.startswith("sha256sum ") for r in result.results)
    # Copying the same file again changes nothing (idempotent)
    again = run_action(ssh_fleet, fh, "copy", params)
    assert again.ok and again.changed is False
    assert not any(r.command.startswith("chmod") for r in again.results)


def test_a_copy_replaces_an_existing_file_by_rename_so_readers_never_see_half_a_file(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = ssh_fleet.hosts[1]
    dest = fh.root / "replace.conf"
    dest.write_bytes(b"old contents\n")
    old_inode = dest.stat().st_ino
    held_open = dest.open("rb")  # a reader that opened the old file keeps reading the old file
    try:
        result = run_action(ssh_fleet, fh, "copy", {
            "src": _local(tmp_path, "new.conf", b"new contents\n"), "dest": str(dest)})
        assert result.ok, result.error
        assert dest.read_bytes() == b"new contents\n" and dest.stat().st_ino != old_inode
        assert held_open.read() == b"old contents\n"
        assert (dest.stat().st_mode & 0o7777) == 0o644  # the default mode
    finally:
        held_open.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_a_copy_sets_the_owner_only_when_asked(ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = ssh_fleet.hosts[2]
    src = _local(tmp_path, "owned", b"x")
    owned, plain = fh.root / "owned", fh.root / "plain"
    assert run_action(ssh_fleet, fh, "copy", {"src": src, "dest": str(owned),
                                              "owner": "nobody"}).ok
    assert run_action(ssh_fleet, fh, "copy", {"src": src, "dest": str(plain)}).ok
    import pwd

    assert pwd.getpwuid(owned.stat().st_uid).pw_name == "nobody"
    assert plain.stat().st_uid == os.geteuid()


def test_a_checksum_mismatch_leaves_the_destination_untouched_and_removes_the_temp_file(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    # Given a destination with content, and an upload that arrives corrupted
    fh = ssh_fleet.hosts[3]
    dest_dir = fh.root / "copy-corrupt"
    dest_dir.mkdir()
    dest = dest_dir / "app.conf"
    dest.write_bytes(b"the good old file\n")
    before = dest.stat()
    # When the copy runs
    result = run_action(ssh_fleet, fh, "copy", {
        "src": _local(tmp_path, "app.conf", b"the new file\n"), "dest": str(dest)}, corrupt=True)
    # Then it fails on the host's sha256sum, the destination is as it was, no temp file is left
    assert not result.ok and result.retryable
    assert (result.error or "").startswith("checksum mismatch for the uploaded file")
    assert dest.read_bytes() == b"the good old file\n"
    assert dest.stat().st_ino == before.st_ino and dest.stat().st_mtime_ns == before.st_mtime_ns
    assert _leftovers(dest_dir, {"app.conf"}) == []


def test_a_copy_into_a_missing_directory_fails_for_good_with_a_clear_message(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = ssh_fleet.hosts[0]
    result = run_action(ssh_fleet, fh, "copy", {"src": _local(tmp_path, "f", b"x"),
                                                "dest": str(fh.root / "no-such-dir" / "f")})
    assert not result.ok and not result.retryable
    assert "upload of the file to" in (result.error or "") and "no-such-dir" in result.error


def test_a_source_pinned_to_another_checksum_is_never_uploaded(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = ssh_fleet.hosts[0]
    dest = fh.root / "pinned.conf"
    result = run_action(ssh_fleet, fh, "copy", {"src": _local(tmp_path, "p", b"content"),
                                                "dest": str(dest), "sha256": "0" * 64})
    assert not result.ok and not result.retryable and "required sha256" in (result.error or "")
    assert not dest.exists()


# ---------------------------------------------------------------------------------- firmware


def _device(fh: FleetHost, name: str, version: str = "4.1") -> Path:
    """A pretend device in the host's scratch dir: a version file and an install log."""
    dev = fh.root / name
    (dev / "tmp").mkdir(parents=True)
    (dev / "version").write_text(version + "\n")
    return dev


def _firmware(dev: Path, image: str, installs: str = "4.2", **extra: object) -> dict[str, object]:
    upgrade = ('cp "$1" "$2/installed.bin" && echo "$3" > "$2/version" && '
               'echo upgraded >> "$2/upgrades"')
    return {
        "image": image, "upgrade_cmd": ["sh", "-c", upgrade, "sh", "{image}", str(dev), installs],
        "version_cmd": ["cat", str(dev / "version")], "expected_version": "4.2",
        "remote_tmp": str(dev / "tmp"), **extra,
    }


def test_a_firmware_upgrade_uploads_verifies_installs_and_checks_the_version(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = ssh_fleet.hosts[1]
    dev = _device(fh, "fw-ok")
    data = os.urandom(1_000_000)
    image = _local(tmp_path, "fw-4.2.bin", data)
    params = _firmware(dev, image, sha256=hashlib.sha256(data).hexdigest())
    result = run_action(ssh_fleet, fh, "firmware", params)
    assert result.ok and result.changed, result.error
    assert (dev / "installed.bin").read_bytes() == data
    assert list((dev / "tmp").iterdir()) == []  # the uploaded image is gone
    # A second run finds version 4.2 already and does nothing
    again = run_action(ssh_fleet, fh, "firmware", params)
    assert again.ok and again.changed is False and len(again.results) == 1
    assert (dev / "upgrades").read_text() == "upgraded\n"


def test_a_firmware_that_reports_the_wrong_version_fails_for_good(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = ssh_fleet.hosts[2]
    dev = _device(fh, "fw-wrong")
    result = run_action(ssh_fleet, fh, "firmware",
                        _firmware(dev, _local(tmp_path, "fw.bin", b"img"), installs="4.1.9"))
    assert not result.ok and not result.retryable
    assert result.error == "version check: the host reports '4.1.9', expected '4.2'"
    assert list((dev / "tmp").iterdir()) == []


def test_a_corrupted_firmware_upload_is_never_installed(ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = ssh_fleet.hosts[3]
    dev = _device(fh, "fw-corrupt")
    result = run_action(ssh_fleet, fh, "firmware",
                        _firmware(dev, _local(tmp_path, "fw.bin", b"firmware image")), corrupt=True)
    assert not result.ok
    assert (result.error or "").startswith("checksum mismatch for the uploaded firmware image")
    assert not (dev / "installed.bin").exists() and list((dev / "tmp").iterdir()) == []
    assert (dev / "version").read_text() == "4.1\n"


def _reboot_when_asked(fh: FleetHost, flag: Path, down_s: float, stop: threading.Event,
                       come_back: bool = True) -> threading.Thread:
    """Plays the machine: when ``flag`` appears, sshd and its sessions die; later it restarts."""
    def watch() -> None:
        while not stop.is_set():
            if flag.exists():
                fh.kill()
                time.sleep(down_s)
                if come_back:
                    fh.start()
                return
            time.sleep(0.01)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_firmware_upgrade_reboots_and_waits_for_the_host_to_come_back(
        private_ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = private_ssh_fleet.hosts[0]
    dev = _device(fh, "fw-reboot")
    flag = dev / "reboot-requested"
    stop = threading.Event()
    watcher = _reboot_when_asked(fh, flag, down_s=1.5, stop=stop)
    try:
        result = run_action(private_ssh_fleet, fh, "firmware", _firmware(
            dev, _local(tmp_path, "fw.bin", b"img"), reboot=True,
            reboot_cmd=["touch", str(flag)], reboot_delay="0.3s", reconnect_timeout="30s"))
    finally:
        stop.set()
        watcher.join(10)
    assert result.ok, result.error
    # the version was read on a new connection, after sshd and all its sessions were killed
    assert fh.is_alive() and flag.exists()
    assert result.results[-1].command == f"cat {dev / 'version'}" and result.results[-1].ok
    assert "Accepted publickey" in fh.log_path.read_text().split("Server listening")[-1]


def test_a_host_that_does_not_come_back_after_the_reboot_fails_at_the_deadline(
        private_ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = private_ssh_fleet.hosts[0]
    dev = _device(fh, "fw-gone")
    flag = dev / "reboot-requested"
    stop = threading.Event()
    watcher = _reboot_when_asked(fh, flag, down_s=0, stop=stop, come_back=False)
    ctx = ActionContext()
    started = time.monotonic()
    try:
        result = run_action(private_ssh_fleet, fh, "firmware", _firmware(
            dev, _local(tmp_path, "fw.bin", b"img"), reboot=True,
            reboot_cmd=["touch", str(flag)], reboot_delay="0.2s", reconnect_timeout="3s"),
            ctx=ctx)
    finally:
        stop.set()
        watcher.join(10)
    assert not result.ok and result.retryable
    assert (result.error or "").startswith("the host did not come back after the reboot within 3s")
    assert time.monotonic() - started < 15


def test_a_copy_onto_a_directory_fails_for_good_and_leaves_nothing_behind(
        ssh_fleet: SshFleet, tmp_path: Path) -> None:
    fh = ssh_fleet.hosts[2]
    parent = fh.root / "copy-onto-dir"
    (parent / "target").mkdir(parents=True)
    (parent / "target" / "inside").write_text("keep")
    result = run_action(ssh_fleet, fh, "copy", {"src": _local(tmp_path, "f", b"x"),
                                                "dest": str(parent / "target")})
    assert not result.ok and not result.retryable
    assert result.error == f"{parent / 'target'} is a directory on the host; dest must name a file"
    assert _leftovers(parent, {"target"}) == [] and (parent / "target" / "inside").exists()
