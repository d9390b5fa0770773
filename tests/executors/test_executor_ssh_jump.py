"""Jump hosts (ProxyJump) against real OpenSSH sshd: bastions and the hosts behind them
(``tests/fleet.py`` ``start_jump_fleet``). The bastions log at DEBUG1, so each test reads in a
bastion's own log that the connection to the host went through it ("server_request_direct_tcpip
... target ADDRESS port PORT") and how many times it was logged in to ("Accepted publickey")."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from scheduler.errors import ConfigError, HostKeyError, HostUnreachableError
from tests.cli_support import isolated_env, run_cli
from tests.fleet import FleetHost, JumpFleet, current_user, start_fleet, start_jump_fleet
from tests.servers import free_port

pytestmark = pytest.mark.sshd


@pytest.fixture(scope="module")
def jf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JumpFleet]:
    """Two bastions (jump-01, jump-02 on 127.0.12.1-2) and three hosts behind them (inner-01..03
    on 127.0.13.1-3); tests leave them running with their keys."""
    fleet = start_jump_fleet(tmp_path_factory.mktemp("jumpfleet"))
    yield fleet
    fleet.stop()


class Log:
    """What an sshd logged from now on."""

    def __init__(self, host: FleetHost) -> None:
        self.path = host.log_path
        self.start = self.path.stat().st_size

    def text(self) -> str:
        return self.path.read_bytes()[self.start:].decode(errors="replace")

    def logins(self) -> int:
        return self.text().count("Accepted publickey")

    def forwarded_to(self, host: FleetHost) -> int:
        """How many direct-tcpip channels the bastion opened to ``host``."""
        return len(re.findall(rf"server_request_direct_tcpip: originator 127\.0\.0\.1 port 0, "
                              rf"target {re.escape(host.address)} port {host.port}\r?$",
                              self.text(), re.MULTILINE))


def ssh_config(jf: JumpFleet, path: Path, extra: str = "") -> Path:
    """Aliases jump-1 and jump-2 for the bastions (HostName, Port), as an operator writes them."""
    lines = [f"Host jump-{i}\n  HostName {b.address}\n  Port {b.port}\n"
             for i, b in enumerate(jf.bastions, 1)]
    path.write_text("".join(lines) + extra)
    return path


def executor(jf: JumpFleet, config: Path, **options):
    from tasks.executors import build_executor

    return build_executor("ssh", jf.inner.ssh_options(**options),
                          jf.settings(ssh_config=config))


def run_marker(ex, host, name: str, **changes) -> str:
    """Run a command writing ``name`` in the host's directory; what the session calls the host."""
    with ex.session(host.host(**changes)) as session:
        result = session.run(["sh", "-c", f"echo ran > {host.root / name}"], timeout=20)
        assert result.ok, result
        return session.target.where


@pytest.mark.parametrize("source", ["fleetsched_jump", "ansible_ssh_common_args", "option",
                                    "ssh_config"])
def test_a_job_runs_on_a_host_through_its_bastion_from_each_place_a_jump_is_set(
        jf: JumpFleet, tmp_path: Path, source: str) -> None:
    # Given inner-01 routed through jump-1, set in one of the four places
    bastion, target = jf.bastions["jump-01"], jf.inner["inner-01"]
    spec = f"{current_user()}@{bastion.address}:{bastion.port}"
    config = ssh_config(jf, tmp_path / "ssh_config",
                        "Host inner-*\n  ProxyJump jump-1\n" if source == "ssh_config" else "")
    hvars = {"root": str(target.root)}
    if source == "fleetsched_jump":
        hvars["fleetsched_jump"] = "jump-1"
    elif source == "ansible_ssh_common_args":
        hvars["ansible_ssh_common_args"] = f"-o StrictHostKeyChecking=yes -o ProxyJump={spec}"
    ex = executor(jf, config, **({"jump": spec} if source == "option" else {}))
    log = Log(bastion)
    # When a job runs a command there
    try:
        where = run_marker(ex, target, f"ran-{source}", vars=hvars)
    finally:
        ex.close()
    # Then it ran on the host, through the bastion: the bastion's sshd opened the channel to it
    assert (target.root / f"ran-{source}").read_text() == "ran\n"
    assert log.forwarded_to(target) == 1, log.text()[-3000:]
    assert f"connected to {target.address} port {target.port}" in log.text()
    assert log.logins() == 1
    assert where.startswith(f"inner-01 ({target.address}:{target.port} via ")


