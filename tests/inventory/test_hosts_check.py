"""``fleetsched hosts check`` against real sshd hosts (tests/fleet.py), through the CLI: every
verdict a host can get (ok, unreachable, UNKNOWN key with its fingerprint and the command to add
it, MISMATCH, auth failed, become), the JSON shape, and the exit codes 0, 3, 2 and 4.

Each test has its own database and known_hosts file; hosts are added with ``hosts add``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_support import isolated_env, run_cli
from tests.fleet import SshFleet, current_user, keygen

pytestmark = pytest.mark.sshd

NO_KEYS_BUT_THE_FLEETS = ["--executor-option", "allow_agent=false",
                          "--executor-option", "look_for_keys=false"]


def _env(tmp_path: Path, fleet: SshFleet, known_hosts: Path, **extra: str) -> dict:
    values = {"FLEETSCHED_KNOWN_HOSTS": str(known_hosts),
              "FLEETSCHED_SSH_CONFIG": str(fleet.ssh_config),
              "FLEETSCHED_SSH_IDENTITY_FILE": str(fleet.identity), **extra}
    return isolated_env(tmp_path, **values)


def _add_hosts(env: dict, fleet: SshFleet, group: str = "web") -> None:
    for h in fleet.hosts:
        code, _out, err = run_cli(["hosts", "add", h.name, "--address", h.address, "--port",
                                   str(h.port), "--user", current_user(), "--group", group],
                                  env=env)
        assert code == 0, err


def _check(env: dict, *args: str) -> tuple[int, str, str]:
    return run_cli(["hosts", "check", *args, *NO_KEYS_BUT_THE_FLEETS], env=env)


def _json(env: dict, *args: str) -> tuple[int, dict, str]:
    code, out, err = _check(env, *args, "--output", "json")
    return code, json.loads(out), err


@pytest.fixture
def known_hosts(ssh_fleet: SshFleet, tmp_path: Path) -> Path:
    """A copy of the fleet's known_hosts this test may change."""
    path = tmp_path / "known_hosts"
    path.write_text(ssh_fleet.known_hosts.read_text())
    return path


def test_every_host_ok_shows_its_remote_user_and_exits_0(
        ssh_fleet: SshFleet, known_hosts: Path, tmp_path: Path) -> None:
    # Given the four fleet hosts in the inventory with their keys in known_hosts
    env = _env(tmp_path, ssh_fleet, known_hosts)
    _add_hosts(env, ssh_fleet)
    # When they are checked
    code, out, err = _check(env, "group:web")
    # Then each is reachable, its key ok, the login ok, and the remote user is the login
    assert code == 0, err
    for h in ssh_fleet.hosts:
        cells = next(c for c in (ln.replace("│", " ").split() for ln in out.splitlines())
                     if c and c[0] == h.name)
        assert cells[1:6] == [f"{h.address}:{h.port}", "yes", "ok", "ok", current_user()]
    assert "4 host(s): 4 ok, 0 unreachable, 0 unknown key, 0 key mismatch, 0 auth failed" in err
    # And known_hosts was not touched
    assert known_hosts.read_text() == ssh_fleet.known_hosts.read_text()


def test_the_json_output_has_one_object_per_host_and_the_summary(
        ssh_fleet: SshFleet, known_hosts: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, ssh_fleet, known_hosts)
    _add_hosts(env, ssh_fleet)
    code, data, err = _json(env, "web-0[12]", "--concurrency", "1")
    assert code == 0, err
    assert set(data) == {"target", "known_hosts", "hosts", "summary", "ok"}
    assert data["ok"] is True and data["target"] == "web-0[12]"
    assert data["summary"] == {"ok": 2, "unreachable": 0, "unknown-key": 0, "key-mismatch": 0,
                               "auth-failed": 0, "become-failed": 0, "no-sftp": 0, "error": 0}
    first = data["hosts"][0]
    assert [h["host"] for h in data["hosts"]] == ["web-01", "web-02"]
    assert set(first) == {"host", "address", "port", "user", "via", "reachable", "host_key",
                          "fingerprint", "auth", "remote_user", "become", "files",
                          "latency_ms", "status", "error", "hint"}
    assert first["status"] == "ok" and first["reachable"] is True
    assert first["host_key"] == "ok" and first["fingerprint"].startswith("SHA256:")
    assert first["remote_user"] == current_user() and first["latency_ms"] >= 0
    assert first["files"] == "sftp" and first["via"] == ""  # reached directly