def test_a_chain_of_two_bastions_goes_through_both_in_order(jf: JumpFleet, tmp_path: Path) -> None:
    first, second, target = jf.bastions["jump-01"], jf.bastions["jump-02"], jf.inner["inner-02"]
    ex = executor(jf, ssh_config(jf, tmp_path / "ssh_config"))
    logs = Log(first), Log(second)
    try:
        where = run_marker(ex, target, "ran-chain", vars={"fleetsched_jump": "jump-1,jump-2"})
    finally:
        ex.close()
    assert (target.root / "ran-chain").exists()
    # jump-1 forwarded to jump-2 (and to nothing else), jump-2 to the host; one login each
    assert logs[0].forwarded_to(second) == 1 and logs[0].forwarded_to(target) == 0
    assert logs[1].forwarded_to(target) == 1
    assert (logs[0].logins(), logs[1].logins()) == (1, 1)
    assert where == f"inner-02 ({target.address}:{target.port} via jump-2)"


def test_the_first_bastions_own_proxyjump_in_the_ssh_config_goes_before_it(
        jf: JumpFleet, tmp_path: Path) -> None:
    # Given jump-2 reachable only through jump-1, as the ssh config says (OpenSSH's nested ssh
    # for jump-2 would honour that), and a host whose inventory names jump-2 alone
    first, second, target = jf.bastions["jump-01"], jf.bastions["jump-02"], jf.inner["inner-03"]
    ex = executor(jf, ssh_config(jf, tmp_path / "ssh_config", "Host jump-2\n  ProxyJump jump-1\n"))
    logs = Log(first), Log(second)
    try:
        run_marker(ex, target, "ran-nested", vars={"fleetsched_jump": "jump-2"})
    finally:
        ex.close()
    assert logs[0].forwarded_to(second) == 1 and logs[1].forwarded_to(target) == 1
    # And a loop of bastions is refused before anything connects
    ex = executor(jf, ssh_config(jf, tmp_path / "loop_config", "Host jump-2\n  ProxyJump jump-1\n"
                                 "Host jump-1\n  ProxyJump jump-2\n"))
    with pytest.raises(ConfigError, match="more than 8 .a loop"):
        run_marker(ex, target, "never", vars={"fleetsched_jump": "jump-2"})
    ex.close()


@pytest.mark.parametrize("pool", [True, False])
def test_jobs_on_several_hosts_behind_one_bastion_share_one_bastion_login(
        jf: JumpFleet, tmp_path: Path, pool: bool) -> None:
    # Given three hosts behind jump-1 and an executor (one worker process's)
    bastion = jf.bastions["jump-01"]
    ex = executor(jf, ssh_config(jf, tmp_path / "ssh_config"), pool=pool)
    log = Log(bastion)
    jobs = [h for h in jf.inner for _ in range(3)]
    # When nine jobs run on them, three at a time
    try:
        with ThreadPoolExecutor(3) as threads:
            list(threads.map(lambda ij: run_marker(ex, ij[1], f"ran-{pool}-{ij[0]}",
                                                   vars={"fleetsched_jump": "jump-1"}),
                             enumerate(jobs)))
        assert ex.bastions.count() == 1
    finally:
        ex.close()
    # Then the bastion was logged in to once; each host connection went through it
    assert log.logins() == 1, log.text()[-3000:]
    per_host = [log.forwarded_to(h) for h in jf.inner]
    assert all(n >= 1 for n in per_host) and sum(per_host) <= 9
    if not pool:  # no pooled host connections: one channel per job, one login still
        assert sum(per_host) == 9
    assert ex.bastions.count() == 0  # closed with the executor


def test_two_aliases_of_one_bastion_with_their_own_key_files_are_two_logins(
        jf: JumpFleet, tmp_path: Path) -> None:
    # Given two ssh-config aliases of jump-01, the second with an IdentityFile of its own (a
    # team's key, say): a job through one must never ride on the other's bastion login
    bastion = jf.bastions["jump-01"]
    team_key = tmp_path / "team_key"
    team_key.write_bytes(jf.inner.identity.read_bytes())
    team_key.chmod(0o600)
    alias = f"  HostName {bastion.address}\n  Port {bastion.port}\n"
    config = ssh_config(jf, tmp_path / "ssh_config",
                        f"Host ops-gate\n{alias}Host team-gate\n{alias}  IdentityFile {team_key}\n")
    ex = executor(jf, config)
    log = Log(bastion)
    try:
        # When jobs run through ops-gate, team-gate, then ops-gate again
        for host, gate in zip(jf.inner, ("ops-gate", "team-gate", "ops-gate")):
            assert run_marker(ex, host, f"alias-{gate}", vars={"fleetsched_jump": gate})
        # Then the bastion saw two logins (one per key set), and the third job reused the first
        assert ex.bastions.count() == 2
    finally:
        ex.close()
    assert log.logins() == 2, log.text()[-3000:]
    assert all(log.forwarded_to(h) == 1 for h in jf.inner)


def test_an_unknown_bastion_key_fails_naming_the_bastion_and_nothing_runs(
        jf: JumpFleet, tmp_path: Path) -> None:
    # Given a known_hosts without jump-01's key (the host behind it is known)
    bastion, target = jf.bastions["jump-01"], jf.inner["inner-03"]
    known = tmp_path / "known_hosts"
    known.write_text("".join(h.known_hosts_line + "\n" for h in [*jf.bastions, *jf.inner]
                             if h is not bastion))
    from tasks.executors import build_executor

    ex = build_executor("ssh", jf.inner.ssh_options(), jf.settings(
        known_hosts=known, ssh_config=ssh_config(jf, tmp_path / "ssh_config")))
    logs = Log(bastion), Log(target)
    # When a job is sent to the host through it
    with pytest.raises(HostKeyError) as caught:
        run_marker(ex, target, "never", vars={"fleetsched_jump": "jump-1"})
    ex.close()
    # Then the error is the bastion's, and nothing logged in anywhere or ran
    assert str(caught.value).startswith(
        f"bastion jump-1 ({bastion.address}:{bastion.port}) host key refused (while reaching "
        f"inner-03): host key for jump-1 ({bastion.address}:{bastion.port}) is not in {known}")
    assert f"ssh-keyscan -p {bastion.port} {bastion.address}" in caught.value.hint
    assert logs[0].logins() == 0 and "userauth-request" not in logs[0].text()
    assert logs[0].forwarded_to(target) == 0
    assert "Connection from" not in logs[1].text() and logs[1].logins() == 0
    assert not (target.root / "never").exists()
    assert known.read_text().count("\n") == len(jf.bastions) + len(jf.inner) - 1  # untouched


def test_a_changed_key_on_the_second_bastion_fails_naming_it(jf: JumpFleet, tmp_path: Path) -> None:
    # Given known_hosts recording jump-01's key for jump-02 as well (so jump-02's is "changed")
    first, second, target = jf.bastions["jump-01"], jf.bastions["jump-02"], jf.inner["inner-01"]
    known = tmp_path / "known_hosts"
    wrong = f"[{second.address}]:{second.port} " + " ".join(first.host_key_line.split()[:2])
    known.write_text("".join(h.known_hosts_line + "\n" for h in [first, *jf.inner]) + wrong + "\n")
    from tasks.executors import build_executor

    ex = build_executor("ssh", jf.inner.ssh_options(), jf.settings(
        known_hosts=known, ssh_config=ssh_config(jf, tmp_path / "ssh_config")))
    log = Log(second)
    with pytest.raises(HostKeyError, match=rf"^bastion jump-2 \({second.address}:{second.port}\) "
                                           r"host key refused \(while reaching inner-01\): .*"
                                           r"(CHANGED|offers none of the key types)"):
        run_marker(ex, target, "never", vars={"fleetsched_jump": "jump-1,jump-2"})
    ex.close()
    assert log.logins() == 0 and not (target.root / "never").exists()