def test_a_stopped_host_is_unreachable_and_the_check_exits_3(
        private_ssh_fleet: SshFleet, ssh_fleet: SshFleet, tmp_path: Path) -> None:
    # Given one healthy host and one whose sshd is down
    known = tmp_path / "known_hosts"
    known.write_text(ssh_fleet.known_hosts.read_text() + private_ssh_fleet.known_hosts.read_text())
    env = _env(tmp_path, ssh_fleet, known)
    _add_hosts(env, ssh_fleet)
    _add_hosts(env, private_ssh_fleet, group="solo")
    private_ssh_fleet.hosts[0].stop()
    # When both are checked
    code, data, err = _json(env, "web-01,solo-01", "--timeout", "3s")
    # Then the stopped one is unreachable, the other ok, and the exit code says "some failed"
    assert code == 3
    by_host = {h["host"]: h for h in data["hosts"]}
    assert by_host["web-01"]["status"] == "ok"
    solo = by_host["solo-01"]
    assert solo["status"] == "unreachable" and solo["reachable"] is False
    assert solo["host_key"] == "" and solo["auth"] == "" and solo["latency_ms"] is None
    assert "cannot connect to solo-01" in solo["error"]
    assert data["summary"]["unreachable"] == 1 and data["ok"] is False
    assert "solo-01: unreachable: cannot connect to solo-01" in err


def test_a_host_missing_from_known_hosts_shows_its_fingerprint_and_how_to_add_it(
        ssh_fleet: SshFleet, known_hosts: Path, tmp_path: Path) -> None:
    # Given known_hosts without web-02's line
    gone = ssh_fleet["web-02"]
    known_hosts.write_text("".join(
        ln + "\n" for ln in known_hosts.read_text().splitlines()
        if not ln.startswith(f"[{gone.address}]:{gone.port} ")))
    before = known_hosts.read_text()
    env = _env(tmp_path, ssh_fleet, known_hosts)
    _add_hosts(env, ssh_fleet)
    # When it is checked
    code, out, err = _check(env, "web-02")
    # Then the table says UNKNOWN with the fingerprint the host presents (ssh-keygen's form)
    assert code == 3
    fp = _fingerprint(gone.host_key_line, tmp_path)
    assert f"UNKNOWN {fp}" in out
    # And stderr says how to add it after checking it, and it was not added
    assert f"web-02: unknown-key: host key ssh-ed25519 {fp} of web-02 is not in {known_hosts}" \
        in err
    assert f"ssh-keyscan -t ed25519 -p {gone.port} {gone.address} >> {known_hosts}" in err
    assert "1 unknown key" in err
    assert known_hosts.read_text() == before
    # And the login was never tried
    code, data, _err = _json(env, "web-02")
    assert data["hosts"][0]["auth"] == "" and data["hosts"][0]["remote_user"] == ""


def test_a_host_whose_recorded_key_differs_is_a_mismatch(
        ssh_fleet: SshFleet, known_hosts: Path, tmp_path: Path) -> None:
    # Given known_hosts recording another ed25519 key for web-03
    host = ssh_fleet["web-03"]
    other = keygen(tmp_path / "other_host_key", "impostor").split()
    known_hosts.write_text(known_hosts.read_text().replace(
        host.known_hosts_line, f"[{host.address}]:{host.port} {other[0]} {other[1]}"))
    env = _env(tmp_path, ssh_fleet, known_hosts)
    _add_hosts(env, ssh_fleet)
    code, data, _err = _json(env, "web-03")
    assert code == 3
    web03 = data["hosts"][0]
    assert web03["status"] == "key-mismatch" and web03["host_key"] == "MISMATCH"
    assert web03["fingerprint"] == _fingerprint(host.host_key_line, tmp_path)
    assert "possible man-in-the-middle" in web03["error"] and web03["auth"] == ""
    assert data["summary"]["key-mismatch"] == 1