def test_a_bastion_that_is_down_or_restarted_is_reported_as_the_bastion(
        jf: JumpFleet, tmp_path: Path) -> None:
    # Given a bastion of the test's own, logged in to by a first job
    gate = start_fleet(tmp_path / "gate", count=1, prefix="gate", net="127.0.14",
                       client=jf.bastions.identity, log_level="DEBUG1").hosts[0]
    try:
        known = tmp_path / "known_hosts"
        known.write_text(jf.known_hosts.read_text() + gate.known_hosts_line + "\n")
        config = tmp_path / "ssh_config"
        config.write_text(f"Host gate\n  HostName {gate.address}\n  Port {gate.port}\n")
        from tasks.executors import build_executor

        ex = build_executor("ssh", jf.inner.ssh_options(connect_timeout=3), jf.settings(
            known_hosts=known, ssh_config=config))
        target = jf.inner["inner-01"]
        run_marker(ex, target, "gate-1", vars={"fleetsched_jump": "gate"})
        # When the bastion restarts (its connections die), the next job logs in to it again
        gate.restart()
        log = Log(gate)
        run_marker(ex, target, "gate-2", vars={"fleetsched_jump": "gate"})
        assert log.logins() == 1 and log.forwarded_to(target) == 1
        ex.close()
        # And when it is down, a job (a worker process that has no login to it yet) fails
        # with the bastion's failure, not the host's
        gate.stop()
        ex = build_executor("ssh", jf.inner.ssh_options(connect_timeout=3), jf.settings(
            known_hosts=known, ssh_config=config))
        with pytest.raises(HostUnreachableError) as caught:
            run_marker(ex, target, "never", vars={"fleetsched_jump": "gate"})
        ex.close()
        assert str(caught.value).startswith(
            f"bastion gate ({gate.address}:{gate.port}) unreachable (while reaching inner-01): "
            f"cannot connect to gate ({gate.address}:{gate.port}): ")
        assert not (target.root / "never").exists()
    finally:
        gate.kill()


def test_a_host_the_bastion_cannot_reach_says_so(jf: JumpFleet, tmp_path: Path) -> None:
    # Given a host whose port nothing listens on, behind a working bastion
    bastion, target = jf.bastions["jump-01"], jf.inner["inner-01"]
    port = free_port(target.address)
    ex = executor(jf, ssh_config(jf, tmp_path / "ssh_config"))
    log = Log(bastion)
    with pytest.raises(HostUnreachableError) as caught:
        run_marker(ex, target, "never", port=port, vars={"fleetsched_jump": "jump-1"})
    ex.close()
    # Then the message says the bastion could not reach it (and the bastion tried)
    assert str(caught.value).startswith(
        f"bastion jump-1 ({bastion.address}:{bastion.port}) cannot reach inner-01 "
        f"({target.address}:{port}): "), str(caught.value)
    assert f"target {target.address} port {port}" in log.text()


def test_proxycommand_stays_refused_in_one_line(jf: JumpFleet, tmp_path: Path) -> None:
    ex = executor(jf, ssh_config(jf, tmp_path / "ssh_config"))
    with pytest.raises(ConfigError, match=r"^host inner-01: ansible_ssh_common_args sets "
                                          r"ProxyCommand: the ssh executor runs no proxy "
                                          r"commands$"):
        run_marker(ex, jf.inner["inner-01"], "never", vars={
            "ansible_ssh_common_args": "-o ProxyCommand='ssh -W %h:%p -q bastion'"})
    with pytest.raises(ConfigError, match="not a jump host"):
        run_marker(ex, jf.inner["inner-01"], "never", vars={"fleetsched_jump": "a b"})
    ex.close()


def test_hosts_check_goes_through_the_bastion_and_shows_the_route(
        jf: JumpFleet, tmp_path: Path) -> None:
    # Given an INI inventory: the inner hosts behind jump-1 by Ansible's group variable, and
    # inner-03 behind the chain jump-1,jump-2 by its own fleetsched_jump (which wins)
    bastion, second = jf.bastions["jump-01"], jf.bastions["jump-02"]
    config = ssh_config(jf, tmp_path / "ssh_config")
    inv = tmp_path / "hosts.ini"
    rows = [f"{h.name} ansible_host={h.address} ansible_port={h.port}" for h in jf.inner]
    rows[2] += " fleetsched_jump=jump-1,jump-2"
    inv.write_text("[inner]\n" + "\n".join(rows) + "\n\n[inner:vars]\n"
                   "ansible_ssh_common_args='-o ProxyJump=jump-1'\n")
    env = isolated_env(tmp_path, FLEETSCHED_KNOWN_HOSTS=str(jf.known_hosts),
                       FLEETSCHED_SSH_CONFIG=str(config),
                       FLEETSCHED_SSH_IDENTITY_FILE=str(jf.inner.identity))
    code, _out, err = run_cli(["hosts", "import", str(inv)], env=env)
    assert code == 0, err
    log = Log(bastion)
    # When they are checked
    code, out, err = run_cli(["hosts", "check", "group:inner", "--executor-option",
                              "allow_agent=false", "--executor-option", "look_for_keys=false",
                              "--output", "json"], env=env)
    # Then every one is ok, through its route, and jump-1 was logged in to once for them all
    assert code == 0, err
    rows_by_host = {h["host"]: h for h in json.loads(out)["hosts"]}
    first_hop = f"jump-1 ({bastion.address}:{bastion.port})"
    for h in jf.inner:
        row = rows_by_host[h.name]
        assert row["status"] == "ok" and row["host_key"] == "ok", row
    assert [rows_by_host[h.name]["via"] for h in jf.inner] == [first_hop, first_hop, (
        f"{first_hop} -> jump-2 ({second.address}:{second.port})")]
    assert [log.forwarded_to(h) for h in [*jf.inner, second]] == [1, 1, 0, 1]
    assert log.logins() == 1
    # And the table shows the route in the address column
    code, out, err = run_cli(["hosts", "check", "inner-01", "--executor-option",
                              "allow_agent=false", "--executor-option", "look_for_keys=false"],
                             env=env)
    target = jf.inner["inner-01"]
    assert code == 0 and re.search(rf"{target.address}:{target.port} via jump-1\b", out), out


def test_hosts_check_names_the_bastion_when_its_key_is_unknown(
        jf: JumpFleet, tmp_path: Path) -> None:
    bastion, target = jf.bastions["jump-01"], jf.inner["inner-01"]
    known = tmp_path / "known_hosts"
    known.write_text("".join(h.known_hosts_line + "\n" for h in [*jf.bastions, *jf.inner]
                             if h is not bastion))
    env = isolated_env(tmp_path, FLEETSCHED_KNOWN_HOSTS=str(known),
                       FLEETSCHED_SSH_CONFIG=str(ssh_config(jf, tmp_path / "ssh_config")),
                       FLEETSCHED_SSH_IDENTITY_FILE=str(jf.inner.identity))
    code, _out, err = run_cli(["hosts", "add", target.name, "--address", target.address,
                               "--port", str(target.port), "--var", "fleetsched_jump=jump-1"],
                              env=env)
    assert code == 0, err
    code, out, err = run_cli(["hosts", "check", target.name, "--executor-option",
                              "allow_agent=false", "--executor-option", "look_for_keys=false",
                              "--output", "json"], env=env)
    assert code == 3
    row = json.loads(out)["hosts"][0]
    assert row["status"] == "unknown-key" and row["reachable"] is False
    assert row["host_key"] == "" and row["auth"] == ""
    assert row["error"].startswith(f"bastion jump-1 ({bastion.address}:{bastion.port}) host key "
                                   "refused (while reaching inner-01)")


# ----------------------------------------------------------------- how a chain is written

@pytest.mark.parametrize(("args", "hops"), [
    ("-o ProxyJump=ops@b1:2222,b2", (("b1", 2222, "ops"), ("b2", 0, None))),
    ("-oProxyJump=b1", (("b1", 0, None),)),
    ("-o 'ProxyJump b1:22' -o ProxyJump=ignored", (("b1", 22, None),)),  # ssh keeps the first
    ("-C -J ssh://ops@[fd00::9]:2200", (("fd00::9", 2200, "ops"),)),
    ("-o ServerAliveInterval=5", None),
    ("-o ProxyJump=none", ()),
])
def test_ansible_ssh_args_are_read_as_ssh_reads_them(args: str, hops) -> None:
    from tasks.executors.ssh.jump import from_ssh_args

    found = from_ssh_args(args, "host h: ansible_ssh_common_args")
    assert (None if found is None else tuple((h.host, h.port, h.user) for h in found)) == hops


@pytest.mark.parametrize("spec", ["b1:0", "b1:99999", "b1:x", "-oProxyCommand=x", "a b", "b1,,b2",
                                  "ops;rm@b1", ",".join(["b"] * 9)])
def test_a_malformed_jump_is_a_configuration_error_naming_where_it_was_set(spec: str) -> None:
    from tasks.executors.ssh.jump import parse_hops

    with pytest.raises(ConfigError, match=r"^host h: fleetsched_jump: "):
        parse_hops(spec, "host h: fleetsched_jump")


def test_a_bad_user_part_of_a_jump_is_refused_without_repeating_it() -> None:
    from tasks.executors.ssh.jump import parse_hops

    # `user:password@host` is no OpenSSH form; whatever is before the @ is not echoed
    with pytest.raises(ConfigError) as refused:
        parse_hops("ops:hunter2@b1", "host h: fleetsched_jump")
    assert "hunter2" not in str(refused.value) and "before @b1" in str(refused.value)