def test_a_key_the_hosts_do_not_accept_is_auth_failed_with_the_reason(
        ssh_fleet: SshFleet, known_hosts: Path, tmp_path: Path) -> None:
    # Given an identity file none of the hosts authorizes
    stranger = tmp_path / "id_stranger"
    keygen(stranger, "stranger")
    env = _env(tmp_path, ssh_fleet, known_hosts, FLEETSCHED_SSH_IDENTITY_FILE=str(stranger))
    _add_hosts(env, ssh_fleet)
    code, data, err = _json(env, "web-04")
    assert code == 3
    web04 = data["hosts"][0]
    assert web04["status"] == "auth-failed" and web04["auth"] == "failed"
    assert web04["host_key"] == "ok"
    assert f"accepted no key for user {current_user()} ({stranger} refused)" in web04["error"]
    assert "1 auth failed" in err


def test_become_user_is_checked_through_sudo(ssh_fleet: SshFleet, known_hosts: Path,
                                             tmp_path: Path, sudo: str) -> None:
    env = _env(tmp_path, ssh_fleet, known_hosts)
    _add_hosts(env, ssh_fleet)
    code, data, err = _json(env, "web-01", "--become-user", "nobody")
    assert code == 0, err
    assert data["hosts"][0]["become"] == "nobody"


def test_a_target_that_matches_nothing_exits_4_and_a_malformed_one_2(
        ssh_fleet: SshFleet, known_hosts: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, ssh_fleet, known_hosts)
    _add_hosts(env, ssh_fleet)
    code, out, err = _check(env, "db-*")
    assert code == 4 and out == ""
    assert "error: target term 'db-*' selects no hosts" in err
    code, _out, err = _check(env, "group:nope")
    assert code == 4 and "no group named 'nope'" in err
    code, _out, err = _check(env, "web-01,,web-02")
    assert code == 2 and "empty term" in err
    code, _out, err = _check(env, "web-01", "--executor-option", "no_such=1")
    assert code == 2 and "ssh executor has no option 'no_such'" in err


def _fingerprint(public_line: str, tmp_path: Path) -> str:
    """``SHA256:...`` of a public key line, as ssh-keygen -l prints it."""
    import subprocess

    pub = tmp_path / "fp.pub"
    pub.write_text(public_line + "\n")
    out = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True,
                         check=True).stdout
    return out.split()[1]


def test_a_host_whose_sudo_asks_for_a_password_is_become_failed(
        ssh_fleet: SshFleet, known_hosts: Path, tmp_path: Path, nopw_user: str) -> None:
    # Given a host whose inventory says become, logged in to as a user sudo asks a password of
    env = _env(tmp_path, ssh_fleet, known_hosts)
    h = ssh_fleet["web-02"]
    code, _out, err = run_cli(["hosts", "add", h.name, "--address", h.address, "--port",
                               str(h.port), "--user", nopw_user, "--var", "ansible_become=true"],
                              env=env)
    assert code == 0, err
    # When it is checked
    code, data, err = _json(env, "web-02")
    # Then the login is fine and become is what failed, with the become error's words
    assert code == 3
    web02 = data["hosts"][0]
    assert (web02["status"], web02["auth"], web02["remote_user"]) == (
        "become-failed", "ok", nopw_user)
    assert web02["error"].startswith("become: sudo on web-02 asks for a password for root")
    assert "1 become failed" in err


def test_a_become_user_that_is_not_a_user_name_is_refused_before_any_host_is_checked(
        tmp_path: Path, redis_url: str) -> None:
    from scheduler.record.migrate import upgrade
    from tests.submit_support import Cli, inventory

    db = f"sqlite:///{tmp_path / 'fleetsched.db'}"
    upgrade(db)
    cli = Cli(tmp_path, redis_url, db)
    inventory(cli, tmp_path, "[web]\nweb-01\n")
    code, out, err = cli("hosts", "check", "--become-user", "root;id")
    assert code == 2 and out == "" and err.startswith("error: --become-user 'root;id' is not")
